"""The export gates, as whileai runs them.

* ``tool_call_roundtrip``: every tool call's arguments are structured, in the
  encoding the wire format uses (``json_string``: the text parses to a JSON
  object; ``dict``: the value *is* an object). Counted on Arrow columns.
* ``leak_report``: which raw rows quote their own ``privileged`` block in an
  assistant turn. It reads raw rows (the canonical schema never carries
  ``privileged``): the builder takes these facts while it reads each row
  (``rows.leaks.LeakScan``) and keeps them beside the dataset, so an export
  from a path reads its source once. ``scan_path_leaks`` is the fallback for
  a file no builder has read (a byte search, parsing only the lines that hold
  the key).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets._options import check_choice
from whileai_datasets._typing import ExportFormat
from whileai_datasets.columnar import _arguments, _arrow
from whileai_datasets.errors import SchemaError
from whileai_datasets.reading import file_kind
from whileai_datasets.rows.leaks import LEAK_MIN_QUOTE_CHARS, LeakScan
from whileai_datasets.rows.leaks import row_leak as row_leak  # the gates module is where callers find it

ENCODINGS = {"openai": "json_string", "trl": "dict", "fireworks": "json_string"}
ENCODING_NOTES = {
    "json_string": (
        "arguments parse back to a dict from their JSON string (OpenAI wire). "
        "A chat-template trainer needs dicts: export format='trl' for that."
    ),
    "dict": "arguments are dicts, as HF chat templates render them (| tojson).",
}

# ---------------------------------------------------------------- round trip


def check_format(format: str) -> str:
    return ENCODINGS[check_choice(format, "format", ExportFormat)]


def call_counts(lists: pa.Array, encoding: str) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a message-list array: ``(tool calls, invalid tool calls)``."""
    n = len(lists)
    messages = _arrow.flat(lists)
    if "tool_calls" not in messages.type.names:
        return np.zeros(n, np.int64), np.zeros(n, np.int64)
    calls = pc.struct_field(messages, "tool_calls")
    flat_calls = _arrow.flat(calls)
    row = _arrow.parents(lists)[_arrow.parents(calls)]
    function = pc.struct_field(flat_calls, "function")
    arguments = pc.struct_field(function, "arguments")
    valid = _structured(arguments, encoding)
    checked = np.bincount(row, minlength=n).astype(np.int64)
    invalid = np.bincount(row[~valid], minlength=n).astype(np.int64)
    return checked, invalid


def _structured(arguments: pa.Array, encoding: str) -> np.ndarray:
    if isinstance(arguments.type, pa.JsonType):
        text = pc.utf8_ltrim_whitespace(arguments.storage)
        is_object = _arrow.to_numpy_bool(pc.starts_with(text, "{"))
        if encoding == "dict":
            return is_object
        strings = np.flatnonzero(_arrow.to_numpy_bool(pc.starts_with(text, '"')))
        for i in strings.tolist():
            is_object[i] = isinstance(_loads(json.loads(text[i].as_py())), dict)
        return is_object
    if encoding == "dict":
        return np.zeros(len(arguments), dtype=bool)
    return _arguments.arguments_info(arguments)[0]


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def turn_columns(table: pa.Table) -> list[str]:
    """The columns holding a row's whole conversation: ``messages``, or
    ``prompt`` + ``completion`` when those are message lists."""
    if "messages" in table.column_names:
        return ["messages"]
    names = [n for n in ("prompt", "completion") if n in table.column_names]
    if names and all(_is_message_list(table.schema.field(n).type) for n in names):
        return names
    return []


def _is_message_list(arrow_type: pa.DataType) -> bool:
    """Message structs, or one Json object per message (what the wire transforms hand ``Dataset.map``)."""
    return bool(pa.types.is_list(arrow_type) and (pa.types.is_struct(arrow_type.value_type)
                                                  or isinstance(arrow_type.value_type, pa.JsonType)))


class Roundtrip:
    """Accumulates ``tool_call_roundtrip`` over batches."""

    def __init__(self, format: str) -> None:
        self.encoding = check_format(format)
        self.checked = 0
        self.invalid = 0
        self.rows: list[int] = []

    def add(self, checked: np.ndarray, invalid: np.ndarray, offset: int) -> None:
        self.checked += int(checked.sum())
        self.invalid += int(invalid.sum())
        if len(self.rows) < 20:
            bad = np.flatnonzero(invalid > 0)[: 20 - len(self.rows)] + offset
            self.rows.extend(bad.tolist())

    def add_table(self, table: pa.Table, offset: int) -> None:
        checked = np.zeros(table.num_rows, np.int64)
        invalid = np.zeros(table.num_rows, np.int64)
        for name in turn_columns(table):
            c, i = call_counts(_arrow.message_column(table, name), self.encoding)
            checked += c
            invalid += i
        self.add(checked, invalid, offset)

    def report(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "invalid": self.invalid,
            "rows": list(self.rows),
            "encoding": self.encoding,
            "checked_for": ENCODING_NOTES[self.encoding],
        }


