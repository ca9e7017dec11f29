"""Hold out whole situations: train/holdout splits in which no value of a key lands in both."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset, DatasetDict, Value

from whileai_datasets.errors import ExportFormatError, PublishError, SchemaError
from whileai_datasets.hub.reading import CHUNK_ROWS, chunks

_KEY_DTYPES = ("string", "large_string", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def split_by(ds: Dataset, key: str = "scenario_id", *, test_size: float | int = 0.1, seed: int = 0,
             names: tuple[str, str] = ("train", "holdout")) -> DatasetDict:
    """Split `ds` in two so that every value of `key` (a situation) lands in exactly one split.

    Args:
        ds: The rows.
        key: Column naming the situation a row belongs to (strings or integers, no nulls).
        test_size: Share of the *groups* held out (a float in (0, 1), rounded up), or their number (an int).
        seed: Which groups are held out; the same seed gives the same split.
        names: Names of the two splits.
    Returns:
        `DatasetDict({names[0]: ..., names[1]: ...})`, rows in their original order within each split.
    Raises:
        SchemaError: `key` is missing or does not hold strings or integers.
        ExportFormatError: a row has no value for `key`.
        ValueError: `test_size` would leave a split without groups.
    Example:
        >>> parts = split_by(ds, "scenario_id", test_size=0.2, seed=0)  # doctest: +SKIP
    """
    keys = _key_column(ds, key)
    held = pc.is_in(keys, value_set=held_out(pc.unique(keys), key, test_size=test_size, seed=seed))
    return DatasetDict({names[0]: ds.select(_row_numbers(pc.invert(held))), names[1]: ds.select(_row_numbers(held))})


@dataclass(frozen=True)
class HoldOut:
    """Which whole groups to hold out, as `split_by` holds them out: the values of `key` in a share
    (`test_size`, a float) or a number (an int) of the groups, picked by `seed`, into the split `names[1]`."""

    key: str = "scenario_id"
    test_size: float | int = 0.1
    seed: int = 0
    names: tuple[str, str] = ("train", "holdout")

    def split(self, ds: Dataset) -> DatasetDict:
        """`ds` in the two splits (`split_by`)."""
        return split_by(ds, self.key, test_size=self.test_size, seed=self.seed, names=self.names)

    def held(self, groups: pa.Array) -> pa.Array:
        """The values of `groups` (each distinct value of `key` once) that are held out (`held_out`)."""
        return held_out(groups, self.key, test_size=self.test_size, seed=self.seed)


def held_out(groups: pa.Array, key: str, *, test_size: float | int, seed: int) -> pa.Array:
    """The values of `key` (`groups`: each distinct value once, any order) that `split_by` holds out."""
    groups = groups.take(pc.sort_indices(groups))
    n_held = _held_out_count(test_size, len(groups), key)
    order = list(range(len(groups)))
    random.Random(seed).shuffle(order)
    return groups.take(pa.array(sorted(order[:n_held]), pa.int64()))


def _row_numbers(mask: pa.Array) -> np.ndarray:
    # int64, not the uint64 indices_nonzero gives: datasets' contiguous-range fast path cannot index with
    # numpy uint64; not Python ints either (36 bytes a row, and 2x slower to select 1M rows)
    return pc.indices_nonzero(mask).to_numpy().astype(np.int64)


def _key_column(ds: Dataset, key: str) -> pa.Array:
    if key not in ds.column_names:
        raise SchemaError(f"expected a column {key!r} naming each row's situation, got columns {ds.column_names}",
                          location=f"key={key!r}", hint="Pass key= with the column to group by")
    feature = ds.features[key]
    if not isinstance(feature, Value) or feature.dtype not in _KEY_DTYPES:
        raise SchemaError(f"expected {key!r} to hold strings or integers, got {feature!r}",
                          location=f"column {key!r}", hint="Group by a scalar column, e.g. scenario_id")
    # through any indices, a chunk at a time: a chunk holds the record batches it was cut from (a few MB each)
    parts = [chunk.column(0) for chunk in chunks(ds, rows=CHUNK_ROWS, columns=(key,))]
    keys = pa.chunked_array(parts, ds.data.table.schema.field(key).type).combine_chunks()
    if keys.null_count:
        first = pc.indices_nonzero(keys.is_null())[0].as_py()
        raise ExportFormatError(f"{keys.null_count} rows have no {key!r}, so their situation is unknown",
                                location=f"row {first}, column {key!r}",
                                hint="Fill the key or filter those rows out before splitting")
    return keys


def _held_out_count(test_size: float | int, n_groups: int, key: str) -> int:
    if n_groups < 2:
        raise ValueError(f"split_by needs at least 2 distinct {key!r} values to make two splits, got {n_groups}")
    if isinstance(test_size, bool) or not isinstance(test_size, (int, float)):
        raise ValueError(f"test_size must be a float in (0, 1) or an int, got {test_size!r}")
    if isinstance(test_size, int):
        n_held = test_size
    else:  # rounded up, like scikit-learn; the epsilon keeps 0.3 * 10 (3.0000000000000004) at 3
        n_held = math.ceil(test_size * n_groups - 1e-9) if 0 < test_size < 1 else 0
    if not 1 <= n_held < n_groups:
        raise ValueError(f"test_size={test_size!r} holds out {n_held} of {n_groups} {key!r} groups; expected "
                         f"between 1 and {n_groups - 1}. Pass a float in (0, 1) or an int in that range")
    return n_held


def count_disjoint_groups(splits: Mapping[str, Dataset], key: str) -> dict[str, int]:
    """Distinct `key` values per split; raises if any value is shared by two splits."""
    uniques = {name: pc.unique(_key_column(ds, key)) for name, ds in splits.items()}
    names = list(uniques)
    for i, left in enumerate(names):
        for right in names[i + 1:]:
            shared = uniques[left].filter(pc.is_in(uniques[left], value_set=uniques[right]))
            if len(shared):
                raise PublishError(f"{len(shared)} {key!r} values appear in both {left!r} and {right!r}, "
                                   f"e.g. {shared[0].as_py()!r}; the card would claim no situation straddles "
                                   "the splits", location=f"split_key={key!r}",
                                   hint=f"Split with split_by(ds, {key!r}) or drop split_key")
    return {name: len(values) for name, values in uniques.items()}
