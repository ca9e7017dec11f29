"""``loss_mask(mode)``: which messages carry loss, as whileai's ``loss_mask``.

``"assistant"``: 1 on every assistant message. ``"final"``: 1 on the last
assistant message only. Every other message is 0; one entry per message.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets._options import check_choice
from whileai_datasets._typing import Batch, MaskMode
from whileai_datasets.columnar import _arrow
from whileai_datasets.errors import SchemaError


def mask_values(lists: pa.Array, mode: str) -> pa.Array:
    """The flat int8 mask values of a message-list array."""
    messages = _arrow.flat(lists)
    assistant = _arrow.to_numpy_bool(pc.equal(pc.struct_field(messages, "role"), "assistant"))
    if mode == "final":
        last = _arrow.first_true_per_row(assistant, _arrow.parents(lists), len(lists), last=True)
        assistant = np.zeros(len(messages), dtype=bool)
        assistant[last[last >= 0]] = True
    return pa.array(assistant.astype(np.int8), pa.int8())


@dataclass(frozen=True)
class LossMask:
    """Recompute ``loss_mask`` from the message roles.

    The rows' own training flags (``weight`` / ``loss`` / ``loss_mask`` in the file, which the
    builder read into ``loss_mask``) are replaced: this is the transform for asking to. The export
    keeps them (``mask_table(..., keep_off=True)``).

    Args:
        mode: ``"assistant"`` (every assistant turn) or ``"final"`` (the last one).
        column: Column holding ``List(Message)``.
    Returns:
        The batch with ``loss_mask`` (``List(int8)``, one entry per message).
    Raises:
        OptionError: ``mode`` is not one of the two.
        SchemaError: ``column`` is not a message list.
    Example:
        >>> from whileai_datasets import transforms as wai_transforms
        >>> ds = ds.with_format("arrow").map(wai_transforms.loss_mask("final"), batched=True)  # doctest: +SKIP
    """

    mode: MaskMode = "assistant"
    column: str = "messages"

    def __post_init__(self) -> None:
        check_choice(self.mode, "mode", MaskMode)

    def __call__(self, batch: Batch, indices: list[int] | None = None) -> Batch:
        return _arrow.like(batch, mask_table(_arrow.as_table(batch), self.mode, self.column))


def mask_table(table: pa.Table, mode: str, column: str = "messages", *, keep_off: bool = False) -> pa.Table:
    """``LossMask(mode, column)`` on a table. With ``keep_off``, a message the table's ``loss_mask``
    already masks stays masked (the rows' own training flags, read by the builder)."""
    lists = _arrow.message_column(table, column)
    values = mask_values(lists, mode)
    if keep_off and "loss_mask" in table.column_names:
        before = _arrow.flat(_arrow.column(table, "loss_mask"))
        if len(before) == len(values):  # (else not one entry per message: not flags to keep)
            values = pc.if_else(pc.fill_null(pc.equal(before, 0), False), pa.scalar(0, pa.int8()), values)
    return _arrow.set_column(table, "loss_mask", _arrow.relist(lists, values))


def loss_mask(mode: MaskMode = "assistant") -> LossMask:
    """``LossMask(mode)``: ``ds.map(loss_mask("final"), batched=True)``."""
    return LossMask(mode)
