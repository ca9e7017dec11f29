"""GRPO group stamping on Ray Data, exactly as ``transforms.groups`` stamps locally.

Grouping is Ray's: every row's task key (``scenario_id`` when non-empty, else
``prompt``) is hashed (sha1, whose first 12 hex digits are whileai's
``group_id``), the digests are spread over buckets, and
``groupby(bucket).map_groups`` computes each task's ``k``, ``n0``, ``n1``,
``reward_mean`` and ``reward_std`` with the local code, a bucket of whole tasks
at a time. The per-task table (one row per task, no prompt text) goes back to
the driver, is sorted by digest, and is broadcast to the stamping step, which
finds each row's task by binary search: the wide rows are never shuffled, so
they keep their order.

Floats: the local step sums each task's rewards in Python, in row order, and
so does this one: rows are sorted by their row key (``order_by``) inside each
bucket first, so ``reward_mean`` / ``reward_std`` are bit-identical.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray

from whileai_datasets.columnar import _arrow
from whileai_datasets.errors import SchemaError
from whileai_datasets.transforms import groups

TASK = "_wai_task"
BUCKET = "_wai_bucket"
#: Rows per ``map_groups`` bucket: each bucket is one call holding whole tasks.
ROWS_PER_BUCKET = 250_000
_DIGEST = pa.binary(20)


def task_digests(table: pa.Table) -> pa.Array:
    """sha1 of each row's task key (null for rows in no group), hashing each
    distinct key once."""
    keys = groups.task_keys(_arrow.optional(table, "scenario_id", pa.string()), _arrow.optional(table, "prompt", pa.string()))
    encoded = pc.dictionary_encode(keys)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    digests = [hashlib.sha1(k.encode("utf-8")).digest() if k else None for k in encoded.dictionary.to_pylist()]
    return pa.array(digests, _DIGEST).take(encoded.indices)


def _matrix(digests: pa.Array) -> np.ndarray:
    """Fixed-size digests as a numpy ``S20`` array (null slots are zero bytes)."""
    if isinstance(digests, pa.ChunkedArray):
        digests = digests.combine_chunks()
    values = np.frombuffer(digests.buffers()[1], dtype="S20")
    return values[digests.offset : digests.offset + len(digests)]


@dataclass(frozen=True)
class TaskKeys:
    """Canonical rows -> the narrow rows grouping needs (rows in no group dropped)."""

    buckets: int
    order_by: tuple[str, ...]

    def __call__(self, table: pa.Table) -> pa.Table:
        if not table.num_rows:  # Ray hands on empty blocks without their columns
            return pa.table({TASK: pa.array([], _DIGEST), BUCKET: pa.array([], pa.int64())})
        digests = task_digests(table)
        head = np.frombuffer(digests.buffers()[1], np.uint8).reshape(-1, 20)[:, :2].astype(np.int64)
        bucket = (head[:, 0] * 256 + head[:, 1]) % self.buckets
        out = pa.table(
            {
                TASK: digests,
                BUCKET: pa.array(bucket, pa.int64()),
                "reward": pc.cast(_arrow.optional(table, "reward", pa.float64()), pa.float64()),
                **{name: table.column(name) for name in self.order_by},
            }
        )
        return out.filter(digests.is_valid())


def group_stats(table: pa.Table, order_by: Sequence[str]) -> pa.Table:
    """One bucket's rows -> one row per task, with the local step's arithmetic
    (``map_groups`` calls it once per bucket)."""
    table = table.take(pc.sort_indices(table, sort_keys=[(n, "ascending") for n in order_by]))
    encoded = pc.dictionary_encode(_arrow.column(table, TASK))
    index = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    n = len(encoded.dictionary)
    sizes = np.bincount(index, minlength=n)
    rewards = np.asarray(pc.fill_null(_arrow.column(table, "reward"), np.nan).to_numpy(zero_copy_only=False))
    numeric = ~np.isnan(rewards)
    n0 = np.bincount(index[numeric & (rewards < groups.PASS_THRESHOLD)], minlength=n)
    n1 = np.bincount(index[numeric & (rewards > groups.PASS_THRESHOLD)], minlength=n)
    mean, std = groups.group_moments(index[numeric], rewards[numeric], n)
    group_ids = [d.hex()[:12] for d in encoded.dictionary.to_pylist()]
    return pa.table(
        {
            TASK: encoded.dictionary,
            "group_id": pa.array(group_ids, pa.string()),
            "k": pa.array(sizes, pa.int64()),
            "n0": pa.array(n0, pa.int64()),
            "n1": pa.array(n1, pa.int64()),
            "reward_mean": pa.array(mean, pa.float64(), mask=np.isnan(mean)),
            "reward_std": pa.array(std, pa.float64(), mask=np.isnan(std)),
        }
    )


def group_table(ds: Any, *, order_by: Sequence[str], n_rows: int) -> pa.Table | None:
    """Per-task group columns of ``ds`` (a Ray dataset of canonical rows),
    sorted by task digest; ``None`` when no task has more than one row
    (whileai stamps nothing then)."""
    order_by = tuple(order_by)
    buckets = int(min(4096, max(1, -(-n_rows // ROWS_PER_BUCKET))))
    present = [n for n in ("scenario_id", "prompt", "reward") if n in ds.columns()]
    keys = ds.select_columns([*present, *order_by]).map_batches(
        TaskKeys(buckets, order_by), batch_format="pyarrow", batch_size=None
    )
    grouped = keys.groupby(BUCKET, num_partitions=buckets)
    stats = grouped.map_groups(group_stats, fn_args=(order_by,), batch_format="pyarrow")
    tables = [t for t in ray.get(stats.to_arrow_refs()) if t.num_rows]
    if not tables:
        return None
    table = pa.concat_tables(tables).combine_chunks()
    if not pc.any(pc.greater(table.column("k"), 1)).as_py():
        return None
    return table.take(pa.array(np.argsort(_matrix(_arrow.column(table, TASK)), kind="stable"))).combine_chunks()


@dataclass(frozen=True)
class GroupLookup:
    """Each row's group columns, found in the broadcast per-task table.

    Args:
        stats: ``group_table``'s result, or an ``ObjectRef`` to it.
    """

    stats: Any

    def columns(self, table: pa.Table) -> dict[str, pa.Array]:
        stats = ray.get(self.stats) if isinstance(self.stats, ray.ObjectRef) else self.stats
        keys = _matrix(_arrow.column(stats, TASK))
        digests = task_digests(table)
        probe = _matrix(digests)
        at = np.minimum(np.searchsorted(keys, probe), len(keys) - 1)
        found = _arrow.to_numpy_bool(digests.is_valid()) & (keys[at] == probe)
        index = pa.array(at, pa.int64(), mask=~found)
        return {name: _arrow.column(stats, name).take(index) for name in groups.GROUP_COLUMNS}

    def __call__(self, table: pa.Table) -> pa.Table:
        if not table.num_rows:  # Ray hands on empty blocks without their columns
            return table
        for name, values in self.columns(table).items():
            table = _arrow.set_column(table, name, values)
        return table


def stamp_groups(ds: Any, *, order_by: Sequence[str] = ("source_file", "source_offset")) -> Any:
    """whileai's GRPO group fields over a Ray dataset of canonical training rows.

    The Ray counterpart of ``whileai_datasets.stamp_groups``: ``group_id``,
    ``k``, ``n0``, ``n1``, ``reward_mean``, ``reward_std`` per row (null
    outside any group), computed with Ray's ``groupby``; the dataset is
    returned unchanged when no task has more than one row. It is materialized
    first: a group's statistics need all of its rows before the first row is
    stamped.

    Args:
        ds: Canonical rows with their row key, e.g.
            ``read_whileai(paths, row_key=True)``, before ``unroll``.
        order_by: The row-key columns; rewards are summed in this order, as
            the local step sums them in row order. With several input files,
            ``source_file`` sorts by path, so pass the files in sorted order
            (a directory or a glob already is) for bit-identical floats.
    Returns:
        A Ray dataset with the six group columns.
    Raises:
        SchemaError: ``ds`` lacks a row-key column.
    """
    missing = [n for n in order_by if n not in ds.columns()]
    if missing:
        raise SchemaError(
            f"stamp_groups on Ray needs the row-key columns {list(order_by)} to sum rewards in row order; "
            f"missing {missing}",
            location="stamp_groups",
            hint="Read the rows with read_whileai(..., row_key=True), or pass order_by= naming your key columns.",
        )
    ds = ds.materialize()
    table = group_table(ds, order_by=order_by, n_rows=ds.count())
    if table is None:
        return ds
    return ds.map_batches(GroupLookup(ray.put(table)), batch_format="pyarrow", batch_size=None)
