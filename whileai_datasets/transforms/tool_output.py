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

from whileai_datasets._typing import Batch
from whileai_datasets.errors import SchemaError
from whileai_datasets.transforms import _arrow

TRUNCATED = "tool_output_truncated"
CHARS_CUT = "tool_output_chars_cut"


@dataclass(frozen=True)
class TruncateToolOutput:
    """Cut each tool message's content to ``max_chars`` code points, with whileai's marker.

    Args:
        max_chars: Code points kept per tool message (whileai's
            ``max_tool_output_chars``; ``int()`` of it is used, as whileai does).
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
        if isinstance(self.max_chars, bool) or not isinstance(self.max_chars, (int, float)):
            raise SchemaError(
                f"max_chars must be an integer, got {type(self.max_chars).__name__} {self.max_chars!r}",
                location="truncate_tool_output",
                hint="Pass the number of characters to keep, e.g. truncate_tool_output(2000).",
            )

    def __call__(self, batch: Batch, indices: list[int] | None = None) -> Batch:
        return _arrow.like(batch, truncate_table(_arrow.as_table(batch), self.max_chars, self.column))


def truncate_table(table: pa.Table, max_chars: int, column: str = "messages") -> pa.Table:
    """``TruncateToolOutput(max_chars, column)`` on a table."""
    lists = _arrow.message_column(table, column)
    messages = _arrow.flat(lists)
    limit = int(max_chars)
    cap = max(0, limit)
    original = pc.struct_field(messages, "content")
    content = pc.fill_null(original, "")
    size = pc.utf8_length(content)
    cut = pc.and_(pc.fill_null(pc.equal(pc.struct_field(messages, "role"), "tool"), False), pc.greater(size, limit))
    cut_np = _arrow.to_numpy_bool(cut)
    n_rows = table.num_rows
    per_row = np.zeros(n_rows, dtype=np.int64)
    chars_per_row = np.zeros(n_rows, dtype=np.int64)
    if cut_np.any():
        picked = pc.filter(content, cut)
        removed = pc.subtract(pc.filter(size, cut), cap)
        marker = pc.binary_join_element_wise(
            pc.utf8_slice_codeunits(picked, 0, cap),
            "\n[... ",
            pc.cast(removed, pa.string()),
            " chars of tool output truncated]",
            "",
        )
        new_content = pc.replace_with_mask(original, cut, marker)
        lists = _arrow.relist(lists, _arrow.replace_fields(messages, content=new_content))
        table = _arrow.set_column(table, column, lists)
        parent = _arrow.parents(lists)[cut_np]
        per_row = np.bincount(parent, minlength=n_rows).astype(np.int64)
        chars_per_row = np.bincount(parent, weights=removed.to_numpy(zero_copy_only=False), minlength=n_rows).astype(
            np.int64
        )
    table, truncated = _add_count(table, TRUNCATED, per_row, None)
    # whileai writes both keys whenever it truncated a message, even with 0 chars cut
    table, _ = _add_count(table, CHARS_CUT, chars_per_row, truncated > 0)
    return table


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