def tool_call_roundtrip(rows: Any, *, format: str = "openai") -> dict[str, Any]:
    """whileai's ``tool_call_roundtrip`` over wire rows held as Arrow.

    Args:
        rows: A ``pyarrow.Table``, a ``Dataset`` or a dict batch of wire rows
            (``to_openai`` / ``to_trl`` / ``to_fireworks`` output).
        format: Which encoding to check: ``"openai"`` and ``"fireworks"``
            (``json_string``: the text parses to an object) or ``"trl"``
            (``dict``: the value is an object).
    Returns:
        ``checked``, ``invalid``, ``rows`` (up to 20 row indices), ``encoding``, ``checked_for``.
    """
    gate = Roundtrip(format)
    for offset, table in _tables(rows):
        gate.add_table(table, offset)
    return gate.report()


def _tables(rows: Any) -> Iterator[tuple[int, pa.Table]]:
    if isinstance(rows, (pa.Table, dict)) or hasattr(rows, "keys") and not hasattr(rows, "with_format"):
        yield 0, _arrow.as_table(rows)
        return
    if hasattr(rows, "with_format"):
        offset = 0
        for batch in rows.with_format("arrow").iter(batch_size=10_000):
            yield offset, batch
            offset += batch.num_rows
        return
    raise SchemaError(
        f"expected a pyarrow.Table, a Dataset or a dict batch, got {type(rows).__name__}",
        location="tool_call_roundtrip",
        hint="For lists of dicts use whileai.simulations.tool_call_roundtrip.",
    )


# ---------------------------------------------------------------- leaks
#
# The per-row check and the report live in the rows stage (rows/leaks.py), so
# the builder takes the leak facts as it reads each row; these are whileai's
# entry points over rows in memory and, for a file no builder has read, a scan.

def leak_report(rows: Iterable[Any], *, min_len: int = LEAK_MIN_QUOTE_CHARS) -> dict[str, Any]:
    """whileai's privileged-leak report over raw rows (dicts as whileai wrote them)."""
    scan = LeakScan(min_len)
    for row in getattr(rows, "trajectories", rows):
        scan.add(row)
    return scan.report()


_KEY_PRIVILEGED = b'"privileged"'
_KEY_SCENARIO = b'"scenario_id"'


def scan_jsonl_leaks(path: str, n_rows: int, *, min_len: int = LEAK_MIN_QUOTE_CHARS) -> dict[str, Any]:
    """``leak_report`` over the ``n_rows`` rows of a JSONL file, parsing only
    the lines that could carry ``privileged`` (found by a byte search)."""
    scan = LeakScan(min_len)
    scan.n_rows = n_rows
    for line in _lines_with(path, _KEY_PRIVILEGED):
        row = _parse(line)
        if isinstance(row, dict):
            scan.check(row)
    if not scan.n_checked:
        # the summary then says whether the rows came through whileai's export
        for line in _lines_with(path, _KEY_SCENARIO):
            row = _parse(line)
            if isinstance(row, dict) and "scenario_id" in row:
                scan.exported = True
                break
    return scan.report()


def scan_path_leaks(path: str, n_rows: int, *, min_len: int = LEAK_MIN_QUOTE_CHARS) -> dict[str, Any]:
    """``leak_report`` over the rows of a JSONL or Parquet file."""
    if not file_kind.is_parquet_path(path):
        return scan_jsonl_leaks(path, n_rows, min_len=min_len)
    import pyarrow.parquet as pq

    from whileai_datasets.reading.reader import parquet_rows

    scan = LeakScan(min_len)
    scan.n_rows = n_rows
    for batch in pq.ParquetFile(path).iter_batches():
        if "privileged" in batch.schema.names:
            # only rows that carry a privileged block can leak it
            batch = batch.filter(batch.column("privileged").is_valid())
        for row in parquet_rows(batch):
            scan.check(row)
    return scan.report()


def _parse(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _open(path: str) -> Any:
    with open(path, "rb") as probe:
        magic = probe.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")


def _lines_with(path: str, needle: bytes, block: int = 1 << 24) -> Iterator[bytes]:
    """Lines of a (possibly gzipped) file that contain ``needle``, found by
    searching whole blocks rather than looping over lines."""
    with _open(path) as handle:
        tail = b""
        while True:
            chunk = handle.read(block)
            data = tail + chunk
            if not chunk:
                yield from _matching_lines(data, needle)
                return
            cut = data.rfind(b"\n") + 1
            body, tail = data[:cut], data[cut:]
            yield from _matching_lines(body, needle)


def _matching_lines(body: bytes, needle: bytes) -> Iterator[bytes]:
    start = body.find(needle)
    while start >= 0:
        line_start = body.rfind(b"\n", 0, start) + 1
        line_end = body.find(b"\n", start)
        line_end = len(body) if line_end < 0 else line_end
        yield body[line_start:line_end]
        start = body.find(needle, line_end)
