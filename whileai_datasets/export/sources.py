"""The exporters' inputs: canonical Arrow chunks from any source whileai takes.

whileai's exporters take a ``SimulationData`` (system prompt and tools from
its profile), a list of rows, or a JSONL path; ours also take a canonical
``Dataset``. Rows in memory are normalized by the builder's ``Normalizer``; a
path is loaded by the ``whileai/export`` builder (cached by ``datasets``);
a dataset's cache files are streamed without memory-mapping them, so
resident memory stays at a few chunks however large the file is.
"""

from __future__ import annotations

import glob
import json
import os
import posixpath
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets import _storage, option_names
from whileai_datasets.columnar import _arrow
from whileai_datasets.errors import ExportFormatError
from whileai_datasets.reading.reader import BadRows, iter_tables
from whileai_datasets.rows.canonical import Normalizer, Options
from whileai_datasets.rows.leaks import LeakScan
from whileai_datasets.rows.normalize import RowContext
from whileai_datasets.transforms import gates

#: Source rows per export chunk. Two chunks are in the pipeline at a time, and an
#: unrolled chunk's intermediate tables take a few hundred bytes per message. Once the
#: pipeline's per-row work went into single Arrow calls, its per-chunk Python glue
#: showed: 4,096 rows cut a cold 100k-row export's export phase from 1.22 to 1.07 s
#: (median of 5 alternating runs; user CPU 1.18 -> 0.97 s) for 330 -> 450 MB peak RSS.
CHUNK_ROWS = 4096
KEY_COLUMNS = ("scenario_id", "prompt", "reward", "finish_reason")


class Source:
    """Canonical training rows from ``source``, a chunk at a time, plus what
    the report needs from the raw rows (their count and the leak report)."""

    def __init__(self, source: Any, system_prompt: str | None, tools: Sequence[dict[str, Any]] | None,
                 on_bad_row: str = "raise", *, patterns: bool = False) -> None:
        import datasets

        self.path = ""
        self.table: pa.Table | None = None
        self.dataset: Any = None
        self.prepend: PrependSystem | None = None
        #: the rows left out under ``on_bad_row="skip"`` (``BadRows.to_dict()``), else None
        self.bad_rows: dict[str, Any] | None = None
        if hasattr(source, "trajectories"):  # whileai's SimulationData: its profile holds the policy and tools
            profile = getattr(source, "profile", None)
            self._settle(system_prompt, tools, getattr(profile, "policy", ""), getattr(profile, "tools", None))
            self._from_rows(list(source.trajectories), on_bad_row)
        elif isinstance(source, (str, os.PathLike)):
            self._settle(system_prompt, tools, "", None)
            self._from_path(os.fspath(source), on_bad_row, patterns)
        elif isinstance(source, datasets.Dataset):
            self._settle(system_prompt, tools, "", None)
            self._from_dataset(source)
        else:  # rows in memory, maybe with the export's system_prompt and tools as attributes
            self._settle(system_prompt, tools, getattr(source, "system_prompt", ""), getattr(source, "tools", None))
            self._from_rows(list(source), on_bad_row)

    def _settle(self, system_prompt: str | None, tools: Sequence[dict[str, Any]] | None, own_system: Any,
                own_tools: Any) -> None:
        """The system prompt and tools: the ones passed, else the source's own."""
        self.system = str(system_prompt) if system_prompt is not None else str(own_system or "")
        self.tools = list(tools) if tools is not None else list(own_tools or [])
        self.tools_json = json.dumps(self.tools, ensure_ascii=False) if self.tools else None

    def _from_rows(self, raw: list[Any], on_bad_row: str) -> None:
        self.n_raw = len(raw)
        bad = BadRows()
        self.table = normalize_rows([r for r in raw if isinstance(r, dict)], "default", self.system, on_bad_row, bad,
                                    depth=1)  # (Source, then this opener)
        self.bad_rows = bad.to_dict() if on_bad_row == "skip" else None
        self.leaks = gates.leak_report(raw)

    def _from_path(self, path: str, on_bad_row: str, patterns: bool) -> None:
        from whileai_datasets.builders.bad_rows import bad_rows

        self.path = path
        self.dataset = load_path(path, self.system, on_bad_row, patterns=patterns)
        self.bad_rows = bad_rows(self.dataset) if on_bad_row == "skip" else None
        self.n_raw = len(self.dataset)
        self.leaks = path_leaks(self.dataset, path, self.n_raw)

    def _from_dataset(self, dataset: Any) -> None:
        self.dataset = canonical_dataset(dataset)
        self.prepend = PrependSystem(self.system) if self.system else None
        self.n_raw = len(self.dataset)
        scan = gates.LeakScan()
        scan.n_rows, scan.exported = self.n_raw, "scenario_id" in self.dataset.column_names
        self.leaks = scan.report()

    def keys(self) -> pa.Table:
        """The columns groups and warnings need, for every row."""
        if self.table is not None:
            return self.table.select([n for n in KEY_COLUMNS if n in self.table.column_names])
        present = [n for n in KEY_COLUMNS if n in self.dataset.column_names]
        return self.dataset.with_format("arrow").select_columns(present)[:]

    def chunks(self) -> Iterator[pa.Table]:
        """The rows, ``CHUNK_ROWS`` at a time (at least one chunk, maybe empty)."""
        if self.table is not None:
            for start in range(0, max(self.table.num_rows, 1), CHUNK_ROWS):
                yield self.table.slice(start, CHUNK_ROWS)
            return
        for chunk in dataset_chunks(self.dataset):
            yield chunk if self.prepend is None else self.prepend(chunk)


