"""``audit(..., engine="ray")``: the local audit's counting in Ray actors, block by block, added up here.

Blocks of raw rows (``ray_engine.source.WhileaiFiles``: byte ranges of JSONL, a JSON array, Parquet
row groups) go to a pool of actors. Each actor builds the tokenizer once (from a directory, a factory
or an object, as ``ray_engine.tokenize``'s do), reads its blocks into canonical rows as the builder
does with ``on_bad_row="skip"`` (the audit counts unreadable rows, it does not stop on them), and runs
``counting.Run`` over them with row numbers counted from the block's first row. It sends back one row
per block: its first and last row keys (file index, position) and its counters (``Block``).

The driver adds the counters up as they stream in. The few rows it keeps (each finding's first rows,
the worst rows, each trainer gap's first) are held as (block key, row in block), which sorts as source
order because blocks never overlap. At the end the blocks' row counts, in key order, turn those into
the row numbers the local audit reports; each kept row's byte offset gives its line
(``locations.places_in_file``: its number in its file too), so rows after unreadable ones get theirs too.
Driver memory: the counters and four numbers per block, flat in the row count.
"""

from __future__ import annotations

import itertools
import json
import os
import pickle
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from whileai_datasets import _compat
from whileai_datasets._options import TrainingOptions
from whileai_datasets._storage import Storage
from whileai_datasets.auditing import counting
from whileai_datasets.auditing.audit_report import Audit
from whileai_datasets.auditing.locations import count_unreadable, counts_lines, named_rows, places_in_file
from whileai_datasets.auditing.tally import FIRST_LOCATIONS, WORST_ROWS
from whileai_datasets.builders import unread
from whileai_datasets.columnar import _arrow
from whileai_datasets.errors import ExportFormatError, TemplateError, WhileaiError, stacklevel_outside
from whileai_datasets.export.sources import CHUNK_ROWS
from whileai_datasets.hub import trainer_gaps
from whileai_datasets.privacy.scanning import FIRST_PLACES, Findings, KindCount
from whileai_datasets.reading.reader import BadRows
from whileai_datasets.rows.canonical import Options

#: A row key: the file's index in the source's files, and the row's position in the file.
Key = tuple[int, int]
#: What the actors send back: one row per block, its ``Block`` pickled.
_COUNTS = pa.schema([("block", pa.binary())])


@dataclass
class Block:
    """One block's counts, row numbers counted from its first row."""

    first: Key
    last: Key
    rows: int  # canonical rows read
    samples: int  # rows the pipeline made (what the trainer gaps' locations count)
    found: Audit
    gaps: dict[str, dict[str, dict[str, Any]]]
    marked: tuple[int, int]  # rows with a marked turn, marked turns (the trainer report's row counts)
    bad: dict[str, Any]  # ``BadRows.to_dict()`` of the rows the reader left out
    places: dict[int, Key]  # the row key of each row the block's counters name
    route: dict[str, int] = field(default_factory=dict)  # TRL's default route on the default config (``Run.trl_route``)


