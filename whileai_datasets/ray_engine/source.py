"""Reading whileai exports on Ray Data: files into raw blocks, raw blocks into canonical rows.

``WhileaiFiles`` is a Ray ``Datasource``. It splits an uncompressed JSONL file
into byte ranges read in parallel (a line belongs to the range its first byte
is in), reads a compressed file as one stream, a ``.json`` file holding a JSON
array as one stream of its elements (``json_arrays``), and a Parquet file by
groups of row groups. Its blocks hold the raw lines (the elements' JSON text,
or the Parquet columns) and a row key: the file's index in the source list and
the row's position in it (the byte offset of its line in the decompressed
stream, the element's array index, or its Parquet row number).
``pyarrow.json`` is never used: it fails on real whileai rows.

``Normalize`` is the builder's step (``canonical.Normalizer``) as a
``map_batches`` function: raw block in, canonical table out, with the row key
and what the export report needs from the raw rows (the leak check) as private
``_wai_*`` columns. Errors name the file and line as the builder's do; the line
is counted only when there is an error to report.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from ray.data import Datasource, ReadTask
from ray.data.block import BlockMetadata

from whileai_datasets import _storage
from whileai_datasets._gc import gc_paused
from whileai_datasets.errors import WhileaiError
from whileai_datasets.ray_engine import json_arrays
from whileai_datasets.ray_engine.source_files import (
    compression,
    is_json_array,
    is_parquet,
    open_file,
    open_stream,
    reopen_decoded,
    row_context,
)
from whileai_datasets.reading import read_errors
from whileai_datasets.reading.reader import BadRows, parquet_rows, parse_line
from whileai_datasets.rows.canonical import Chunk, Normalizer, Options
from whileai_datasets.rows.normalize import RowContext
from whileai_datasets.rows.unread_keys import Unread
from whileai_datasets.sessions import detect as session_logs
from whileai_datasets.transforms import gates

#: Private columns: the row key (file index, position) and raw-row facts.
FILE = "_wai_file"
POS = "_wai_pos"
LINE = "_wai_line"
LEAK = "_wai_leak"
HAS_SCENARIO = "_wai_scenario"
#: A JSON array element the reader refused in its place: the error's fields (else null).
REFUSAL = "_wai_refusal"
PRIVATE = (FILE, POS, LINE, LEAK, HAS_SCENARIO, REFUSAL)

#: Skipped rows per block given their exact location (``Normalize.skipping``): finding a JSONL line
#: reads the file up to it.
LOCATED = 5
#: Bytes of JSONL per read task, and per block within a task.
RANGE_BYTES = 16 << 20
BLOCK_BYTES = 8 << 20


class WhileaiFiles(Datasource):
    """Raw blocks of whileai JSONL (plain or compressed) and Parquet files."""

    def __init__(self, paths: Sequence[str], *, range_bytes: int = RANGE_BYTES, block_bytes: int = BLOCK_BYTES,
                 storage: _storage.Storage = _storage.LOCAL) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.paths = list(paths)
        self.storage = storage
        self.range_bytes = max(1, range_bytes)
        self.block_bytes = max(1, block_bytes)

    def estimate_inmemory_data_size(self) -> int | None:
        return sum(self.storage.size(p) for p in self.paths)

    def get_read_tasks(
        self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None
    ) -> list[ReadTask]:
        tasks = []
        for path, plans in self.plans():
            share = self.storage.size(path) // max(len(plans), 1)
            for read in plans:
                meta = BlockMetadata(num_rows=None, size_bytes=share, input_files=(path,), exec_stats=None)
                tasks.append(ReadTask(read, meta, per_task_row_limit=per_task_row_limit))
        return tasks

    def plans(self) -> list[tuple[str, list[Any]]]:
        """Per file, its read functions: byte ranges, one stream, or runs of row groups."""
        out = []
        store = self.storage
        for index, path in enumerate(self.paths):
            if is_parquet(path, store):
                plans = [partial(_read_parquet, index, path, groups, store) for groups in self._row_groups(path)]
            elif is_session(path):
                plans = [partial(_read_session, index, path)]
            elif is_json_array(path, store):
                plans = [partial(_read_array, index, path, self.block_bytes, store)]
            elif compression(path):
                plans = [partial(_read_stream, index, path, self.block_bytes, store)]
            else:
                starts = range(0, max(store.size(path), 1), self.range_bytes)
                plans = [partial(_read_range, index, path, s, s + self.range_bytes, self.block_bytes, store)
                         for s in starts]
            out.append((path, plans))
        return out

    def n_tasks(self) -> int:
        return sum(len(plans) for _, plans in self.plans())

    def _row_groups(self, path: str) -> list[list[int]]:
        """Row groups of a Parquet file in runs of about ``range_bytes``."""
        with self.storage.open(path) as handle:
            meta = pq.ParquetFile(handle).metadata
        runs: list[list[int]] = [[]]
        size = 0
        for i in range(meta.num_row_groups):
            if runs[-1] and size >= self.range_bytes:
                runs.append([])
                size = 0
            runs[-1].append(i)
            size += meta.row_group(i).total_byte_size
        return runs


def _lines_block(data: bytes, start: int, index: int) -> pa.Table:
    """One block from whole lines: each line (with its newline) and its offset."""
    buf = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(buf == 10) + 1
    if data and (not len(ends) or ends[-1] != len(data)):
        ends = np.append(ends, len(data))
    offsets = np.concatenate([[0], ends]).astype(np.int64)
    lines = pa.Array.from_buffers(pa.large_binary(), len(ends), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return pa.table(
        {
            FILE: pa.array(np.full(len(ends), index, np.int32)),
            POS: pa.array(start + offsets[:-1]),
            LINE: lines,
        }
    )


def _read_range(index: int, path: str, start: int, end: int, block_bytes: int,
                store: _storage.Storage = _storage.LOCAL) -> Iterator[pa.Table]:
    """The lines of ``path`` that start in ``[start, end)``, a block at a time
    (one empty block when none does: a long line can span a whole range)."""
    with store.open(path) as handle:
        if start:
            handle.seek(start - 1)
            if handle.read(1) != b"\n":
                handle.readline()  # that line started in the previous range
        pos = handle.tell()
        empty = True
        while pos < end:
            data = handle.read(block_bytes)
            if not data:
                break
            if not data.endswith(b"\n"):
                data += handle.readline()
            if pos + len(data) > end:
                cut = data.find(b"\n", end - pos - 1)
                data = data if cut < 0 else data[: cut + 1]
            yield _lines_block(data, pos, index)
            empty = False
            pos += len(data)
        if empty:
            yield _lines_block(b"", pos, index)


def _read_array(index: int, path: str, block_bytes: int,
                store: _storage.Storage = _storage.LOCAL) -> Iterator[pa.Table]:
    """The elements of a JSON array file (plain or compressed), a block at a time."""
    name = os.path.basename(path)
    opener = partial(open_file, path, store)
    with read_errors.read_failures(name, path, opener), opener() as handle:
        for texts, indices, refusals in json_arrays.element_blocks(handle, name, block_bytes):
            files, positions = pa.array(np.full(len(texts), index, np.int32)), pa.array(indices, pa.int64())
            columns = [files, positions, pa.array(texts, pa.large_binary()), pa.array(refusals, pa.string())]
            yield pa.table(columns, names=[FILE, POS, LINE, REFUSAL])


def _read_stream(index: int, path: str, block_bytes: int,
                 store: _storage.Storage = _storage.LOCAL) -> Iterator[pa.Table]:
    """The lines of a compressed file, a block at a time (positions are offsets
    in the decompressed stream)."""
    pos = 0
    tail = b""
    name = os.path.basename(path)
    with read_errors.read_failures(name, path, partial(reopen_decoded, path, store)), \
            open_stream(path, store) as stream:
        while True:
            chunk = stream.read(block_bytes)
            data = tail + chunk
            cut = len(data) if not chunk else data.rfind(b"\n") + 1
            if cut or not (pos or chunk):  # an empty file still gives one (empty) block
                yield _lines_block(data[:cut], pos, index)
                pos += cut
            tail = data[cut:]
            if not chunk:
                return


def is_session(path: str) -> bool:
    """Whether ``path`` is a local agent session log (``whileai_datasets.sessions``): read whole, in one task."""
    if _storage.is_uri(path) or not os.path.isfile(path):
        return False
    with open(path, "rb") as handle:
        return session_logs.detect(os.path.basename(path), handle) is not None


def _read_session(index: int, path: str) -> Iterator[pa.Table]:
    """The conversations of an agent's session log, as JSON rows (one block: a session is read whole)."""
    name = os.path.basename(path)
    with open(path, "rb") as handle:
        session = session_logs.detect(name, handle)
        texts = [orjson.dumps(row) for _, row in session_logs.rows(session, handle, name)] if session else []
    yield pa.table({FILE: pa.array(np.full(len(texts), index, np.int32)),
                    POS: pa.array(np.arange(len(texts), dtype=np.int64)), LINE: pa.array(texts, pa.large_binary())})