def dataset_chunks(ds: Any, rows: int = CHUNK_ROWS) -> Iterator[pa.Table]:
    """A dataset's rows as tables. Read from its cache files without a memory
    map (resident memory stays at a chunk) when the dataset is exactly those
    files, else through ``ds.iter``."""
    if not len(ds):
        yield ds.with_format("arrow")[:0]
        return
    files = _plain_files(ds)
    if files is None:
        yield from ds.with_format("arrow").iter(batch_size=rows)
        return
    schema = ds.data.schema
    pending: list[pa.RecordBatch] = []
    count = 0
    for path in files:
        with pa.OSFile(path) as handle:
            for batch in pa.ipc.open_stream(handle):
                pending.append(batch)
                count += batch.num_rows
                while count >= rows:
                    table = pa.Table.from_batches(pending)
                    yield _conform(table.slice(0, rows), schema)
                    rest = table.slice(rows)
                    pending, count = rest.to_batches(), rest.num_rows
    if count:
        yield _conform(pa.Table.from_batches(pending), schema)


def _plain_files(ds: Any) -> list[str] | None:
    """The cache files that hold exactly ``ds`` (no indices, no pending
    operations, no in-memory columns), in order; else None."""
    from datasets.table import ConcatenationTable, MemoryMappedTable

    table = ds.data
    if ds._indices is not None:
        return None
    if isinstance(table, MemoryMappedTable):
        blocks = [table]
    elif isinstance(table, ConcatenationTable) and all(len(row) == 1 for row in table.blocks):
        blocks = [row[0] for row in table.blocks]
    else:
        return None
    harmless = {"replace_schema_metadata"}
    if any(not isinstance(b, MemoryMappedTable) or {r[0] for r in b.replays} - harmless for b in blocks):
        return None
    return [b.path for b in blocks]


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    if table.schema.names != schema.names:
        table = table.select(schema.names)
    return table.combine_chunks()


def normalize_rows(rows: list[dict[str, Any]], config: str, system: str, on_bad_row: str = "raise",
                   bad: BadRows | None = None, *, depth: int = 0) -> pa.Table:
    """Canonical rows (``config`` "default" or "preference") from rows in memory; rows
    skipped under ``on_bad_row="skip"`` are counted in ``bad``. ``depth``: the calls between
    the exporter and this one, so the unread-keys warning names the exporter's caller."""
    from whileai_datasets.builders import unread

    normalizer = Normalizer(config, Options(system_prompt=system))
    contexts = ((RowContext("rows", None, i), row) for i, row in enumerate(rows))
    tables = list(iter_tables(contexts, normalizer, chunk_rows=CHUNK_ROWS, on_bad_row=on_bad_row,
                              bad=bad if bad is not None else BadRows()))
    unread.warn(normalizer.unread, "the rows", kept=False, stacklevel=5 + depth)  # export_dataset's caller
    return pa.concat_tables(tables) if tables else normalizer.chunk().table()


def load_path(path: str, system: str, on_bad_row: str = "raise", *, patterns: bool = False) -> Any:
    """The canonical dataset of a JSONL / JSON / Parquet export, through the builder. ``patterns``: a
    glob pattern reads the files it matches, sorted (the audit's sources; an export's input stays one
    file, so it can be told apart from the output)."""
    import datasets

    from whileai_datasets.builders import registry

    registry.register()  # idempotent; load_dataset("whileai/export") needs it

    files: str | list[str] = path
    if os.path.isdir(path):
        files = _session_folder(path)
    elif patterns and glob.has_magic(path):
        files = sorted(p for p in glob.glob(path) if os.path.isfile(p))
        if not files:
            raise ExportFormatError("no file matches this pattern", location=path,
                                    hint="Pass a glob that matches JSONL, JSON or Parquet exports.")
    elif not os.path.exists(path):
        raise ExportFormatError("no such file", location=path, hint="Pass an existing JSONL, JSON or Parquet export.")
    with option_names.read_for_another_call():  # the caller takes none of the loader's own keywords
        return datasets.load_dataset(
            "whileai/export", data_files=files, split="train", system_prompt=system or None, leak_facts=True,
            on_bad_row=on_bad_row,
        )