def audit_on_ray(source: Any, *, tokenizer: Any, template: Any, options: TrainingOptions, on_bad_row: str = "raise",
                 progress: Callable[[int, int | None], None] | None = None, concurrency: int | None = None,
                 range_bytes: int | None = None, block_bytes: int | None = None, filesystem: Any = None,
                 trl_default: bool = False) -> Audit:
    """The audit of ``source`` (files as ``ray_engine.read_whileai`` takes them) on the Ray runtime this
    process is connected to (a local one is started when none is), with ``counting.checked_options``.

    ``tokenizer``: an object, a directory or Hub id, or a zero-argument factory, built once per actor.
    ``concurrency``: actors in the pool (default: the cluster's CPUs less one, at least one).
    ``range_bytes``, ``block_bytes``: as ``read_whileai``; a block is what one actor counts at a time.
    ``filesystem``: as ``read_whileai``: opens URI sources (``s3://bucket/prefix/``).
    ``trl_default``: as ``audit``'s (each actor measures TRL's default route of its blocks).
    """
    _compat.require_ray("engine='ray'")  # imported, not started: bad input is refused first
    import ray

    from whileai_datasets.ray_engine import block_counts, source_files
    from whileai_datasets.ray_engine import source as ray_source
    from whileai_datasets.ray_engine.engine import where_read
    from whileai_datasets.ray_engine.tokenizing import build_tokenizer

    if not isinstance(source, (str, os.PathLike)):
        raise ExportFormatError(
            f"the Ray audit reads files, got {type(source).__name__}", location="engine='ray'",
            hint="Pass a file, a glob or a directory of JSONL/Parquet files, or audit rows in memory with "
                 "engine='local'.")
    paths = tuple(source_files.expand_paths(source, filesystem=filesystem))
    storage = Storage(filesystem)
    built = build_tokenizer(tokenizer) if tokenizer is not None else None
    chat, _, facts = counting.prepare(built, template, options)  # bad options and templates fail here, once
    tools_json = json.dumps(options.tools, ensure_ascii=False) if options.tools else None
    files = ray_source.WhileaiFiles(paths, range_bytes=range_bytes or ray_source.RANGE_BYTES,
                                    block_bytes=block_bytes or ray_source.BLOCK_BYTES, storage=storage)
    totals = Totals(counting.new_audit(counting.source_name(source), options, on_bad_row, 0, built is not None,
                                       facts), storage=storage, trl_default=trl_default)
    if not ray.is_initialized():
        ray.init()
    collector = block_counts.collector_on_this_node()
    try:
        setup = (paths, tokenizer, chat, options, on_bad_row, tools_json, facts, block_counts.Reporter(collector),
                 storage, trl_default)
        blocks = ray.data.read_datasource(files, override_num_blocks=files.n_tasks())
        counted = blocks.map_batches(AuditBlocks, batch_format="pyarrow", batch_size=None, num_cpus=1,
                                     concurrency=concurrency or _pool(ray), fn_constructor_args=setup)
        with block_counts.surfaced(collector):
            for batch in counted.iter_batches(batch_format="pyarrow", batch_size=None):
                for blob in batch.column("block").to_pylist():
                    block: Block = pickle.loads(blob)
                    totals.add(block)
                    if progress is not None:
                        progress(block.rows + int(block.bad["count"]), None)
        unread.warn(block_counts.unread_keys(collector, paths, storage), where_read(source), kept=False,
                    stacklevel=stacklevel_outside())
    finally:
        ray.kill(collector)
    return totals.finish(tools_json, facts, list(paths))


def _pool(ray: Any) -> int:
    """Actors by default: one per CPU of the cluster but one (Ray fuses the reads into the actors; the CPU
    left is the driver's, which adds the blocks up, and Ray's own)."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)) - 1)


class AuditBlocks:
    """The actor: the tokenizer built once, then each raw block read and counted (``Block``)."""

    def __init__(self, paths: tuple[str, ...], tokenizer: Any, chat: Any, options: TrainingOptions,
                 on_bad_row: str, tools_json: str | None, facts: Any, reporter: Any, storage: Any = None,
                 trl_default: bool = False) -> None:
        from whileai_datasets.ray_engine import source as ray_source
        from whileai_datasets.ray_engine.tokenizing import build_tokenizer

        built = build_tokenizer(tokenizer) if tokenizer is not None else None
        self.transform = counting.transform_of(built, chat, options)
        system = str(options.system_prompt or "")
        self.normalize = ray_source.Normalize(paths, "default", Options(system_prompt=system), report=reporter,
                                              storage=storage or Storage())  # told the block's unread keys
        self.options, self.on_bad_row, self.tools_json = options, on_bad_row, tools_json
        self.facts, self.reporter, self.trl_default = facts, reporter, trl_default

    def __call__(self, raw: pa.Table) -> pa.Table:
        try:
            return self._count(raw)
        except WhileaiError as err:  # Ray brings only the text back: the driver raises this one
            self.reporter(err)
            raise

    def _count(self, raw: pa.Table) -> pa.Table:
        from whileai_datasets.ray_engine import source as ray_source

        if ray_source.FILE not in raw.column_names or not raw.num_rows:  # Ray hands on empty blocks
            return _COUNTS.empty_table()
        files, positions = raw.column(ray_source.FILE), raw.column(ray_source.POS)
        bad = BadRows()
        table = self.normalize.skipping(raw, bad)
        keys = (table.column(ray_source.FILE).to_numpy(), table.column(ray_source.POS).to_numpy())
        table = _arrow.drop(table, *ray_source.PRIVATE)
        found = counting.new_audit("", self.options, self.on_bad_row, table.num_rows, self.transform is not None,
                                   self.facts)
        run = counting.Run(found, self.options, self.tools_json, self.transform, self.facts,
                           trl_default=self.trl_default)
        try:
            for start in range(0, table.num_rows, CHUNK_ROWS):
                run.chunk(table.slice(start, CHUNK_ROWS), start)
        except TemplateError as err:  # "row N" counts from the block's first row: name the file and line
            raise self._located(err, keys) from err
        block = Block((files[0].as_py(), positions[0].as_py()), (files[-1].as_py(), positions[-1].as_py()),
                      table.num_rows, run.training_offset, found, trainer_gaps.merge_gaps(run.gaps),
                      (run.marked_rows, run.marked_turns), bad.to_dict(),
                      {row: (int(keys[0][row]), int(keys[1][row])) for row in set(named_rows(found))},
                      dict(run.trl_route))
        return pa.table({"block": pa.array([pickle.dumps(block)], pa.binary())}, schema=_COUNTS)

    def _located(self, err: TemplateError, keys: tuple[np.ndarray, np.ndarray]) -> TemplateError:
        """``tokenize``'s error on the block's row N ("row N: ..."), naming the row's file and line instead."""
        from whileai_datasets.ray_engine import source_files

        head, _, rest = err.problem.partition(": ")
        if not (head.startswith("row ") and head[4:].isdigit()):
            return err
        row = int(head[4:])
        where = source_files.row_context(self.normalize.paths[int(keys[0][row])], int(keys[1][row]),
                                         self.normalize.storage).at()
        return type(err)(f"{where}: {rest}", location=err.location, hint=err.hint)


