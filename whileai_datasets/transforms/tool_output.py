"""``truncate_tool_output(max_chars)``: whileai's cut of long tool messages.

A tool message longer than ``max_chars`` code points keeps its first
``max(0, max_chars)`` and gains ``"\\n[... N chars of tool output truncated]"``
(N the code points cut). The row counts what it cut as
``tool_output_truncated`` (messages) and ``tool_output_chars_cut`` (code
points), null when nothing was cut, which is when whileai leaves both keys out.
``utf8_length`` and ``utf8_slice_codeunits`` count code points, as Python's
``len`` and slicing do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets._options import check_count
from whileai_datasets._typing import Batch
from whileai_datasets.columnar import _arrow, _parts
from whileai_datasets.errors import SchemaError

TRUNCATED = "tool_output_truncated"
CHARS_CUT = "tool_output_chars_cut"


@dataclass(frozen=True)
class TruncateToolOutput:
    """Cut each tool message's content to ``max_chars`` code points, with whileai's marker.

    Args:
        max_chars: Code points kept per tool message (whileai's
            ``max_tool_output_chars``): a whole number, 0 or more. whileai
            also takes ``-1`` (as 0) and ``7.9`` (as 7); here they raise.
        column: Column holding ``List(Message)``.
    Returns:
        The batch with ``column`` rebuilt and the per-row counts
        ``tool_output_truncated`` / ``tool_output_chars_cut`` (added to any
        counts already there); other columns pass through.
    Raises:
        SchemaError: ``column`` is missing or is not a list of message structs.
    Example:
        >>> from whileai_datasets import transforms as wai_transforms
        >>> ds = ds.with_format("arrow").map(wai_transforms.truncate_tool_output(200), batched=True)  # doctest: +SKIP
    """

    max_chars: int
    column: str = "messages"

    def __post_init__(self) -> None:
        check_count(self.max_chars, "max_chars", optional=False,
                    hint="Pass the number of characters to keep, e.g. truncate_tool_output(2000).")

    def __call__(self, batch: Batch, indices: list[int] | None = None) -> Batch:
        return _arrow.like(batch, truncate_table(_arrow.as_table(batch), self.max_chars, self.column))


def truncate_table(table: pa.Table, max_chars: int, column: str = "messages") -> pa.Table:
    """``TruncateToolOutput(max_chars, column)`` on a table."""
    lists = _arrow.message_column(table, column)
    messages = _arrow.flat(lists)
    limit = int(max_chars)
    cap = max(0, limit)
    is_tool = _arrow.to_numpy_bool(pc.equal(pc.struct_field(messages, "role"), "tool"))
    original = pc.struct_field(messages, "content")
    content = pc.fill_null(original, "")
    size = pc.utf8_length(content)
    cut_np = is_tool & ~_parts.has_parts(messages) & _arrow.to_numpy_bool(pc.greater(size, limit))
    removed = np.where(cut_np, size.to_numpy(zero_copy_only=False) - cap, 0).astype(np.int64)
    fields: dict[str, pa.Array] = {}
    if cut_np.any():
        cut = pa.array(cut_np)
        fields["content"] = pc.replace_with_mask(
            original, cut, _cut_text(pc.filter(content, cut), cap, pa.array(removed[cut_np]))
        )
    parts = truncate_parts(messages, is_tool, limit)
    if parts is not None:
        fields["parts"], parts_cut, parts_removed = parts
        cut_np, removed = cut_np | parts_cut, removed + parts_removed
    n_rows = table.num_rows
    per_row = np.zeros(n_rows, dtype=np.int64)
    chars_per_row = np.zeros(n_rows, dtype=np.int64)
    if cut_np.any():
        lists = _arrow.relist(lists, _arrow.replace_fields(messages, **fields))
        table = _arrow.set_column(table, column, lists)
        parent = _arrow.parents(lists)[cut_np]
        per_row = np.bincount(parent, minlength=n_rows).astype(np.int64)
        chars_per_row = np.bincount(parent, weights=removed[cut_np], minlength=n_rows).astype(np.int64)
    table, truncated = _add_count(table, TRUNCATED, per_row, None)
    # whileai writes both keys whenever it truncated a message, even with 0 chars cut
    table, _ = _add_count(table, CHARS_CUT, chars_per_row, truncated > 0)
    return table


def _cut_text(text: pa.Array, keep: int | pa.Array, removed: pa.Array) -> pa.Array:
    """The first ``keep`` code points of each text and whileai's marker."""
    head = pc.utf8_slice_codeunits(text, 0, keep) if isinstance(keep, int) else _heads(text, keep)
    return pc.binary_join_element_wise(
        head, "\n[... ", pc.cast(removed, pa.string()), " chars of tool output truncated]", ""
    )