def _read_parquet(index: int, path: str, groups: list[int],
                  store: _storage.Storage = _storage.LOCAL) -> Iterator[pa.Table]:
    """The rows of some row groups of a Parquet file, with their row numbers."""
    parquet = pq.ParquetFile(store.open(path) if _storage.is_uri(path) else path)
    meta = parquet.metadata
    pos = sum(meta.row_group(i).num_rows for i in range(groups[0])) if groups else 0
    batches = parquet.iter_batches(row_groups=groups) if groups else iter(())
    empty = True
    for batch in batches:
        yield _keyed(pa.Table.from_batches([batch]), index, pos)
        empty = False
        pos += batch.num_rows
    if empty:
        yield _keyed(parquet.schema_arrow.empty_table(), index, pos)


def _keyed(table: pa.Table, index: int, pos: int) -> pa.Table:
    n = table.num_rows
    table = table.append_column(FILE, pa.array(np.full(n, index, np.int32)))
    return table.append_column(POS, pa.array(np.arange(pos, pos + n, dtype=np.int64)))


@dataclass(frozen=True)
class Normalize:
    """Raw blocks (``WhileaiFiles``) into canonical rows, for ``map_batches``.

    Args:
        paths: The source files, indexed by the blocks' ``_wai_file``.
        config: The builder config: ``"default"``, ``"preference"`` or ``"raw"``.
        options: The builder's options (system prompt, tools, mask mode).
        report: Called with the located ``WhileaiError`` before it is raised
            (the export's collector: Ray does not carry exceptions back).
    """

    paths: tuple[str, ...]
    config: str = "default"
    options: Options = field(default_factory=Options)
    report: Any = None
    storage: _storage.Storage = _storage.LOCAL

    def __call__(self, block: pa.Table) -> pa.Table:
        try:
            return self._normalize(block)
        except WhileaiError as err:
            if self.report is not None:
                self.report(err)
            raise

    def skipping(self, block: pa.Table, bad: BadRows) -> pa.Table:
        """The canonical rows of ``block``, the rows the builder cannot read left out and counted in
        ``bad`` (the builder's ``on_bad_row="skip"``); the first ``LOCATED`` of them carry the builder's
        exact location (a JSONL line is found by reading the file up to it), the rest the file only."""
        return self._normalize(block, bad)

    def _normalize(self, block: pa.Table, bad: BadRows | None = None) -> pa.Table:
        if FILE not in block.column_names:  # Ray hands on empty blocks without their columns
            return block
        normalizer = _normalizer(self.config, self.options, _holds_sessions(self.paths))
        if getattr(self.report, "unread", None) is not None:
            normalizer.unread = Unread()  # the process's cached normalizer: this block's keys only, even after
            #                                a block of this process failed before sending its own
        files = block.column(FILE).to_numpy()
        positions = block.column(POS).to_numpy()
        rows = block.column(LINE).to_pylist() if LINE in block.column_names else _parquet_rows(block)
        jsonl = LINE in block.column_names
        refusals = block.column(REFUSAL).to_pylist() if REFUSAL in block.column_names else None
        chunk = normalizer.chunk()
        keep = np.zeros(len(rows), dtype=bool)
        leaks: list[str | None] = []
        scenario: list[bool] = []
        with gc_paused():
            for i, raw in enumerate(rows):
                located = bad is None or bad.count < LOCATED
                try:
                    if refusals is not None and refusals[i] is not None:
                        raise json_arrays.refusal(refusals[i])
                    if isinstance(raw, bytes):
                        if not raw.strip():
                            continue
                        try:
                            raw = json.loads(raw)
                        except ValueError:
                            parse_line(rows[i], self._context(files[i], positions[i], located))
                    self._add(chunk, raw, int(files[i]), int(positions[i]), jsonl and located)
                except WhileaiError as err:
                    if bad is None:
                        raise
                    bad.add(err)
                    continue
                keep[i] = True
                leaks.append(_leak(raw))
                scenario.append(isinstance(raw, dict) and "scenario_id" in raw)
        table = chunk.table()
        self._send_unread(normalizer, files, positions)
        picked = pa.array(np.flatnonzero(keep))
        table = table.append_column(FILE, block.column(FILE).take(picked))
        table = table.append_column(POS, block.column(POS).take(picked))
        table = table.append_column(LEAK, pa.array(leaks, pa.string()))
        return table.append_column(HAS_SCENARIO, pa.array(scenario, pa.bool_()))

    def _send_unread(self, normalizer: Normalizer, files: Any, positions: Any) -> None:
        """The keys this block's rows held that no shape read, to the collector (``Reporter.unread``), each
        first seen at ``[count, file index, None, row key, path]``: the driver locates the few it reports
        (``block_counts.unread_keys``), where a worker would read its file up to each of them."""
        unread = getattr(self.report, "unread", None)
        if unread is None or not normalizer.unread or not len(files):
            return
        index = {os.path.basename(self.paths[int(f)]): int(f) for f in np.unique(files)}
        found = normalizer.unread.to_dict()
        for entry in found["keys"].values():
            entry[1], entry[2] = index[entry[1]], None
        unread((int(files[0]), int(positions[0])), found)

    def _add(self, chunk: Chunk, row: Any, file: int, pos: int, jsonl: bool) -> None:
        name = os.path.basename(self.paths[file])
        try:
            chunk.add(row, RowContext(name, None, pos))
        except WhileaiError:
            if not jsonl:
                raise  # a Parquet row's context (file and row number) is already exact
            chunk.add(row, self._context(file, pos))
            raise

    def _context(self, file: int, pos: int, located: bool = True) -> RowContext:
        if not located:  # past a block's first LOCATED skipped rows: counted, never shown
            return RowContext(os.path.basename(self.paths[int(file)]), None, int(pos))
        return row_context(self.paths[int(file)], int(pos), self.storage)


