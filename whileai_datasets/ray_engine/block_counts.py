"""The Ray export's report: per-block counts, collected and added up in file order.

Each block of the export counts what ``export_dataset``'s report needs (the
local ``TrainingStats`` over its written rows, plus the source rows' leak and
token-cap facts) and sends it to a ``Collector`` actor, keyed by the block's
first row; retried tasks count once. The driver sorts the blocks by their row
key, checks that they do not overlap, and adds them up: row indices in the
report (``tool_call_roundtrip.rows``) are offsets into the rows written before,
exactly as the local export counts them. Errors raised in Ray tasks go to the
collector too, because Ray brings only their text back to the driver.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray

from whileai_datasets._options import TrainingOptions
from whileai_datasets.columnar import _arrow
from whileai_datasets.errors import WhileaiError
from whileai_datasets.ray_engine import source, source_files
from whileai_datasets.rows.unread_keys import Unread
from whileai_datasets.shaping import reports
from whileai_datasets.transforms import gates


def first_last(table: pa.Table) -> tuple[tuple[int, int], tuple[int, int]]:
    """The row keys of a block's first and last rows: where it sits in file order."""
    files = _arrow.column(table, source.FILE)
    positions = _arrow.column(table, source.POS)
    return (files[0].as_py(), positions[0].as_py()), (files[-1].as_py(), positions[-1].as_py())


def raw_counts(table: pa.Table) -> dict[str, Any]:
    """What the report needs from the source rows of one block."""
    leak = _arrow.column(table, source.LEAK)
    checked = leak.drop_null().to_pylist()
    leaked = [json.loads(text) for text in checked if text != "{}"]
    finish = _arrow.optional(table, "finish_reason", pa.string())
    return {
        "n_raw": table.num_rows,
        "n_cut": int(pc.sum(pc.equal(finish, "length")).as_py() or 0),
        "n_checked": len(checked),
        "n_leaked": len(leaked),
        "leaked": leaked[:20],
        "exported": bool(pc.any(_arrow.column(table, source.HAS_SCENARIO)).as_py()),
    }


def report(parts: list[tuple[Any, Any, dict[str, Any]]], options: TrainingOptions) -> dict[str, Any]:
    """The blocks' counts, added up in file order, as ``export_dataset``'s report."""
    parts = sorted(parts, key=lambda p: p[0])
    for (_, last, _), (first, _, _) in itertools.pairwise(parts):
        if not last < first:
            raise RuntimeError(
                "blocks of the Ray export overlap in file order, so row indices in the report would be wrong; "
                "this is a bug in whileai_datasets.ray_engine"
            )
    stats = reports.TrainingStats(options)
    scan = gates.LeakScan()
    n_cut = 0
    leaked: list[Any] = []
    n_leaked = 0
    for _, _, part in parts:
        merge_stats(stats, part["stats"])
        raw = part["raw"]
        scan.n_rows += raw["n_raw"]
        scan.n_checked += raw["n_checked"]
        scan.exported = scan.exported or raw["exported"]
        n_cut += raw["n_cut"]
        n_leaked += raw["n_leaked"]
        leaked.extend(raw["leaked"][: 20 - len(leaked)])
    # LeakScan reports n_leaked and the first 20 entries: the rest are counted, not kept
    scan.leaked, scan.n_leaked = leaked, n_leaked
    # TrainingStats.report reads the rows cut by the token cap from the keys' finish_reason
    keys = pa.table({"finish_reason": pa.array(np.full(n_cut, "length", dtype=object), pa.string())})
    return stats.report(scan.report(), keys, scan.n_rows)


def merge_stats(total: reports.TrainingStats, part: reports.TrainingStats) -> None:
    """Add one block's ``TrainingStats`` to the running total (the block's rows
    come after every row counted so far)."""
    offset = total.n
    for name, value in vars(part).items():
        if name == "options":
            continue
        if isinstance(value, gates.Roundtrip):
            gate = total.roundtrip
            gate.checked += value.checked
            gate.invalid += value.invalid
            gate.rows.extend(offset + r for r in value.rows[: max(0, 20 - len(gate.rows))])
        elif isinstance(value, set):
            getattr(total, name).update(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            setattr(total, name, getattr(total, name) + value)
        else:
            raise TypeError(f"cannot add up TrainingStats.{name} ({type(value).__name__}) across Ray blocks")


@ray.remote(num_cpus=0)
class Collector:
    """Receives each block's report counts, and the first errors (Ray carries
    only their text back to the driver)."""

    def __init__(self) -> None:
        self._parts: dict[Any, tuple[Any, Any, dict[str, Any]]] = {}
        self._errors: list[WhileaiError] = []
        self._unread: dict[Any, dict[str, Any]] = {}

    def add(self, first: Any, last: Any, part: dict[str, Any]) -> None:
        self._parts[first] = (first, last, part)  # keyed: a retried task counts once

    def fail(self, error: WhileaiError) -> None:
        if len(self._errors) < 10:
            self._errors.append(error)

    def parts(self) -> list[tuple[Any, Any, dict[str, Any]]]:
        return list(self._parts.values())

    def add_unread(self, first: Any, found: dict[str, Any]) -> None:
        self._unread[first] = found  # keyed like the parts: a retried task counts once

    def unread(self) -> list[tuple[Any, dict[str, Any]]]:
        return list(self._unread.items())

    def errors(self) -> list[WhileaiError]:
        return list(self._errors)


def collector_on_this_node() -> Any:
    """A new ``Collector``, placed on the driver's own node (never moved): a job's counts must outlive
    any worker node the cluster loses, and when the driver's node is lost the job is lost anyway."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    return Collector.options(scheduling_strategy=here).remote()  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Reporter:
    """The collector, as the Ray tasks call it."""

    collector: Any

    def __call__(self, error: WhileaiError) -> None:
        ray.get(self.collector.fail.remote(error))

    def add(self, first_last: tuple[Any, Any], part: dict[str, Any]) -> None:
        ray.get(self.collector.add.remote(first_last[0], first_last[1], part))

    def unread(self, first: tuple[int, int], found: dict[str, Any]) -> None:
        ray.get(self.collector.add_unread.remote(first, found))


def unread_keys(collector: Any, paths: Sequence[str], storage: Any) -> Unread:
    """The unread keys the blocks sent (``source.Normalize``), added up in file order, each first one
    located as the local reader locates it (file, line, row)."""
    total = Unread()
    for _, found in sorted(ray.get(collector.unread.remote()), key=lambda item: item[0]):
        total.merge(found)
    for entry in total.keys.values():
        where = source_files.row_context(paths[entry[1]], entry[3], storage)
        entry[1:4] = [where.source, where.line, where.row]
    return total


@contextlib.contextmanager
def surfaced(collector: Any) -> Iterator[None]:
    """Raise our own error when a Ray task failed with one (Ray wraps it in
    ``RayTaskError(UserCodeException)`` and drops the object)."""
    try:
        yield
    except WhileaiError as err:
        cause = getattr(err, "cause", None)  # Ray's RayTaskError(ExportFormatError) of a read task: its text is a traceback
        if isinstance(cause, WhileaiError) and cause is not err:
            raise cause from err
        raise
    except Exception as err:
        errors = ray.get(collector.errors.remote())
        if errors:
            raise errors[0] from err
        raise