def _heads(text: pa.Array, keep: pa.Array) -> pa.Array:
    """``text[:keep]`` per value (code points), for a different ``keep`` per value."""
    values = [t[:k] for t, k in zip(text.to_pylist(), keep.to_pylist())]
    return pa.array(values, pa.string())


def truncate_parts(messages: pa.Array, is_tool: np.ndarray, limit: int) -> tuple[pa.Array, np.ndarray, np.ndarray] | None:
    """Tool turns with content parts: their text parts together keep at most
    ``max(0, limit)`` code points; the part where the cut falls gets the
    marker (the message's chars cut), text parts wholly past it are dropped,
    media parts stay. ``(parts lists, message cut, chars cut per message)``,
    or None when no tool turn with parts is over the limit."""
    parts = _parts.flat_parts(messages)
    if parts is None:
        return None
    owner = parts.owner
    text_part = parts.with_text() & is_tool[owner]
    length = np.where(text_part, pc.fill_null(pc.utf8_length(parts.field("text")), 0).to_numpy(zero_copy_only=False), 0)
    total = np.bincount(owner, weights=length, minlength=len(messages)).astype(np.int64)
    cut_message = is_tool & (total > limit)
    if not cut_message.any():
        return None
    cap = max(0, limit)
    before = np.cumsum(length) - length  # text before each part, counted from the batch start
    starts = _arrow.offsets_of(_arrow.lengths(parts.lists))[:-1]
    before_in_message = before - np.concatenate([[0], np.cumsum(length)])[starts][owner]
    keep = np.clip(cap - before_in_message, 0, length)
    over = text_part & cut_message[owner] & (keep < length)
    marked = np.zeros(len(over), dtype=bool)
    first = _arrow.first_true_per_row(over, owner, len(messages))
    marked[first[first >= 0]] = True
    removed = np.where(cut_message, total - cap, 0).astype(np.int64)
    text = parts.field("text")
    if marked.any():
        picked = pa.array(marked)
        cut_text = _cut_text(pc.filter(text, picked), pa.array(keep[marked]), pa.array(removed[owner[marked]]))
        text = pc.replace_with_mask(text, picked, cut_text)
    stays = ~over | marked
    rebuilt = _arrow.replace_fields(parts.flat, text=text).filter(pa.array(stays))
    counts = np.bincount(owner[stays], minlength=len(messages))
    lists = _arrow.build_list(_arrow.offsets_of(counts), rebuilt, mask=parts.lists.is_null())
    return lists, cut_message, removed

def _add_count(
    table: pa.Table, name: str, values: np.ndarray, present: np.ndarray | None
) -> tuple[pa.Table, np.ndarray]:
    """Add ``values`` to the column's existing counts; null where not ``present``
    (default: where the total is 0)."""
    old = _arrow.optional(table, name, pa.int64())
    total = values + np.asarray(pc.fill_null(old, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    keep = total > 0 if present is None else present
    return _arrow.set_column(table, name, pa.array(total, pa.int64(), mask=~keep)), total


def truncate_tool_output(max_chars: int) -> TruncateToolOutput:
    """``TruncateToolOutput(max_chars)``: ``ds.map(truncate_tool_output(200), batched=True)``."""
    return TruncateToolOutput(max_chars)
