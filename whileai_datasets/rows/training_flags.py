"""Training flags a row carries itself, read into the canonical ``loss_mask``.

Trainers' formats let a row say which turns train:

* ``"weight": 0`` or ``1`` on a message (OpenAI's fine-tuning files and Together's put it on
  assistant messages, axolotl reads it the same way);
* ``"loss": false`` / ``true`` on a message (ms-swift and xtuner; ``0`` / ``1`` are read the same,
  ``null`` is no flag, as in ms-swift);
* a row's own ``loss_mask``: one 0/1 per message (whileai's exports, this package's, and
  hand-edited masks), counted over the row's message list as written.

A flag only ever turns a turn *off*: the canonical ``loss_mask`` is the mask mode's (every
assistant turn, or the last) and the flags, so ``weight: 0`` on an assistant turn masks it and
``weight: 1`` agrees with the default. A flag that asks to train a message that is not an
assistant turn (``weight: 1`` on a user message) cannot be honoured, since a chat template's
trained spans are the assistant's own output: it is refused by name, as are values that are not
0/1 and flags of one message that disagree. ``0`` / ``false`` on other messages agrees with the
default (Together's files weight every message) and is read silently.
"""

from __future__ import annotations

import json
from typing import Any

from whileai_datasets.rows.normalize import RowContext, type_name

#: per-message keys that carry a training flag, in the order they are named
MESSAGE_FLAGS = ("weight", "loss")
ROW_MASK = "loss_mask"
_HINT = "Set each flag to 0 or 1 (true or false), or drop it to train every assistant turn as the mask mode says."


def flag_value(value: Any, ctx: RowContext, where: str) -> int | None:
    """One flag's value (at ``where`` in the row) as 0 or 1 (None for ``null``: no flag)."""
    if value is None:
        return None
    if value is True or value is False:
        return int(value)
    if type(value) in (int, float) and value in (0, 1):
        return int(value)
    shown = repr(value) if type(value) in (int, float, str) else type_name(value)
    raise ctx.error(where, f"expected a training flag, 0 or 1 (true or false), got {shown}",
                    _HINT + (" This package has no fractional loss weights." if type(value) is float else ""))


def message_flag(message: dict[str, Any], role: str, ctx: RowContext, path: str, row_flag: int | None) -> int | None:
    """The message's training flag (None when it has none), checked against ``row_flag`` (its entry of
    the row's ``loss_mask``, or None) and its role."""
    flag, named = row_flag, f"the row's loss_mask entry ({row_flag})" if row_flag is not None else ""
    for key in MESSAGE_FLAGS:
        value = flag_value(message.get(key), ctx, f"{path}.{key}")
        if value is None:
            continue
        if flag is not None and value != flag:
            raise ctx.error(
                f"{path}.{key}", f"conflicting training flags: {key} is {json.dumps(message[key])} but {named} says "
                f"{'train' if flag else 'do not train'}",
                "Keep one flag per message, or make them agree.")
        flag, named = value, f"{key} {json.dumps(message[key])}"
    if flag == 1 and role != "assistant":
        where = f"{path}.{named.split()[0]}" if row_flag is None else f"{ROW_MASK}[{path.rsplit('[', 1)[-1]}"
        raise ctx.error(
            where, f"expected 0 on a {role!r} message, got {named} asking to train it: only assistant turns carry "
            "loss here (a chat template's trained spans are the assistant's own output)",
            "Set it to 0 or drop it; to train this text, make it an assistant turn.")
    return flag


def row_flags(row: dict[str, Any], n_messages: int, ctx: RowContext, column: str) -> list[int | None] | None:
    """A row's own ``loss_mask`` as one 0/1 per message of ``column`` (None when it has none)."""
    mask = row.get(ROW_MASK)
    if mask is None:
        return None
    if type(mask) is not list:
        raise ctx.error(ROW_MASK, f"expected a list of 0/1, one per message, got {type_name(mask)}", _HINT)
    if len(mask) != n_messages:
        raise ctx.error(
            ROW_MASK, f"expected one entry per message of {column} ({n_messages}), got {len(mask)}",
            "A row's own loss_mask counts the messages as written in the row; fix it or drop it.")
    return [flag_value(value, ctx, f"{ROW_MASK}[{i}]") for i, value in enumerate(mask)]
