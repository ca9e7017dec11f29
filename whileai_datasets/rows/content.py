"""Message content as a list of parts, and ``reasoning_content``, in the canonical schema.

Vision agents write content as a list of parts (``{"type": "text", "text": ...}``,
``{"type": "image", "image": URL}``, ``{"type": "image_url", "image_url": {"url": ...}}``,
``{"type": "video", "video": PATH}``), and reasoning models put their thinking in
``reasoning_content`` beside ``content``. whileai writes parts as a Python repr
string; here they are typed, so transforms compute on them column-wise:

* a part is a struct ``PART_TYPE``: ``type``, ``text`` (text parts), ``media``
  (the reference of a media part: a URL, a path or a data URI, never fetched),
  ``media_key`` (where the reference sat: ``image``, ``url``, ``path``,
  ``image_url.url``, ...) and ``extra`` (every other key, as a JSON object), so
  ``part_from_storage`` gives back exactly the dict the part was;
* a message with parts stores them in its ``parts`` field and a null ``content``;
* parts under other names whose meaning is clear are mapped on the way in:
  ``reasoning`` (text under ``value`` or ``text``) and ``thinking`` (text under
  ``thinking``) parts become ``reasoning_content``; ``tool_call`` parts (the call
  under ``value``, as JSON text or an object, or as ``name`` / ``arguments`` /
  ``id`` keys) become ``tool_calls``. Any other part type is refused, naming it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from whileai_datasets.errors import SchemaError, WhileaiError

PART_TYPE = pa.struct(
    [
        ("type", pa.string()),
        ("text", pa.string()),
        ("media", pa.string()),
        ("media_key", pa.string()),
        ("extra", pa.json_()),
    ]
)
#: Part types kept as parts, and the keys (in order of preference) that may
#: hold their media reference. ``image_url`` / ``video_url`` hold an object
#: with ``url`` (OpenAI's shape) or the reference itself.
MEDIA_KEYS: dict[str, tuple[str, ...]] = {
    "image": ("image", "url", "path", "base64"),
    "image_url": ("image_url",),
    "video": ("video", "url", "path"),
    "video_url": ("video_url",),
}
CONTENT_PART_TYPES = ("text", *MEDIA_KEYS)
#: Part types mapped onto message fields, and the key holding their text.
REASONING_PARTS = {"reasoning": ("value", "text"), "thinking": ("thinking",)}
TOOL_CALL_PART = "tool_call"
KNOWN_PART_TYPES = (*CONTENT_PART_TYPES, *REASONING_PARTS, TOOL_CALL_PART)
#: Separator between several reasoning texts of one message.
REASONING_JOIN = "\n"

#: ``error(path, problem, hint)`` builds the exception to raise, with the row's location.
ErrorFactory = Callable[[str, str, str], WhileaiError]


def located(location: str) -> ErrorFactory:
    """An error factory for values outside a source row (a dict batch,
    ``Message.encode_example``): ``SchemaError``, which ``datasets``' encoder
    lets through (it swallows a ``ValueError`` and casts the raw value instead)."""

    def error(path: str, problem: str, hint: str) -> WhileaiError:
        return SchemaError(problem, location=f"{location}, {path}" if path else location, hint=hint)

    return error


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


# ---------------------------------------------------------------- parts <-> storage


def part_to_storage(part: Any, error: ErrorFactory, path: str) -> dict[str, Any]:
    """One content part (text or media) in ``PART_TYPE`` storage form."""
    if type(part) is not dict:
        raise error(path, f"expected a content part object, got {_type_name(part)}", "Fix the row.")
    kind = part.get("type")
    if kind == "text":
        text = part.get("text")
        if not isinstance(text, str):
            raise error(f"{path}.text", f"expected the text part's text as a string, got {_type_name(text)}", "Fix the row.")
        rest = {k: v for k, v in part.items() if k not in ("type", "text")}
        return {"type": kind, "text": text, "media": None, "media_key": None, "extra": _json_or_none(rest)}
    if kind not in MEDIA_KEYS:
        raise unknown_part(kind, error, path)
    return _media_to_storage(part, kind, error, path)


def _media_to_storage(part: dict[str, Any], kind: str, error: ErrorFactory, path: str) -> dict[str, Any]:
    key = next((k for k in MEDIA_KEYS[kind] if part.get(k) is not None), None)
    if key is None:
        keys = " or ".join(repr(k) for k in MEDIA_KEYS[kind])
        raise error(
            path,
            f"expected the {kind!r} part to hold a media reference under {keys}, got keys {sorted(part)}",
            "Give each media part its URL, path or data URI (nothing is downloaded).",
        )
    rest = {k: v for k, v in part.items() if k not in ("type", key)}
    value = part[key]
    media_key = key
    if kind in ("image_url", "video_url") and isinstance(value, dict):
        value = value.get("url")
        media_key = f"{key}.url"
        inner = {k: v for k, v in part[key].items() if k != "url"}
        if inner:
            rest[key] = inner
    if not isinstance(value, str):
        raise error(
            f"{path}.{media_key}",
            f"expected a URL, path or data URI string, got {_type_name(value)}",
            "Store media as references (a URL, a file path or a data: URI), not as decoded images.",
        )
    return {"type": kind, "text": None, "media": value, "media_key": media_key, "extra": _json_or_none(rest)}


def part_from_storage(value: dict[str, Any]) -> dict[str, Any]:
    """The part dict a storage struct stands for: exactly its own keys."""
    out: dict[str, Any] = {"type": value["type"]}
    if value.get("text") is not None:
        out["text"] = value["text"]
    extra = value.get("extra")
    rest: dict[str, Any] = {} if extra is None else (json.loads(extra) if isinstance(extra, str) else dict(extra))
    media_key = value.get("media_key")
    if media_key is not None:
        outer, _, inner = media_key.partition(".")
        if inner:
            out[outer] = {inner: value.get("media"), **(rest.pop(outer, None) or {})}
        else:
            out[outer] = value.get("media")
    out.update(rest)
    return out


def _json_or_none(rest: dict[str, Any]) -> str | None:
    return json.dumps(rest, ensure_ascii=False) if rest else None


def unknown_part(kind: Any, error: ErrorFactory, path: str) -> WhileaiError:
    return error(
        f"{path}.type",
        f"expected a part type of {', '.join(repr(k) for k in KNOWN_PART_TYPES)}, got {kind!r}",
        "Convert or drop parts of that type before loading (audio, files and other parts are not supported).",
    )


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
    """Every text a raw message says: its content text (or the text of its text
    parts), its ``reasoning_content`` and its ``reasoning`` / ``thinking``
    parts. The leak gate reads these from rows as whileai wrote them."""
    content = message.get("content")
    texts = [content] if isinstance(content, str) else []
    if isinstance(content, list):
        for part in content:
            if type(part) is not dict:
                continue
            keys = ("text",) if part.get("type") == "text" else REASONING_PARTS.get(str(part.get("type")), ())
            texts.extend(part[k] for k in keys if isinstance(part.get(k), str))
    if isinstance(message.get("reasoning_content"), str):
        texts.append(message["reasoning_content"])
    return texts


# ---------------------------------------------------------------- TRL rows back


def fill_images(messages: list[Any], images: Any, error: ErrorFactory) -> list[Any]:
    """TRL vision rows back to parts with references: each ``{"type": "image"}``
    placeholder outside tool turns takes the next of the row's ``images``, as
    TRL's ``prepare_multimodal_messages`` fills them."""
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
