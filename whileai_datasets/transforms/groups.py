"""``stamp_groups(ds)``: whileai's GRPO group fields over a whole dataset.

Rows are grouped by whileai's ``task_key`` as a training row has it
(``scenario_id`` when non-empty, else ``prompt``; rows with neither are in
no group). When any group has more than one row, every grouped row gets
``group_id`` (``sha1(task_key)[:12]``), ``k`` (group size), ``n0`` / ``n1``
(numeric rewards below / above 0.5; exactly 0.5 counts as neither) and
``reward_mean`` / ``reward_std`` (population statistics over the numeric
rewards, null when there are none). When no prompt repeats, nothing is stamped.

Grouping and counting are Arrow and numpy over the key columns. The mean and
standard deviation are summed in Python per group, in row order, so the floats
are bit-identical to whileai's on the same interpreter (Python 3.12 changed
``sum`` of floats to compensated summation).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets.columnar import _arrow
from whileai_datasets.columnar._batches import GROUP_TYPES
from whileai_datasets.errors import SchemaError

PASS_THRESHOLD = 0.5
GROUP_COLUMNS = tuple(GROUP_TYPES)


def task_keys(scenario_id: pa.Array, prompt: pa.Array) -> pa.Array:
    """``scenario_id or prompt or ""`` per row."""
    scenario = pc.fill_null(scenario_id, "")
    text = pc.fill_null(prompt, "")
    return pc.if_else(pc.not_equal(scenario, ""), scenario, text)


def group_columns(scenario_id: pa.Array, prompt: pa.Array, reward: pa.Array) -> dict[str, pa.Array] | None:
    """The group columns for rows with these keys and rewards, or ``None``
    when no task has more than one row (whileai stamps nothing then)."""
    keys = task_keys(_whole(scenario_id), _whole(prompt))
    encoded = pc.dictionary_encode(keys)
    dictionary = encoded.dictionary.to_pylist()
    index = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    valid = _arrow.to_numpy_bool(pc.not_equal(keys, ""))
    n_groups = len(dictionary)
    sizes = np.bincount(index[valid], minlength=n_groups)
    if not (sizes > 1).any():
        return None
    rewards = np.asarray(pc.fill_null(pc.cast(_whole(reward), pa.float64()), np.nan).to_numpy(zero_copy_only=False))
    numeric = valid & ~np.isnan(rewards)
    n0 = np.bincount(index[numeric & (rewards < PASS_THRESHOLD)], minlength=n_groups)
    n1 = np.bincount(index[numeric & (rewards > PASS_THRESHOLD)], minlength=n_groups)
    mean, std = group_moments(index[numeric], rewards[numeric], n_groups)
    group_ids = pa.array([hashlib.sha1(text.encode("utf-8")).hexdigest()[:12] for text in dictionary], pa.string())
    absent = pa.array(~valid)
    take = pa.array(index)
    return {
        "group_id": _arrow.if_else(absent, pa.scalar(None, pa.string()), group_ids.take(take)),
        "k": pa.array(sizes[index], pa.int64(), mask=~valid),
        "n0": pa.array(n0[index], pa.int64(), mask=~valid),
        "n1": pa.array(n1[index], pa.int64(), mask=~valid),
        "reward_mean": pa.array(mean[index], pa.float64(), mask=~valid | np.isnan(mean[index])),
        "reward_std": pa.array(std[index], pa.float64(), mask=~valid | np.isnan(std[index])),
    }


def group_moments(group: np.ndarray, values: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Population mean and std per group, summed in row order in Python floats."""
    mean = np.full(n_groups, np.nan)
    std = np.full(n_groups, np.nan)
    if not len(group):
        return mean, std
    order = np.argsort(group, kind="stable")
    counts = np.bincount(group, minlength=n_groups)
    bounds = _arrow.offsets_of(counts)
    ordered = values[order].tolist()
    for g in np.flatnonzero(counts).tolist():
        members = ordered[bounds[g] : bounds[g + 1]]
        m = sum(members) / len(members)
        mean[g] = m
        std[g] = (sum((v - m) ** 2 for v in members) / len(members)) ** 0.5
    return mean, std


def _whole(array: Any) -> pa.Array:
    if isinstance(array, pa.ChunkedArray):
        return array.combine_chunks()
    return array


def key_columns(table: pa.Table) -> tuple[pa.Array, pa.Array, pa.Array]:
    return (
        _arrow.optional(table, "scenario_id", pa.string()),
        _arrow.optional(table, "prompt", pa.string()),
        _arrow.optional(table, "reward", pa.float64()),
    )


def stamp_table(table: pa.Table) -> pa.Table:
    """``table`` with the group columns (unchanged when no task repeats)."""
    columns = group_columns(*key_columns(table))
    if columns is None:
        return table
    for name, values in columns.items():
        table = _arrow.set_column(table, name, values)
    return table


def stamp_groups(ds: Any) -> Any:
    """whileai's GRPO group fields over a whole ``Dataset`` (or ``pyarrow.Table``).

    Args:
        ds: Canonical training rows (``load_dataset("whileai/export", ...)``),
            before ``unroll`` (whileai never stamps unrolled samples).
    Returns:
        The same kind, with ``group_id``, ``k``, ``n0``, ``n1``,
        ``reward_mean`` and ``reward_std`` (null outside any group); unchanged
        when no task has more than one row.
    Raises:
        SchemaError: ``ds`` is an ``IterableDataset`` (grouping needs every row).
    Example:
        >>> import whileai_datasets
        >>> ds = whileai_datasets.stamp_groups(ds)  # doctest: +SKIP
    """
    if isinstance(ds, pa.Table):
        return stamp_table(ds)
    import datasets

    if isinstance(ds, datasets.IterableDataset):
        raise SchemaError(
            "stamp_groups needs every row to count a group, and an IterableDataset streams them",
            location="stamp_groups",
            hint="Load the dataset without streaming=True, or stamp groups before iterating.",
        )
    if not isinstance(ds, datasets.Dataset):
        raise SchemaError(
            f"expected a datasets.Dataset or a pyarrow.Table, got {type(ds).__name__}",
            location="stamp_groups",
            hint='Pass the dataset from load_dataset("whileai/export", ...).',
        )
    names = [n for n in ("scenario_id", "prompt", "reward") if n in ds.column_names]
    keys = ds.with_format("arrow").select_columns(names)[:] if names else pa.table({})
    if not names:
        keys = pa.table({"_": pa.nulls(len(ds))})
    columns = group_columns(*key_columns(keys))
    if columns is None:
        return ds
    present = [n for n in GROUP_COLUMNS if n in ds.column_names]
    out = ds.remove_columns(present) if present else ds
    for name in GROUP_COLUMNS:
        out = out.add_column(name, columns[name])
    return out