_NORMALIZERS: dict[tuple[Any, ...], Normalizer] = {}
#: Per worker process: whether a source's files hold an agent session (its rows then have the session columns).
_SESSIONS: dict[tuple[str, ...], bool] = {}


def _holds_sessions(paths: tuple[str, ...]) -> bool:
    if paths not in _SESSIONS:
        _SESSIONS[paths] = any(is_session(path) for path in paths)
    return _SESSIONS[paths]


def _normalizer(config: str, options: Options, sessions: bool = False) -> Normalizer:
    """One ``Normalizer`` per worker process, config and kind of source (with agent sessions or not)."""
    key = (config, options.system_prompt, options.tools_json, options.mask_mode, options.keep_message_keys, sessions)
    if key not in _NORMALIZERS:
        _NORMALIZERS[key] = Normalizer(config, options, sessions=sessions)
    return _NORMALIZERS[key]


def _leak(row: Any) -> str | None:
    """The leak check of one raw row as JSON text: null when the row has no
    privileged text to look for, ``{}`` when none is quoted, else whileai's entry."""
    if not isinstance(row, dict) or "privileged" not in row:
        return None
    found = gates.row_leak(row)
    if found is None:
        return None
    entry: dict[str, Any] = dict(found)
    if found:
        entry = {"scenario_id": row.get("scenario_id"), "rollout_index": row.get("rollout_index"), **found}
    return json.dumps(entry, ensure_ascii=False)


def _parquet_rows(block: pa.Table) -> list[Any]:
    """Parquet rows as the builder reads them (without this module's key columns)."""
    return parquet_rows(block.drop_columns([n for n in PRIVATE if n in block.column_names]))
