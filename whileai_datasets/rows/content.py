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
import re
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


#: LLaMA-Factory's media placeholders in message text, by the row key of the list that fills them in order (its
#: multimodal layout: ``<image>`` / ``<video>`` / ``<audio>`` in the turns, ``images`` / ``videos`` / ``audios``
#: beside them), and the content part each becomes (the part type HF processors and Qwen-VL/Omni templates read)
MEDIA_TAGS = {"images": ("<image>", "image"), "videos": ("<video>", "video"), "audios": ("<audio>", "audio")}
IMAGE_TAG = MEDIA_TAGS["images"][0]


def has_media(row: dict[str, Any]) -> bool:
    """Whether ``row`` holds a list of media references under one of ``MEDIA_TAGS``' keys."""
    return row.get("images") is not None or row.get("videos") is not None or row.get("audios") is not None


def fill_media(messages: list[Any], row: dict[str, Any], error: ErrorFactory) -> list[Any]:
    """The turns with the row's ``images`` / ``videos`` / ``audios`` in place, as content parts.

    TRL's vision rows hold ``{"type": "image"}`` placeholders that take the next of the ``images`` in turn (as
    TRL's ``prepare_multimodal_messages`` fills them); LLaMA-Factory's hold ``<image>``, ``<video>`` and
    ``<audio>`` in the text (outside tool turns), each the next of its kind's list, which split the text into
    parts in place. A kind's placeholders and its list must match in number, as both tools require: a row where
    they do not is refused naming the key, both counts and what to do."""
    given = {key: _references(row[key], key, error) for key in MEDIA_TAGS if row.get(key) is not None}
    if not given:
        return messages
    if "images" in given:
        filled = _fill_image_slots(messages, given["images"], error)
        if filled is not None:
            messages = filled
            del given["images"]
    for key, refs in given.items():
        tag = MEDIA_TAGS[key][0]
        tagged = sum(m["content"].count(tag) for m in messages
                     if type(m) is dict and m.get("role") != "tool" and isinstance(m.get("content"), str))
        if tagged != len(refs):
            kind = MEDIA_TAGS[key][1]
            where = f"{{'type': 'image'}} placeholder or {tag!r}" if key == "images" and not tagged else \
                f"{tag!r} placeholder"
            raise error(
                key, f"expected one {kind} per {where} in the text ({tagged}), got {len(refs)} {key}",
                f"Give the row as many {key} as its {tag} placeholders, in their order (LLaMA-Factory and TRL refuse "
                "the row otherwise).",
            )
    return _tags_to_parts(messages, given) if any(given.values()) else messages


def _references(refs: Any, key: str, error: ErrorFactory) -> list[str]:
    if not isinstance(refs, list) or not all(isinstance(ref, str) for ref in refs):
        got = _type_name(refs) if not isinstance(refs, list) else "a list holding non-text items"
        raise error(
            key,
            f"expected a list of {key[:-1]} references (URLs, paths or data URIs), got {got}",
            f"Store the {key} as references; decoded media are not read.",
        )
    return refs


def _fill_image_slots(messages: list[Any], images: list[str], error: ErrorFactory) -> list[Any] | None:
    """TRL's ``{"type": "image"}`` placeholders outside tool turns filled in order; None where the row has none."""
    slots = [
        (i, j)
        for i, message in enumerate(messages)
        if type(message) is dict and message.get("role") != "tool" and isinstance(message.get("content"), list)
        for j, part in enumerate(message["content"])
        if type(part) is dict and part.get("type") == "image" and "image" not in part
    ]
    if not slots:
        return None
    if len(slots) != len(images):
        raise error(
            "images",
            f"expected one image per {{'type': 'image'}} placeholder ({len(slots)}), got {len(images)} images",
            "Give the row as many images as its placeholders (TRL refuses the row otherwise).",
        )
    out = list(messages)
    for (i, j), ref in zip(slots, images):
        if out[i] is messages[i]:
            out[i] = {**messages[i], "content": list(messages[i]["content"])}
        out[i]["content"][j] = {**out[i]["content"][j], "image": ref}
    return out


def _tags_to_parts(messages: list[Any], media: dict[str, list[str]]) -> list[Any]:
    """Text with placeholders as content parts, in place: the text around each placeholder a text part (empty
    pieces left out), each placeholder the next reference of its kind."""
    kinds = {MEDIA_TAGS[key][0]: (MEDIA_TAGS[key][1], iter(refs)) for key, refs in media.items()}
    split = re.compile("(" + "|".join(map(re.escape, kinds)) + ")")
    out = []
    for message in messages:
        content = message.get("content") if type(message) is dict and message.get("role") != "tool" else None
        if not isinstance(content, str) or not any(tag in content for tag in kinds):
            out.append(message)
            continue
        parts: list[dict[str, Any]] = []
        for piece in split.split(content):
            if piece in kinds:
                kind, refs = kinds[piece]
                parts.append({"type": kind, kind: next(refs)})
            elif piece:
                parts.append({"type": "text", "text": piece})
        out.append({**message, "content": parts})
    return out
