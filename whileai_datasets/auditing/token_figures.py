"""What the audit counts in tokens: read column-wise from ``tokenize``'s own output columns.

The audit tokenizes each chunk once with ``tokenize(..., keep_unsupervised=True)`` (so the rows that
train nothing stay, with ``num_supervised_tokens`` 0, to be counted) and reads ``num_tokens``,
``num_supervised_tokens``, ``tokens_truncated``, ``supervised_tokens_truncated`` and ``mask_method``
with ``pyarrow.compute`` / numpy: the figures are exactly what ``tokenize`` gives a trainer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets.columnar import _arrow

#: The column the audit numbers the training rows with, so rows dropped by ``on_bad_row="skip"`` are known.
ROW_COLUMN = "__audit_row"
_FIGURES = ("num_tokens", "num_supervised_tokens", "tokens_truncated", "supervised_tokens_truncated")


def token_columns(tokenized: pa.Table) -> dict[str, np.ndarray]:
    """The per-row figures of a tokenized chunk as int64 arrays (``row``: the training row's number)."""
    out = {"row": _ints(tokenized, ROW_COLUMN)}
    for name in _FIGURES:
        out[name] = _ints(tokenized, name) if tokenized.num_rows else np.zeros(0, np.int64)
    return out


def _ints(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(pc.fill_null(_arrow.column(table, name), 0).to_numpy(zero_copy_only=False), dtype=np.int64)


def mask_methods(tokenized: pa.Table) -> dict[str, int]:
    if "mask_method" not in tokenized.column_names or not tokenized.num_rows:
        return {}
    return {item["values"]: int(item["counts"]) for item in pc.value_counts(tokenized["mask_method"]).to_pylist()}


def bad_rows(tokenized: pa.Table) -> int:
    if "bad_rows_dropped" not in tokenized.column_names or not tokenized.num_rows:
        return 0
    return int(pc.sum(tokenized["bad_rows_dropped"]).as_py() or 0)


def supervised_share(figures: dict[str, np.ndarray]) -> np.ndarray:
    """Per row: supervised tokens over tokens (0 for an empty row)."""
    tokens = figures["num_tokens"]
    return np.divide(figures["num_supervised_tokens"], tokens, out=np.zeros(len(tokens)), where=tokens > 0)


def token_flags(figures: dict[str, np.ndarray], marked: np.ndarray) -> dict[str, Any]:
    """Per tokenized row: the token-level problems. ``marked``: the row's mask marks at least one message.

    ``render_unsupervised``: the mask marks a turn but no token of the render is supervised (the template
    does not render it, or renders it outside every span); ``truncated``: ``max_length`` cut tokens;
    ``supervision_truncated``: it cut supervised tokens; ``truncated_to_nothing``: it cut all of them.
    """
    supervised, lost = figures["num_supervised_tokens"], figures["supervised_tokens_truncated"]
    return {
        "render_unsupervised": marked & (supervised == 0) & (lost == 0),
        "truncated": figures["tokens_truncated"] > 0,
        "supervision_truncated": lost > 0,
        "truncated_to_nothing": (supervised == 0) & (lost > 0),
    }
