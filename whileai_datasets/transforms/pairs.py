"""Where two sides of a preference pair diverge, on Arrow columns.

whileai's one-turn preference shapes (TRL and Fireworks) take the prefix both
sides share as the prompt and the first assistant turn where they differ as
each side's completion. Equality is message-dict equality; here each message
is compared by the JSON text of its object, which is equal exactly when the
dicts are, except for TRL arguments (values: ``{"a": 1, "b": 2}`` equals
``{"b": 2, "a": 1}``). Rows where only argument texts differ at the first
difference are settled by comparing the decoded messages in Python (rare).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets.columnar import _arrow, _json
from whileai_datasets.columnar._types import trl_message_from_storage


@dataclass
class Split:
    """Per pair: kept rows, the index of the differing turn, and the counts."""

    keep: np.ndarray
    at: np.ndarray
    dropped: int
    cut: int

    def prefix(self, lists: pa.Array) -> pa.ListArray:
        """Each kept row's messages before the differing turn."""
        starts = _arrow.offsets_of(_arrow.lengths(lists))[:-1][self.keep]
        return _arrow.list_slices(_arrow.flat(lists), starts, self.at)

    def turn(self, lists: pa.Array, side: str) -> pa.ListArray:
        """Each kept row's differing turn, as a one-message list."""
        starts = _arrow.offsets_of(_arrow.lengths(lists))[:-1][self.keep]
        return _arrow.list_slices(_arrow.flat(lists), starts + self.at, np.ones(len(self.keep), dtype=np.int64))


def _signatures(messages: pa.Array, *, without_arguments: bool = False) -> pa.Array:
    if without_arguments:
        messages = _blank_arguments(messages)
    return _json.message_objects(messages)


def _blank_arguments(messages: pa.Array) -> pa.Array:
    calls = pc.struct_field(messages, "tool_calls")
    flat_calls = _arrow.flat(calls)
    function = pc.struct_field(flat_calls, "function")
    blank = _arrow.replace_fields(function, arguments=None)
    new_calls = _arrow.relist(calls, _arrow.replace_fields(flat_calls, function=blank))
    return _arrow.replace_fields(messages, tool_calls=new_calls)


def first_difference(chosen: pa.Array, rejected: pa.Array, *, decoded_arguments: bool) -> Split:
    """Where each pair's sides first differ, and which pairs have a one-turn contrast."""
    n = len(chosen)
    len_c, len_r = _arrow.lengths(chosen), _arrow.lengths(rejected)
    start_c, start_r = _arrow.offsets_of(len_c)[:-1], _arrow.offsets_of(len_r)[:-1]
    common = np.minimum(len_c, len_r)
    offsets = _arrow.offsets_of(common)
    total = int(offsets[-1])
    position = np.arange(total, dtype=np.int64) - np.repeat(offsets[:-1], common)
    row = np.repeat(np.arange(n, dtype=np.int64), common)
    flat_c, flat_r = _arrow.flat(chosen), _arrow.flat(rejected)
    index_c = pa.array(start_c[row] + position)
    index_r = pa.array(start_r[row] + position)
    sig_c, sig_r = _signatures(flat_c), _signatures(flat_r)
    differs = _arrow.to_numpy_bool(pc.not_equal(sig_c.take(index_c), sig_r.take(index_r)))
    first = _arrow.first_true_per_row(differs, row, n)
    at = np.where(first >= 0, first - offsets[:-1], common)
    if decoded_arguments and differs.any():
        loose_c = _signatures(flat_c, without_arguments=True).take(index_c)
        loose_r = _signatures(flat_r, without_arguments=True).take(index_r)
        only_arguments = differs & ~_arrow.to_numpy_bool(pc.not_equal(loose_c, loose_r))
        for r in np.unique(row[(first[row] >= 0) & only_arguments & (np.arange(total) == first[row])]).tolist():
            at[r] = _python_first_difference(chosen[r].as_py(), rejected[r].as_py())
    roles_c = pc.struct_field(flat_c, "role")
    roles_r = pc.struct_field(flat_r, "role")
    ok = (at >= 1) & (at < len_c) & (at < len_r)
    candidates = np.flatnonzero(ok)
    if len(candidates):
        role_c = roles_c.take(pa.array(start_c[candidates] + at[candidates])).to_numpy(zero_copy_only=False)
        role_r = roles_r.take(pa.array(start_r[candidates] + at[candidates])).to_numpy(zero_copy_only=False)
        ok[candidates] = (role_c == "assistant") & (role_r == "assistant")
    keep = np.flatnonzero(ok)
    lost = (len_c[keep] > at[keep] + 1) | (len_r[keep] > at[keep] + 1)
    return Split(keep=keep, at=at[keep], dropped=int(n - len(keep)), cut=int(lost.sum()))


def _python_first_difference(chosen: list[dict[str, Any]] | None, rejected: list[dict[str, Any]] | None) -> int:
    left = [trl_message_from_storage(m) for m in chosen or []]
    right = [trl_message_from_storage(m) for m in rejected or []]
    k = 0
    while k < len(left) and k < len(right) and left[k] == right[k]:
        k += 1
    return k
