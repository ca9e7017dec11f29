"""Reading whileai exports a chunk at a time: JSONL (plain or compressed) and Parquet.

The file objects come from the builder (so ``datasets``' streaming patches of
``open`` apply); this module only turns bytes into rows with their line
numbers, and rows into canonical tables, never holding more than one chunk.
"""

from __future__ import annotations

import gc
import json
import logging
from contextlib import contextmanager
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from whileai_datasets.canonical import Normalizer
from whileai_datasets.errors import ExportFormatError, WhileaiError
from whileai_datasets.features import MESSAGE_TYPE, message_from_storage
from whileai_datasets.normalize import RowContext

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


def _parse_line(raw: bytes, ctx: RowContext) -> Any:
    try:
        return json.loads(raw)
    except ValueError as err:
        snippet = raw.rstrip(b"\r\n")[:60].decode("utf-8", "replace")
        raise ExportFormatError(
            f"not valid JSON ({err}); the line starts {snippet!r}",
            location=ctx.at(),
            hint="Each line must hold one JSON object; fix the line or pass on_bad_row='skip'.",
        ) from err


def iter_jsonl_rows(lines: Iterable[bytes], source: str) -> Iterator[tuple[RowContext, Any]]:
    """``(context, parsed row)`` per non-blank line; a parse failure is an
    ``ExportFormatError`` carrying the line number, yielded in place of the row."""
    row = 0
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        ctx = RowContext(source, number, row)
        row += 1
        try:
            yield ctx, _parse_line(raw, ctx)
        except ExportFormatError as err:
            yield ctx, err


def iter_parquet_rows(handle: IO[bytes], source: str, batch_rows: int) -> Iterator[tuple[RowContext, Any]]:
    """``(context, row dict)`` per Parquet row, read a record batch at a time."""
    row = 0
    for batch in pq.ParquetFile(handle).iter_batches(batch_size=batch_rows):
        json_columns = [f.name for f in batch.schema if isinstance(f.type, pa.JsonType)]
        message_columns = [f.name for f in batch.schema if _is_message_list(f.type)]
        for item in batch.to_pylist():
            for name in json_columns:
                if item[name] is not None:
                    item[name] = json.loads(item[name])
            for name in message_columns:
                if item[name] is not None:
                    item[name] = [message_from_storage(m) if m is not None else m for m in item[name]]
            yield RowContext(source, None, row), item
            row += 1


def _is_message_list(arrow_type: pa.DataType) -> bool:
    """A list of this package's message structs (a canonical Parquet file)."""
    if not pa.types.is_list(arrow_type) or not pa.types.is_struct(arrow_type.value_type):
        return False
    names = {f.name for f in arrow_type.value_type}
    return names == set(MESSAGE_TYPE.names)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while a chunk is parsed: JSON parsing allocates
    millions of small containers and none of them form cycles, so the
    collections the allocations trigger are pure cost (about 10% here).
    It runs again between chunks, and the consumer never runs paused."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _next_chunk(
    rows: Iterator[tuple[RowContext, Any]], normalizer: Normalizer, chunk_rows: int, on_bad_row: str, bad: BadRows
) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    record = normalizer.record
    with _gc_paused():
        for ctx, row in rows:
            try:
                if isinstance(row, WhileaiError):
                    raise row
                records.append(record(row, ctx))
            except WhileaiError as err:
                if on_bad_row != "skip":
                    raise
                bad.add(err)
                continue
            if len(records) >= chunk_rows:
                break
    return records


def iter_tables(
    rows: Iterable[tuple[RowContext, Any]],
    normalizer: Normalizer,
    *,
    chunk_rows: int,
    on_bad_row: str,
    bad: BadRows,
) -> Iterator[pa.Table]:
    """Canonical tables of at most ``chunk_rows`` rows."""
    source = iter(rows)
    while True:
        records = _next_chunk(source, normalizer, chunk_rows, on_bad_row, bad)
        if not records:
            return
        yield normalizer.to_table(records)
