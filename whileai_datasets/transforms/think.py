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

import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets._typing import Batch
from whileai_datasets.transforms import _arrow

#: Every code point Python's ``str.strip()`` and ``re``'s ``\s`` treat as whitespace.
PY_WHITESPACE = "".join(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())

# What each letter of "think" matches under Python's re.IGNORECASE.
_LETTERS = {"t": "[tT]", "h": "[hH]", "i": r"[iI\x{130}\x{131}]", "n": "[nN]", "k": r"[kK\x{212A}]"}
_THINK = "".join(_LETTERS[c] for c in "think")
_WS_CLASS = "[" + "".join(f"\\x{{{ord(c):X}}}" for c in PY_WHITESPACE) + "]"
#: whileai's ``<think>.*?</think>\s*`` (re.S | re.I) in RE2 syntax.
THINK_BLOCK_RE2 = f"<{_THINK}>(?s:.*?)</{_THINK}>{_WS_CLASS}*"
_HAS_OPEN_TAG = f"<{_THINK}>"


def strip_think_text(content: pa.Array) -> pa.Array:
    """whileai's ``_strip_think`` on every value (null becomes "")."""
    if isinstance(content, pa.ChunkedArray):
        content = content.combine_chunks()
    content = pc.fill_null(content, "")
    has_tag = _arrow.to_numpy_bool(pc.match_substring_regex(content, _HAS_OPEN_TAG))
    if has_tag.any():
        mask = pa.array(has_tag)
        replaced = pc.replace_substring_regex(pc.filter(content, mask), THINK_BLOCK_RE2, "")
        content = pc.replace_with_mask(content, mask, replaced)
    return pc.utf8_trim(content, characters=PY_WHITESPACE)


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
    """A message-list array with think blocks stripped from assistant content."""
    messages = _arrow.flat(lists)
    role = pc.struct_field(messages, "role")
    is_assistant = pc.fill_null(pc.equal(role, "assistant"), False)
    if not pc.any(is_assistant).as_py():
        return lists
    content = pc.struct_field(messages, "content")
    stripped = strip_think_text(pc.filter(content, is_assistant))
    content = pc.replace_with_mask(content, is_assistant, stripped)
    return _arrow.relist(lists, _arrow.replace_fields(messages, content=content))


@dataclass(frozen=True)
class StripThink:
    """Remove ``<think>...</think>`` blocks (any case, across lines) and the
    whitespace after them from assistant turns, then trim, as whileai's export does.

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
