"""The columns ``tokenize`` adds, built from numpy rather than Python lists.

An Arrow batch gets ``pa.ListArray``s made from numpy offsets and values; a
dict batch gets lists of numpy arrays, which ``datasets`` converts on its fast
path. Either way no per-value Python conversion runs (it was about 40% of
tokenize's time when the columns were lists).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

RowMask = Any  # token_masks.RowMask (typed loosely: token_masks imports this module)


def _list_array(lengths: np.ndarray, values: list[np.ndarray], dtype: Any, arrow_type: pa.DataType) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.concatenate(values).astype(dtype, copy=False) if values else np.zeros(0, dtype=dtype)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, arrow_type))


#: The column that records the ``max_length`` the rows were tokenized with (null: none), for the trainer's side
#: (``check_max_length``): ``datasets.map`` keeps no dataset-level record of a transform's options.
LIMIT_COLUMN = "tokenized_max_length"
#: The rows of a batch dropped for having no supervised token, on the batch's first kept row (as
#: ``bad_rows_dropped`` counts the bad ones): with both, ``mask_report`` tells the rows of a batch that kept none.
UNSUPERVISED_COLUMN = "unsupervised_rows_dropped"


def _on_first_row(rows: int, count: int) -> np.ndarray:
    """A batch's count of dropped rows, carried by its first kept row (0 on the others)."""
    out = np.zeros(rows, dtype=np.int32)
    if rows:
        out[0] = count
    return out


def numpy_columns(kept: list[RowMask], bad: int, max_length: int | None = None,
                  unsupervised: int = 0) -> dict[str, Any]:
    """The new columns for a dict batch: numpy arrays (datasets' fast path for ragged lists of arrays).
    ``bad`` and ``unsupervised``: the batch's dropped rows, on its first kept row (``mask_report`` adds them up)."""
    lengths = np.array([len(r.input_ids) for r in kept], dtype=np.int32)
    return {
        "input_ids": [np.asarray(r.input_ids, dtype=np.int32) for r in kept],
        "attention_mask": [np.ones(n, dtype=np.int8) for n in lengths],
        "assistant_masks": [r.mask for r in kept],
        "num_tokens": lengths,
        "num_supervised_tokens": np.array([r.supervised for r in kept], dtype=np.int32),
        "tokens_truncated": np.array([r.truncated_tokens for r in kept], dtype=np.int32),
        "supervised_tokens_truncated": np.array([r.supervised_lost for r in kept], dtype=np.int32),
        "mask_method": [r.method for r in kept],
        "bad_rows_dropped": _on_first_row(len(kept), bad),
        UNSUPERVISED_COLUMN: _on_first_row(len(kept), unsupervised),
        LIMIT_COLUMN: np.full(len(kept), max_length, dtype=np.int32) if max_length is not None else [None] * len(kept),
    }


def arrow_columns(kept: list[RowMask], bad: int, max_length: int | None = None,
                  unsupervised: int = 0) -> dict[str, pa.Array]:
    """The new columns as Arrow arrays built from numpy (datasets then skips its per-value conversion)."""
    lengths = np.array([len(r.input_ids) for r in kept], dtype=np.int32)
    masks = [r.mask for r in kept]
    supervised = np.array([r.supervised for r in kept], dtype=np.int32)
    return {
        "input_ids": _list_array(lengths, [np.asarray(r.input_ids, dtype=np.int32) for r in kept], np.int32,
                                 pa.int32()),
        "attention_mask": _list_array(lengths, [np.ones(int(lengths.sum()), dtype=np.int8)], np.int8, pa.int8()),
        "assistant_masks": _list_array(lengths, masks, np.int8, pa.int8()),
        "num_tokens": pa.array(lengths, pa.int32()),
        "num_supervised_tokens": pa.array(supervised, pa.int32()),
        "tokens_truncated": pa.array(np.array([r.truncated_tokens for r in kept], dtype=np.int32), pa.int32()),
        "supervised_tokens_truncated": pa.array(np.array([r.supervised_lost for r in kept], dtype=np.int32),
                                                pa.int32()),
        "mask_method": pa.array([r.method for r in kept], pa.string()),
        "bad_rows_dropped": pa.array(_on_first_row(len(kept), bad), pa.int32()),
        UNSUPERVISED_COLUMN: pa.array(_on_first_row(len(kept), unsupervised), pa.int32()),
        LIMIT_COLUMN: pa.array([max_length] * len(kept), pa.int32()),
    }


def set_column(table: pa.Table, name: str, array: pa.Array) -> pa.Table:
    if name in table.column_names:
        return table.set_column(table.column_names.index(name), name, array)
    return table.append_column(name, array)