@dataclass
class Totals:
    """The blocks added up, in any order; ``finish`` puts the kept rows in source order."""

    found: Audit
    blocks: list[tuple[Key, Key, int, int]] = field(default_factory=list)
    first: dict[str, list[tuple[Key, int]]] = field(default_factory=dict)
    worst: dict[str, list[tuple[float, Key, int, dict[str, int]]]] = field(default_factory=dict)
    gaps: dict[str, dict[str, dict[str, Any]]] = field(default_factory=lambda: trainer_gaps.merge_gaps(()))
    marked: list[int] = field(default_factory=lambda: [0, 0])
    route: Counter[str] = field(default_factory=Counter)
    bad: list[tuple[Key, int, str]] = field(default_factory=list)
    places: dict[tuple[Key, int], Key] = field(default_factory=dict)
    bad_count: int = 0
    #: per kind of secret or personal data, its first places as (block key, row in block, place)
    privacy: dict[str, list[tuple[Key, int, dict[str, Any]]]] = field(default_factory=dict)
    first_error: tuple[Key, str] | None = None
    storage: Storage = field(default_factory=Storage)
    trl_default: bool = False  # TRL's default route measured (``counting.Run.trl_default``)

    def add(self, block: Block) -> None:
        found, part = self.found, block.found
        self.blocks.append((block.first, block.last, block.rows, block.samples))
        for name in ("training_rows", "tokens", "supervised_tokens", "tokens_before_cut", "naive_tokens"):
            setattr(found, name, getattr(found, name) + getattr(part, name))
        for into, more in ((found.role_chars, part.role_chars), (found.mask_methods, part.mask_methods)):
            for key, value in more.items():
                into[key] = into.get(key, 0) + value
        for name, hit in part.findings.items():
            found.findings[name].rows += hit.rows
            found.findings[name].amount += hit.amount
            # a block that met the finding names its earliest row; an earlier block may have named none yet
            earliest = not self.first.get(name) or (block.first, hit.first[0] if hit.first else 0) < self.first[name][0]
            if hit.first_error and earliest:  # the message of the earliest row named
                found.findings[name].first_error = hit.first_error
            kept = self.first.get(name, []) + [(block.first, r) for r in hit.first]
            self.first[name] = sorted(kept)[:FIRST_LOCATIONS]
        for name, histogram in part.histograms.items():
            found.histograms[name].merge(histogram)
        for name, worst in part.worst.items():
            entries = [(float(score), block.first, int(row), {k: int(v[i]) for k, v in worst.extra.items()})
                       for i, (row, score) in enumerate(zip(worst.rows, worst.scores))]
            self.worst[name] = sorted(self.worst.get(name, []) + entries, key=lambda e: e[:3])[:WORST_ROWS]
        self._add_privacy(block)
        self._add_places(block)
        self._add_gaps(block)
        self.marked = [self.marked[0] + block.marked[0], self.marked[1] + block.marked[1]]
        self.route.update(block.route)
        self._add_bad(block)

    def _add_privacy(self, block: Block) -> None:
        """The scan's counts added; each kind's first places kept as (block key, row in block)."""
        found, part = self.found.privacy, block.found.privacy
        found.merge(Findings(part.scanned_rows, part.secret_rows, part.personal_rows))
        for kind, count in part.kinds.items():
            mine = found.kinds.setdefault(kind, KindCount())
            mine.rows, mine.values = mine.rows + count.rows, mine.values + count.values
            kept = self.privacy.get(kind, []) + [(block.first, p["row"], p) for p in count.first]
            self.privacy[kind] = sorted(kept, key=lambda e: e[:2])[:FIRST_PLACES]

    def _add_places(self, block: Block) -> None:
        """The row keys of the rows still kept (the others are dropped: memory stays flat)."""
        kept = {pair for firsts in self.first.values() for pair in firsts}
        kept |= {(key, row) for entries in self.worst.values() for _, key, row, _ in entries}
        more = {(block.first, row): place for row, place in block.places.items()}
        self.places = {pair: place for pair, place in (self.places | more).items() if pair in kept}

    def _add_gaps(self, block: Block) -> None:
        for trainer, shapes in block.gaps.items():
            for shape, hit in shapes.items():
                into = self.gaps[trainer][shape]
                into["rows"] += int(hit["rows"])
                if hit["first"] is not None and (into["first"] is None or block.first < into["first"][0]):
                    into["first"] = (block.first, hit["first"])

    def _add_bad(self, block: Block) -> None:
        self.bad_count += int(block.bad["count"])
        where = [(block.first, i, text) for i, text in enumerate(block.bad["locations"][:FIRST_LOCATIONS])]
        self.bad = sorted(self.bad + where)[:FIRST_LOCATIONS]
        error = block.bad["first_error"]
        if error is not None and (self.first_error is None or block.first < self.first_error[0]):
            self.first_error = (block.first, error)

    def finish(self, tools_json: str | None, facts: Any, paths: list[str]) -> Audit:
        """The audit the local engine gives: row numbers in source order, the trainer report, locations."""
        found = self.found
        starts = self._starts()
        found.rows = sum(rows for _, _, rows, _ in self.blocks)
        for name, kept in self.first.items():
            found.findings[name].first = [starts[key][0] + row for key, row in kept]
        for kind, places in self.privacy.items():
            found.privacy.kinds[kind].first = [{**place, "row": starts[key][0] + row} for key, row, place in places]
        for name, entries in self.worst.items():
            worst = found.worst[name]
            worst.rows = np.array([starts[key][0] + row for _, key, row, _ in entries], np.int64)
            worst.scores = np.array([score for score, *_ in entries], np.float64)
            names = entries[0][3] if entries else {}
            worst.extra = {k: np.array([e[3][k] for e in entries], np.int64) for k in names}
        run = counting.Run(found, counting.recorded(found), tools_json, None, facts, trl_default=self.trl_default)
        run.gaps = [self._placed_gaps(starts)]
        run.marked_rows, run.marked_turns = self.marked
        run.trl_route = self.route
        run.finish()
        bad = {"count": self.bad_count, "first_error": self.first_error[1] if self.first_error else None,
               "locations": [text for _, _, text in self.bad]}
        count_unreadable(found, bad)
        found.locations = self._locations(starts, paths)
        return found

    def _locations(self, starts: dict[Key, tuple[int, int]], paths: list[str]) -> dict[int, dict[str, Any]]:
        """File and line of each row kept, as the local audit gives them (lines for JSONL files and JSON arrays)."""
        rows = {starts[key][0] + row: place for (key, row), place in self.places.items()}
        files = {i: paths[i] for i in {file for file, _ in rows.values()} if counts_lines(paths[i])}
        placed = {i: places_in_file(path, [pos for file, pos in rows.values() if file == i], self.storage)
                  for i, path in files.items()}
        # numbered in its file as the reader numbers it, as the local audit names it: one number, one line
        return {row: {"row": placed[file][pos][0], "file": files[file], "line": placed[file][pos][1]}
                if file in files else {"row": row, "file": None, "line": None}
                for row, (file, pos) in sorted(rows.items())}

    def _starts(self) -> dict[Key, tuple[int, int]]:
        """Per block (by its first key): the rows and the pipeline's rows of the blocks before it."""
        blocks = sorted(self.blocks)
        for (_, last, _, _), (first, _, _, _) in itertools.pairwise(blocks):
            if not last < first:
                raise RuntimeError("blocks of the Ray audit overlap in file order, so its row numbers would be "
                                   "wrong; this is a bug in whileai_datasets.auditing.on_ray")
        starts, rows, samples = {}, 0, 0
        for first, _, n, s in blocks:
            starts[first] = (rows, samples)
            rows, samples = rows + n, samples + s
        return starts

    def _placed_gaps(self, starts: dict[Key, tuple[int, int]]) -> dict[str, dict[str, dict[str, Any]]]:
        """The trainer gaps with each first location moved to its block's place among the pipeline's rows."""
        placed = trainer_gaps.merge_gaps(())
        for trainer, shapes in self.gaps.items():
            for shape, hit in shapes.items():
                first = None
                if hit["first"] is not None:
                    key, text = hit["first"]
                    moved = trainer_gaps.shift_rows({trainer: {shape: {"rows": 0, "first": text}}}, starts[key][1])
                    first = moved[trainer][shape]["first"]
                placed[trainer][shape] = {"rows": hit["rows"], "first": first}
        return placed
