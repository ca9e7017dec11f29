"""What the audit finds in the messages themselves, before any token: column-wise over each chunk.

Two views of a chunk: the canonical rows as read (after ``system_prompt=`` was prepended) and the
training rows the export's pipeline makes of them (think blocks stripped, tool output cut, the mask
recomputed, unrolled). A row that trains nothing at this level (no messages, only a system message,
no assistant turn) is named here with its cause; what the template and ``max_length`` do to the rest
is ``token_figures``' part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets._options import TrainingOptions
from whileai_datasets.chat_template.masks.tool_ids import NINE
from whileai_datasets.columnar import _arrow
from whileai_datasets.columnar._parts import IMAGE_TYPES, flat_parts
from whileai_datasets.shaping.loss_facts import row_flags
from whileai_datasets.transforms import think, tool_output

#: Roles whose content characters are counted (per-role shares of the trained rows' text).
ROLES = ("system", "user", "assistant", "tool")


@dataclass
class Messages:
    """Per-message columns of one message-list array, computed once."""

    lists: pa.Array
    flat: pa.Array
    parent: np.ndarray
    lens: np.ndarray
    starts: np.ndarray
    role: pa.Array

    @classmethod
    def of(cls, table: pa.Table) -> Messages:
        lists = _arrow.message_column(table, "messages")
        flat = _arrow.flat(lists)
        lens = _arrow.lengths(lists)
        return cls(lists, flat, _arrow.parents(lists), lens, _arrow.offsets_of(lens)[:-1],
                   pc.struct_field(flat, "role"))

    def is_role(self, role: str) -> np.ndarray:
        return _arrow.to_numpy_bool(pc.equal(self.role, role))

    def per_row(self, flags: np.ndarray) -> np.ndarray:
        """How many flagged messages each row has."""
        return np.bincount(self.parent[flags], minlength=len(self.lens)).astype(np.int64)

    def present(self, name: str) -> np.ndarray:
        """Per message: the optional field ``name`` is set."""
        if name not in self.flat.type.names:
            return np.zeros(len(self.flat), dtype=bool)
        return ~_arrow.null_mask(pc.struct_field(self.flat, name))

    def content_chars(self) -> np.ndarray:
        """Per message: the characters of its text, whether content is a string or a list of parts."""
        chars = np.zeros(len(self.flat), dtype=np.int64)
        content = pc.struct_field(self.flat, "content")
        if pa.types.is_string(content.type) or pa.types.is_large_string(content.type):
            chars += _char_counts(content)
        parts = flat_parts(self.flat)
        if parts is not None:
            chars += np.bincount(parts.owner, weights=_char_counts(parts.field("text")),
                                 minlength=len(self.flat)).astype(np.int64)
        return chars


def _char_counts(text: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(pc.utf8_length(text), 0).to_numpy(zero_copy_only=False), dtype=np.int64)


def source_flags(table: pa.Table, options: TrainingOptions) -> dict[str, Any]:
    """Per row of canonical rows as read: the flags and amounts the audit counts.

    ``shaping.loss_facts.row_flags`` (``no_messages``, ``only_system``, ``no_assistant``,
    ``duplicate_system``, ``missing_system``, ``has_system``, ``assistant_turns``) plus ``think``
    (assistant messages holding a ``<think>`` block), ``emptied_by_think`` (assistant turns that were only
    a think block: stripping leaves them empty), ``final_not_last``, ``has_tools``, ``reasoning`` and
    ``parts`` (messages carrying those fields), ``text_parts`` (a message whose parts are all text: what
    ``chat_template.masks.text_parts`` joins for a template that concatenates strings), ``image_parts`` (a
    message with an image part), ``ids_not_nine`` (a
    tool-call id or ``tool_call_id`` of another length than 9: what ``chat_template.masks.tool_ids`` rewrites
    for a template that requires 9) and ``think_before_last``; each a numpy array, one entry
    per row.
    """
    m = Messages.of(table)
    n = table.num_rows
    flags: dict[str, Any] = row_flags(m.lists)
    assistant = m.is_role("assistant")
    think_flags = _think_messages(m, assistant)
    tools = _arrow.column(table, "tools") if "tools" in table.column_names else None
    final = options.mask_mode == "final"
    flags.update({
        "think": m.per_row(think_flags),
        "emptied_by_think": m.per_row(think_flags & _only_think(m)) if options.strip_think else np.zeros(n, np.int64),
        "final_not_last": (flags["assistant_turns"] > 0) & ~flags["last_assistant"] if final else np.zeros(n, bool),
        "has_tools": np.zeros(n, dtype=bool) if tools is None else ~_arrow.null_mask(tools),
        "reasoning": m.per_row(m.present("reasoning_content")) > 0,
        "parts": m.per_row(m.present("parts")) > 0,
        "text_parts": m.per_row(_text_only_parts(m)) > 0,
        "image_parts": m.per_row(_image_parts(m)) > 0,
        "ids_not_nine": m.per_row(_ids_not_nine(m)) > 0,
        "think_before_last": _think_before_last(m, think_flags, assistant),
    })
    return flags


def _image_parts(m: Messages) -> np.ndarray:
    """Per message: its content holds an image part."""
    parts = flat_parts(m.flat)
    if parts is None:
        return np.zeros(len(m.flat), dtype=bool)
    images = parts.kind_in(IMAGE_TYPES)
    return np.bincount(parts.owner[images], minlength=len(m.flat)) > 0


def _text_only_parts(m: Messages) -> np.ndarray:
    """Per message: its content is a non-empty list of parts, each of type "text" with a text."""
    if "parts" not in m.flat.type.names:
        return np.zeros(len(m.flat), dtype=bool)
    parts = pc.struct_field(m.flat, "parts")
    items = _arrow.flat(parts)
    text = pc.and_(pc.fill_null(pc.equal(pc.struct_field(items, "type"), "text"), False),
                   pc.is_valid(pc.struct_field(items, "text")))
    other = np.bincount(_arrow.parents(parts)[~_arrow.to_numpy_bool(text)], minlength=len(m.flat))
    return (_arrow.lengths(parts) > 0) & (other == 0) & ~_arrow.null_mask(parts)


def _ids_not_nine(m: Messages) -> np.ndarray:
    """Per message: a tool call's id, or its ``tool_call_id``, is set and not 9 characters long."""
    out = np.zeros(len(m.flat), dtype=bool)
    names = m.flat.type.names
    if "tool_call_id" in names:
        out |= _arrow.to_numpy_bool(pc.fill_null(pc.not_equal(pc.utf8_length(pc.struct_field(m.flat, "tool_call_id")),
                                                              NINE), False))
    if "tool_calls" in names:
        calls = pc.struct_field(m.flat, "tool_calls")
        ids = pc.struct_field(_arrow.flat(calls), "id")
        other = _arrow.to_numpy_bool(pc.fill_null(pc.not_equal(pc.utf8_length(ids), NINE), False))
        out |= np.bincount(_arrow.parents(calls)[other], minlength=len(m.flat)) > 0
    return out


