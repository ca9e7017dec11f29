"""Message content as a list of parts, and ``reasoning_content``, in the canonical schema.

Vision agents write content as a list of parts (``{"type": "text", "text": ...}``,
``{"type": "image", "image": URL}``, ``{"type": "image_url", "image_url": {"url": ...}}``,
``{"type": "video", "video": PATH}``), and reasoning models put their thinking in
``reasoning_content`` beside ``content``. whileai writes parts as a Python repr
string; here they are typed, so transforms compute on them column-wise:

* each part is kept as it was, whatever its layout (``rows.parts``: its text,
  its media reference and every other key, typed where transforms need them);
* a message with parts stores them in its ``parts`` field and a null ``content``;
* parts under other names whose meaning is clear are mapped on the way in:
  ``reasoning`` (text under ``value`` or ``text``) and ``thinking`` (text under
  ``thinking``) parts become ``reasoning_content``; ``tool_call`` parts (the call
  under ``value``, as JSON text or an object, or as ``name`` / ``arguments`` /
  ``id`` keys) become ``tool_calls``. A mapped part with other keys is refused
  (mapping it would lose them); every other part is kept.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from whileai_datasets.rows.parts import ErrorFactory, part_text, part_to_storage
from whileai_datasets.rows.parts import type_name as _type_name

#: Part types mapped onto message fields, and the key holding their text.
REASONING_PARTS = {"reasoning": ("value", "text"), "thinking": ("thinking",)}
TOOL_CALL_PART = "tool_call"
#: Separator between several reasoning texts of one message.
REASONING_JOIN = "\n"


# ---------------------------------------------------------------- messages in


@dataclass
class ContentRead:
    """A source message's content, split: the text (or None), the kept parts
    (storage form, or None), its reasoning and the tool calls from parts."""

    content: str | None
    parts: list[dict[str, Any]] | None = None
    reasoning: str | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)


def read_content(message: dict[str, Any], role: str, error: ErrorFactory, path: str) -> ContentRead:
    """``message``'s content and ``reasoning_content``, as the canonical fields.

    Text content stays text; a list of parts keeps its text and media parts
    (``[]`` when only mapped parts were there becomes ``""``, whileai's empty
    content); ``reasoning`` / ``thinking`` parts join ``reasoning_content`` and
    ``tool_call`` parts join the tool calls (assistant turns only)."""
    content = message.get("content")
    reasoning = _own_reasoning(message, error, path)
    if isinstance(content, dict):
        raise error(
            f"{path}.content",
            f"expected text or a list of content parts, got {_type_name(content)}",
            "Write content as a string or as a list of parts ({'type': 'text', 'text': ...}, ...).",
        )
    if not isinstance(content, list):
        return ContentRead(str(content or ""), reasoning=reasoning)  # whileai's str(content or "")
    parts: list[dict[str, Any]] = []
    thoughts = [reasoning] if reasoning is not None else []
    calls: list[dict[str, Any]] = []
    for j, part in enumerate(content):
        where = f"{path}.content[{j}]"
        kind = part.get("type") if type(part) is dict else None
        if kind in REASONING_PARTS:
            thoughts.append(_reasoning_text(part, kind, role, error, where))
        elif kind == TOOL_CALL_PART:
            calls.append(_tool_call(part, role, error, where))
        else:
            parts.append(part_to_storage(part, error, where))
    joined = REASONING_JOIN.join(thoughts) if thoughts else None
    if not parts:
        return ContentRead("", None, joined, calls)
    return ContentRead(None, parts, joined, calls)


def _own_reasoning(message: dict[str, Any], error: ErrorFactory, path: str) -> str | None:
    value = message.get("reasoning_content")
    if value is None or isinstance(value, str):
        return value
    raise error(f"{path}.reasoning_content", f"expected text, got {_type_name(value)}", "Fix the row.")


def _only_keys(part: dict[str, Any], allowed: Sequence[str], error: ErrorFactory, path: str) -> None:
    rest = sorted(set(part) - {"type", *allowed})
    if rest:
        raise error(
            path,
            f"expected a {part['type']!r} part with only {', '.join(repr(k) for k in allowed)}, got also {rest}",
            "Mapping it onto the message would lose those keys; drop them or convert the part first.",
        )


def _reasoning_text(part: dict[str, Any], kind: str, role: str, error: ErrorFactory, path: str) -> str:
    keys = REASONING_PARTS[kind]
    if role != "assistant":
        raise error(path, f"expected a {kind!r} part on an assistant turn, got one on a {role!r} turn", "Fix the row.")
    _only_keys(part, keys, error, path)
    text = next((part[k] for k in keys if k in part), None)
    if not isinstance(text, str):
        raise error(
            f"{path}.{keys[0]}", f"expected the {kind} text as a string, got {_type_name(text)}", "Fix the row."
        )
    return text


def _tool_call(part: dict[str, Any], role: str, error: ErrorFactory, path: str) -> dict[str, Any]:
    if role != "assistant":
        raise error(path, f"expected a 'tool_call' part on an assistant turn, got one on a {role!r} turn", "Fix the row.")
    if "value" in part:
        _only_keys(part, ("value",), error, path)
        call = part["value"]
        if isinstance(call, str):
            try:
                call = json.loads(call)
            except ValueError as err:
                raise error(f"{path}.value", f"expected the tool call as JSON text, got unparseable text ({err})", "Fix the row.") from err
    else:
        _only_keys(part, ("id", "name", "arguments", "function"), error, path)
        call = {k: v for k, v in part.items() if k != "type"}
    function = call.get("function") if isinstance(call, dict) and isinstance(call.get("function"), dict) else call
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise error(
            path,
            f"expected a tool call with a 'name' (and 'arguments'), got {json.dumps(call, default=str)[:80]}",
            "Write tool_call parts as {'type': 'tool_call', 'value': {'name': ..., 'arguments': {...}}}.",
        )
    return call


# ---------------------------------------------------------------- raw text


def spoken_texts(message: dict[str, Any]) -> list[str]:
    """Every text a raw message says: its content text (or the text of its
    parts, wherever it sits, nested part lists included), its
    ``reasoning_content`` and its ``reasoning`` / ``thinking`` parts. The leak
    gate reads these from rows as whileai wrote them."""
    texts = _said(message.get("content"))
    if isinstance(message.get("reasoning_content"), str):
        texts.append(message["reasoning_content"])
    return texts


def _said(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    texts: list[str] = []
    for part in content if isinstance(content, list) else ():
        if type(part) is not dict:
            continue
        keys = REASONING_PARTS.get(str(part.get("type")))
        found = part_text(part) if keys is None else next((part[k] for k in keys if isinstance(part.get(k), str)), None)
        if found is not None:
            texts.append(found)
        elif isinstance(part.get("content"), list):  # a tool_result's own parts
            texts.extend(_said(part["content"]))
    return texts


# ---------------------------------------------------------------- TRL rows back


def fill_images(messages: list[Any], images: Any, error: ErrorFactory) -> list[Any]:
    """TRL vision rows back to parts with references: each ``{"type": "image"}``
    placeholder outside tool turns takes the next of the row's ``images``, as
    TRL's ``prepare_multimodal_messages`` fills them. A row with no such placeholder takes
    LLaMA-Factory's instead: each ``<image>`` in the text, which becomes content parts in place."""
    if not isinstance(images, list) or not all(isinstance(ref, str) for ref in images):
        got = _type_name(images) if not isinstance(images, list) else "a list holding non-text items"
        raise error(
            "images",
            f"expected a list of image references (URLs, paths or data URIs), got {got}",
            "Store TRL images as references; decoded images are not read.",
        )
    slots = [
        (i, j)
        for i, message in enumerate(messages)
        if type(message) is dict and message.get("role") != "tool" and isinstance(message.get("content"), list)
        for j, part in enumerate(message["content"])
        if type(part) is dict and part.get("type") == "image" and "image" not in part
    ]
    if not slots:
        tagged = sum(m["content"].count(IMAGE_TAG) for m in messages
                     if type(m) is dict and m.get("role") != "tool" and isinstance(m.get("content"), str))
        if tagged == len(images) and tagged:
            return _tags_to_parts(messages, images)
        if tagged:
            raise error(
                "images", f"expected one image per {IMAGE_TAG!r} placeholder in the text ({tagged}), got "
                f"{len(images)} images", "Give the row as many images as its placeholders (LLaMA-Factory refuses "
                "the row otherwise).",
            )
    if len(slots) != len(images):
        raise error(
            "images",
            f"expected one image per {{'type': 'image'}} placeholder or {IMAGE_TAG!r} in the text ({len(slots)}), "
            f"got {len(images)} images",
            "Give the row as many images as its placeholders (TRL refuses the row otherwise).",
        )
    out = list(messages)
    for (i, j), ref in zip(slots, images):
        if out[i] is messages[i]:
            out[i] = {**messages[i], "content": list(messages[i]["content"])}
        out[i]["content"][j] = {**out[i]["content"][j], "image": ref}
    return out


#: LLaMA-Factory's image placeholder in message text (its ``images`` list fills them in order)
IMAGE_TAG = "<image>"


def _tags_to_parts(messages: list[Any], images: list[str]) -> list[Any]:
    """Text with ``<image>`` placeholders as content parts, in place: the text around each
    placeholder a text part (empty pieces left out), each placeholder the next image."""
    refs = iter(images)
    out = []
    for message in messages:
        content = message.get("content") if type(message) is dict and message.get("role") != "tool" else None
        if not isinstance(content, str) or IMAGE_TAG not in content:
            out.append(message)
            continue
        parts: list[dict[str, Any]] = []
        for k, piece in enumerate(content.split(IMAGE_TAG)):
            if k:
                parts.append({"type": "image", "image": next(refs)})
            if piece:
                parts.append({"type": "text", "text": piece})
        out.append({**message, "content": parts})
    return out
