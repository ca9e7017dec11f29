"""``strip_think``: remove ``<think>`` blocks from assistant turns, as whileai does.

whileai runs ``re.sub(r"<think>.*?</think>\\s*", "", text, flags=re.S | re.I)``
and then ``str.strip()`` on every assistant message. Arrow's regex engine is
RE2, which differs from Python's ``re`` in three places that matter here, so
the pattern spells them out instead of relying on flags:

* Python's case-insensitive ``i`` also matches U+0130 and U+0131 (dotted and
  dotless I); RE2's ``(?i)`` does not. ``k`` matches the Kelvin sign in both.
* Python's ``\\s`` (and ``str.strip()``) is Unicode whitespace (29 code
  points, including U+001C..U+001F, U+0085, U+00A0, U+3000); RE2's ``\\s`` is
  ASCII and leaves out even ``\\v``. The set is computed from ``str.isspace``.
* ``.`` under ``re.S`` is any code point; RE2's ``(?s:.)`` is the same.

The test suite checks the pattern against Python's on every code point that
could sit in a tag and on generated text.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets._typing import Batch
from whileai_datasets.columnar import _arrow, _parts

#: Every code point Python's ``str.strip()`` and ``re``'s ``\s`` treat as whitespace.
PY_WHITESPACE = "".join(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())

# What each letter of "think" matches under Python's re.IGNORECASE.
_LETTERS = {"t": "[tT]", "h": "[hH]", "i": r"[iI\x{130}\x{131}]", "n": "[nN]", "k": r"[kK\x{212A}]"}
_THINK = "".join(_LETTERS[c] for c in "think")
_WS_CLASS = "[" + "".join(f"\\x{{{ord(c):X}}}" for c in PY_WHITESPACE) + "]"
#: whileai's ``<think>.*?</think>\s*`` (re.S | re.I) in RE2 syntax.
THINK_BLOCK_RE2 = f"<{_THINK}>(?s:.*?)</{_THINK}>{_WS_CLASS}*"
HAS_OPEN_TAG = f"<{_THINK}>"


def strip_think_text(content: pa.Array) -> pa.Array:
    """whileai's ``_strip_think`` on every value (null becomes "")."""
    return pc.utf8_trim(remove_think_blocks(content), characters=PY_WHITESPACE)


def remove_think_blocks(content: pa.Array) -> pa.Array:
    """Every ``<think>...</think>`` block and the whitespace after it removed (null becomes "")."""
    if isinstance(content, pa.ChunkedArray):
        content = content.combine_chunks()
    content = pc.fill_null(content, "")
    has_tag = _arrow.to_numpy_bool(pc.match_substring_regex(content, HAS_OPEN_TAG))
    if has_tag.any():
        mask = pa.array(has_tag)
        replaced = pc.replace_substring_regex(pc.filter(content, mask), THINK_BLOCK_RE2, "")
        content = pc.replace_with_mask(content, mask, replaced)
    return content


def strip_parts(messages: pa.Array, is_assistant: np.ndarray) -> pa.Array | None:
    """The parts lists with think blocks removed from assistant text parts, and
    the message's text trimmed at its ends (the start of its first text part,
    the end of its last), as whileai trims the whole content. None: no change."""
    parts = _parts.flat_parts(messages)
    if parts is None:
        return None
    owner = parts.owner
    text_part = parts.with_text() & is_assistant[owner]
    if not text_part.any():
        return None
    picked = pa.array(text_part)
    text = remove_think_blocks(pc.filter(parts.field("text"), picked))
    n = len(messages)
    first = _arrow.first_true_per_row(text_part, owner, n)
    last = _arrow.first_true_per_row(text_part, owner, n, last=True)
    rank = np.flatnonzero(text_part)  # flat index of each picked part
    text = pc.if_else(pa.array(np.isin(rank, first)), pc.utf8_ltrim(text, characters=PY_WHITESPACE), text)
    text = pc.if_else(pa.array(np.isin(rank, last)), pc.utf8_rtrim(text, characters=PY_WHITESPACE), text)
    return parts.rebuilt(text=pc.replace_with_mask(parts.field("text"), picked, text))


def message_list_columns(table: pa.Table) -> list[str]:
    """The columns of ``table`` that hold lists of message structs."""
    out = []
    for fld in table.schema:
        arrow_type = fld.type
        if pa.types.is_list(arrow_type) and pa.types.is_struct(arrow_type.value_type):
            if {"role", "content"} <= set(arrow_type.value_type.names):
                out.append(fld.name)
    return out


def strip_messages(lists: pa.Array) -> pa.Array:
    """A message-list array with think blocks stripped from assistant content
    (text, or the text parts) and every ``reasoning_content`` dropped."""
    messages = _arrow.flat(lists)
    fields: dict[str, pa.Array | None] = {}
    if "reasoning_content" in messages.type.names:
        if pc.struct_field(messages, "reasoning_content").null_count < len(messages):
            fields["reasoning_content"] = None
    role = pc.struct_field(messages, "role")
    assistant = _arrow.to_numpy_bool(pc.equal(role, "assistant"))
    text_content = assistant & ~_parts.has_parts(messages)
    if text_content.any():
        mask = pa.array(text_content)
        content = pc.struct_field(messages, "content")
        fields["content"] = pc.replace_with_mask(content, mask, strip_think_text(pc.filter(content, mask)))
    parts = strip_parts(messages, assistant) if assistant.any() else None
    if parts is not None:
        fields["parts"] = parts
    if not fields:
        return lists
    return _arrow.relist(lists, _arrow.replace_fields(messages, **fields))


@dataclass(frozen=True)
class StripThink:
    """Remove ``<think>...</think>`` blocks (any case, across lines) and the
    whitespace after them from assistant turns, then trim, as whileai's export does.

    Content parts: the blocks go from each assistant text part, and the
    message's text is trimmed at its two ends. ``reasoning_content`` is dropped
    from every message (whileai's intent: no thinking taught to a student that
    should not think); skip this transform to keep it.

    Args:
        column: The message-list column; ``None`` (the default) strips every
            message-list column in the batch (``messages``, or ``chosen`` and
            ``rejected`` of preference rows).
    Returns:
        The batch with those columns rebuilt; other columns pass through.
    Raises:
        SchemaError: ``column`` is missing or is not a list of message structs.
    Example:
        >>> from whileai_datasets import transforms as wai_transforms
        >>> ds = ds.with_format("arrow").map(wai_transforms.strip_think, batched=True)  # doctest: +SKIP
    """

    column: str | None = None

    def __call__(self, batch: Batch, indices: list[int] | None = None) -> Batch:
        return _arrow.like(batch, strip_table(_arrow.as_table(batch), self.column))


def strip_table(table: pa.Table, column: str | None = None) -> pa.Table:
    """``StripThink(column)`` on a table."""
    names = message_list_columns(table) if column is None else [column]
    for name in names:
        table = _arrow.set_column(table, name, strip_messages(_arrow.message_column(table, name)))
    return table


#: The ``StripThink()`` instance: ``ds.map(strip_think, batched=True)``.
strip_think = StripThink()