def _session_folder(path: str) -> list[str]:
    """The agent session logs under a folder (``~/.claude/projects``); other files are said aloud, not read."""
    import warnings

    from whileai_datasets.sessions.detect import session_files

    files, others = session_files(path)
    if not files:
        raise ExportFormatError("no agent session log in this folder", location=path,
                                hint="Pass a folder an agent writes its sessions to (docs/sessions.md), or a file "
                                "or glob of whileai rows.")
    if others:
        warnings.warn(f"{path}: read {len(files)} session log(s); left out {len(others)} file(s) that are no "
                      f"session (first: {others[0]}). Pass them as files to read them as whileai rows.",
                      UserWarning, stacklevel=4)
    return files


def path_leaks(ds: Any, path: str, n_rows: int) -> dict[str, Any]:
    """The leak report of a path source: from the facts the builder took
    while it read the rows (kept beside the dataset in the cache), or, for a
    dataset prepared without them, by scanning the file's privileged lines."""
    from whileai_datasets.builders.bad_rows import leak_facts

    facts = leak_facts(ds)
    if facts is None:
        return gates.scan_path_leaks(path, n_rows)
    scan = LeakScan()
    scan.merge(facts)
    if scan.n_rows != n_rows:
        raise ExportFormatError(
            f"the leak facts kept with the cached dataset cover {scan.n_rows} rows, the dataset has {n_rows}",
            location=ds.cache_files[0]["filename"],
            hint="The datasets cache is stale or was edited: remove that cache folder (or set HF_DATASETS_CACHE to "
                 "a new one) and run again.",  # the path was loaded for the caller, who passes no download_mode
        )
    return scan.report()


def canonical_dataset(ds: Any) -> Any:
    """``ds``, checked to hold canonical training rows."""
    if "messages" not in ds.column_names:
        raise ExportFormatError(
            f"the dataset has no 'messages' column (columns: {', '.join(ds.column_names)})",
            location="source",
            hint='Pass rows, a JSONL path, or a dataset from load_dataset("whileai/export", ...).',
        )
    return ds


@dataclass(frozen=True)
class PrependSystem:
    """Prepend a system message (loss 0) to every conversation of canonical
    rows, except those that already open with exactly that system message
    (the builder put it there when the dataset was loaded with it)."""

    content: str
    column: str = "messages"

    def __call__(self, batch: pa.Table) -> pa.Table:
        lists = _arrow.message_column(batch, self.column)
        starts = _arrow.offsets_of(_arrow.lengths(lists))[:-1]
        has = _arrow.lengths(lists) > 0
        already = np.zeros(len(lists), dtype=bool)
        if has.any():
            first = _arrow.flat(lists).take(pa.array(starts[has]))
            same = pc.and_(
                pc.equal(pc.struct_field(first, "role"), "system"),
                pc.equal(pc.struct_field(first, "content"), self.content),
            )
            already[has] = _arrow.to_numpy_bool(same)
        if already.all():
            return batch
        head = _arrow.typed_array([{"role": "system", "content": self.content}] * len(lists), lists.type.value_type)
        table = _arrow.set_column(batch, self.column, prepend(lists, head, ~already))
        if self.column == "messages" and "loss_mask" in batch.column_names:
            mask = _arrow.column(batch, "loss_mask")
            zeros = pa.array([0] * len(mask), mask.type.value_type)
            table = _arrow.set_column(table, "loss_mask", prepend(mask, zeros, ~already))
        return table


def prepend(lists: pa.Array, head: pa.Array, where: np.ndarray) -> pa.ListArray:
    """Each list with ``head[i]`` in front, on the rows ``where`` is True."""
    lens = _arrow.lengths(lists)
    added = where.astype(np.int64)
    offsets = _arrow.offsets_of(lens + added)
    take = np.empty(int(offsets[-1]), dtype=np.int64)
    is_head = np.zeros(len(take), dtype=bool)
    is_head[offsets[:-1][where]] = True
    take[is_head] = np.flatnonzero(where)
    take[~is_head] = len(lists) + np.arange(int(lens.sum()))
    values = pa.concat_arrays([head, _arrow.flat(lists)])
    return _arrow.build_list(offsets, values.take(pa.array(take)))


def default_output(path: str) -> str:
    """whileai's default output next to a path source: ``<name>.train<suffix>`` (beside an object, for a URI)."""
    if _storage.is_uri(path):
        stem, suffix = posixpath.splitext(path)
        return stem + ".train" + (suffix or ".jsonl")
    source = Path(path)
    return str(source.with_name(source.stem + ".train" + (source.suffix or ".jsonl")))