def _think_messages(m: Messages, assistant: np.ndarray) -> np.ndarray:
    content = pc.struct_field(m.flat, "content")
    if not (pa.types.is_string(content.type) or pa.types.is_large_string(content.type)):
        return np.zeros(len(m.flat), dtype=bool)
    found = _arrow.to_numpy_bool(pc.fill_null(pc.match_substring_regex(content, think.HAS_OPEN_TAG), False))
    return found & assistant


def _only_think(m: Messages) -> np.ndarray:
    """Per message: its content is nothing but think blocks (and it has no tool call)."""
    content = pc.struct_field(m.flat, "content")
    if not (pa.types.is_string(content.type) or pa.types.is_large_string(content.type)):
        return np.zeros(len(m.flat), dtype=bool)
    stripped = pc.utf8_trim_whitespace(pc.fill_null(think.remove_think_blocks(content), ""))
    empty = _arrow.to_numpy_bool(pc.equal(pc.utf8_length(stripped), 0))
    calls = np.asarray(pc.fill_null(pc.list_value_length(pc.struct_field(m.flat, "tool_calls")), 0))
    return empty & (calls == 0)


def _think_before_last(m: Messages, flags: np.ndarray, assistant: np.ndarray) -> np.ndarray:
    """Per row: a think block in an assistant turn before its last one (what "drops reasoning in history"
    templates leave out)."""
    last = _arrow.first_true_per_row(assistant, m.parent, len(m.lens), last=True)
    earlier = flags.copy()
    earlier[last[last >= 0]] = False
    return m.per_row(earlier) > 0


def training_figures(rows: pa.Table) -> dict[str, Any]:
    """Per row of the pipeline's training rows: tool outputs cut, characters cut, content characters per role."""
    m = Messages.of(rows)
    chars = m.content_chars()
    roles = {role: int(chars[m.is_role(role)].sum()) for role in ROLES}
    zero = np.zeros(rows.num_rows, dtype=np.int64)

    def counts(name: str) -> np.ndarray:
        if name not in rows.column_names:
            return zero
        return np.asarray(pc.fill_null(_arrow.column(rows, name), 0).to_numpy(zero_copy_only=False), np.int64)

    return {"tool_outputs_cut": counts(tool_output.TRUNCATED), "tool_chars_cut": counts(tool_output.CHARS_CUT),
            "role_chars": roles, "assistant_turns": m.per_row(m.is_role("assistant"))}
