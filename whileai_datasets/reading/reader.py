"""Reading whileai exports a chunk at a time: JSONL (plain or compressed) and Parquet.

The file objects come from the builder (so ``datasets``' streaming patches of
``open`` apply); this module only turns bytes into rows with their line
numbers, and rows into canonical tables, never holding more than one chunk.

A large plain JSONL file is read as byte ranges (the builder's shards): a
range holds the lines that *start* inside it, so every line belongs to exactly
one range, and numbering resumes from a :class:`LinePosition` that
:func:`count_lines` computes for the bytes before the range.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from whileai_datasets import option_names
from whileai_datasets._gc import gc_paused
from whileai_datasets.errors import ExportFormatError, WhileaiError
from whileai_datasets.reading.read_errors import nesting_error, unencodable_error
from whileai_datasets.rows.canonical import Chunk, Normalizer
from whileai_datasets.rows.features import MESSAGE_TYPE, message_from_storage
from whileai_datasets.rows.leaks import LeakScan
from whileai_datasets.rows.normalize import RowContext

logger = logging.getLogger("whileai_datasets")

#: Rows per Arrow chunk: large enough for Arrow to amortize, small enough that
#: a chunk of long rollouts stays in the tens of MB.
DEFAULT_CHUNK_ROWS = 2000


@dataclass
class BadRows:
    """Rows skipped under ``on_bad_row="skip"``: how many, and where."""

    count: int = 0
    locations: list[str] = field(default_factory=list)
    first_error: str | None = None

    #: at most this many locations are kept; ``count`` is always exact
    KEEP: int = 1000

    def add(self, err: WhileaiError) -> None:
        self.count += 1
        if self.first_error is None:
            self.first_error = str(err)
        if len(self.locations) < self.KEEP:
            self.locations.append(err.location or "")

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "first_error": self.first_error, "locations": list(self.locations)}

    def merge(self, report: dict[str, Any]) -> None:
        """Add a report (``to_dict()`` of rows skipped later in the file
        order, e.g. by another ``num_proc`` worker)."""
        self.count += int(report["count"])
        if self.first_error is None:
            self.first_error = report["first_error"]
        room = self.KEEP - len(self.locations)
        if room > 0:
            self.locations.extend(report["locations"][:room])


@dataclass
class LinePosition:
    """A line start in a JSONL file: its byte ``offset``, and how many lines
    (``line``) and non-blank lines (``row``) come before it."""

    offset: int = 0
    line: int = 0
    row: int = 0


#: what ``bytes.strip()`` removes: a line of only these is blank and skipped
_WHITESPACE = frozenset(b" \t\n\r\x0b\x0c")
#: a blank line can only start right after a newline with one of these
#: (one regex pass: as fast as ``bytes.count``, six ``bytes.find`` are not)
_BLANK_START = re.compile(rb"\n[ \t\n\r\x0b\x0c]")
#: bytes read at a time when counting the lines before a range
COUNT_BLOCK_BYTES = 8 << 20


def line_start_at_or_after(handle: IO[bytes], offset: int) -> int:
    """The offset of the first line that starts at or after ``offset`` (the
    file size when none does)."""
    if offset <= 0:
        return 0
    handle.seek(offset - 1)
    return offset - 1 + len(handle.readline())


def count_lines(handle: IO[bytes], start: int, stop: int, block_bytes: int = COUNT_BLOCK_BYTES) -> tuple[int, int]:
    """``(lines, non-blank lines)`` in the bytes ``[start, stop)``, which must
    begin at a line start, counted exactly as :func:`iter_jsonl_rows` numbers
    them (``\\n`` ends a line; a last line without one still counts; a line of
    only whitespace, ``\\r`` included, is blank). A bytes scan, not a parse:
    blocks are split into lines only where a blank line may start."""
    lines = blank = 0
    pos = start
    size = block_bytes
    while pos < stop:
        want = min(size, stop - pos)
        handle.seek(pos)
        data = handle.read(want)
        if not data:
            break
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            if len(data) == want and pos + want < stop:
                size *= 2  # a line longer than the block: read more of it
                continue
            cut = len(data)  # the last line, without a newline
        newlines = data.count(b"\n", 0, cut)
        lines += newlines + (data[cut - 1] != 0x0A)
        if data[0] in _WHITESPACE or _BLANK_START.search(data, 0, cut):
            pieces = data[:cut].split(b"\n")
            if data[cut - 1] == 0x0A:
                pieces.pop()  # what follows the last newline is not a line
            blank += sum(1 for piece in pieces if not piece.strip())
        pos += cut
        size = block_bytes
    return lines, lines - blank


def iter_line_range(handle: IO[bytes], position: LinePosition, end: int) -> Iterator[bytes]:
    """The lines that start in ``[position.offset, end)``; ``position.offset``
    must be a line start. When exhausted, ``position.offset`` is the start of
    the next line (the next range's first line)."""
    offset = position.offset
    handle.seek(offset)
    readline = handle.readline
    while offset < end:
        raw = readline()
        if not raw:
            break
        offset += len(raw)
        yield raw
    position.offset = offset


def parse_line(raw: bytes, ctx: RowContext) -> Any:
    """One line's JSON value. orjson parses (2.5x ``json.loads`` on whileai
    rows); a line it refuses goes to ``json.loads``, which accepts a few
    more texts (``NaN``, integers past 64 bits, lone surrogates, UTF-16) and
    words the error for a line that is not JSON at all."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        value = json.loads(raw)
    except ValueError as err:
        snippet = raw.rstrip(b"\r\n")[:60].decode("utf-8", "replace")
        raise ExportFormatError(
            f"not valid JSON ({err}); the line starts {snippet!r}",
            location=ctx.at(),
            hint=f"Each line must hold one JSON object; fix the line or pass {option_names.spell('on_bad_row', 'skip')}.",
        ) from err
    except RecursionError as err:
        raise nesting_error(ctx, err) from err
    _check_encodable(raw, value, ctx)
    return value


def _check_encodable(raw: bytes, value: Any, ctx: RowContext) -> None:
    """Refuse a lone surrogate (``"\\ud83e"``: a valid JSON escape, not a
    character), which Arrow cannot store as UTF-8. Only lines orjson refused
    get here, and orjson refuses every line holding one."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as err:
        raise unencodable_error(ctx, err) from err
    except (ValueError, RecursionError):
        return  # NaN and other values json.dumps writes anyway; depth was checked by the parse


def iter_jsonl_rows(
    lines: Iterable[bytes], source: str, position: LinePosition | None = None
) -> Iterator[tuple[RowContext, Any]]:
    """``(context, parsed row)`` per non-blank line; a parse failure is an
    ``ExportFormatError`` carrying the line number, yielded in place of the row.

    With ``position``, numbering continues after ``position.line`` lines and
    ``position.row`` rows (a byte range of a file), and once exhausted
    ``position`` holds the counts after the last line read."""
    first = position.line if position is not None else 0
    row = position.row if position is not None else 0
    number = first
    for number, raw in enumerate(lines, first + 1):
        # blank: only whitespace (checked past the first byte only when that one is)
        if not raw or raw[0] in _WHITESPACE and not raw.strip():
            continue
        ctx = RowContext(source, number, row)
        row += 1
        try:
            yield ctx, parse_line(raw, ctx)
        except ExportFormatError as err:
            yield ctx, err
    if position is not None:
        position.line, position.row = number, row


def iter_parquet_rows(handle: IO[bytes], source: str, batch_rows: int) -> Iterator[tuple[RowContext, Any]]:
    """``(context, row dict)`` per Parquet row, read a record batch at a time."""
    row = 0
    for batch in pq.ParquetFile(handle).iter_batches(batch_size=batch_rows):
        for item in parquet_rows(batch):
            yield RowContext(source, None, row), item
            row += 1


def parquet_rows(data: pa.Table | pa.RecordBatch) -> list[dict[str, Any]]:
    """Rows of Parquet data as the normalizer reads them: Json values and
    canonical message lists (a file this package wrote) decoded to Python."""
    json_columns = [f.name for f in data.schema if isinstance(f.type, pa.JsonType)]
    #: ``List(Json())``: how this package publishes messages for readers without it (``columnar._portable``)
    json_lists = [f.name for f in data.schema if pa.types.is_list(f.type) and isinstance(f.type.value_type, pa.JsonType)]
    message_columns = [f.name for f in data.schema if _is_message_list(f.type)]
    rows: list[dict[str, Any]] = data.to_pylist()
    for item in rows:
        for name in json_columns:
            if item[name] is not None:
                item[name] = json.loads(item[name])
        for name in json_lists:
            if item[name] is not None:
                item[name] = [json.loads(v) if v is not None else v for v in item[name]]
        for name in message_columns:
            if item[name] is not None:
                item[name] = [message_from_storage(m) if m is not None else m for m in item[name]]
    return rows


def _is_message_list(arrow_type: pa.DataType) -> bool:
    """A list of this package's message structs (a canonical Parquet file)."""
    if not pa.types.is_list(arrow_type) or not pa.types.is_struct(arrow_type.value_type):
        return False
    names = {f.name for f in arrow_type.value_type}
    return {"role", "content", "extra"} <= names <= set(MESSAGE_TYPE.names)  # older files lack the newer fields


def _next_chunk(
    rows: Iterator[tuple[RowContext, Any]],
    normalizer: Normalizer,
    chunk_rows: int,
    on_bad_row: str,
    bad: BadRows,
    leaks: LeakScan | None,
) -> Chunk:
    chunk = normalizer.chunk(leaks)
    add = chunk.add
    with gc_paused():  # (the caller may have paused it already)
        for ctx, row in rows:
            try:
                if isinstance(row, WhileaiError):
                    raise row
                add(row, ctx)
            except WhileaiError as err:
                if on_bad_row != "skip":
                    raise
                bad.add(err)
                continue
            except RecursionError as err:  # a value nested too deep for the normalizer (the chunk rolled it back)
                failure = nesting_error(ctx, err)
                if on_bad_row != "skip":
                    raise failure from err
                bad.add(failure)
                continue
            if chunk.num_rows >= chunk_rows:
                break
    return chunk


def iter_tables(
    rows: Iterable[tuple[RowContext, Any]],
    normalizer: Normalizer,
    *,
    chunk_rows: int,
    on_bad_row: str,
    bad: BadRows,
    leaks: LeakScan | None = None,
) -> Iterator[pa.Table]:
    """Canonical tables of at most ``chunk_rows`` rows. With ``leaks``, every
    row kept is counted and checked for privileged leaks there as it is read."""
    source = iter(rows)
    while True:
        # the table is built paused too, and the chunk dropped before the GC
        # runs again: switched on over a chunk still alive, it scanned the
        # chunk's value tuples at once (8% of a worker's piece)
        with gc_paused():
            chunk = _next_chunk(source, normalizer, chunk_rows, on_bad_row, bad, leaks)
            if not chunk.num_rows:
                return
            table = chunk.table()
            del chunk
        yield table
