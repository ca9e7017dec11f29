"""One content part in the canonical schema: its text, its media reference, and the rest.

Real rollouts write parts in many layouts. Text sits under ``text`` (OpenAI,
HF processors), ``value`` (LLaMA-Factory) or ``content`` (Anthropic
``tool_result``); media is a string under the part's own type name or under
``url`` / ``path`` / ``image``, or an object holding it: OpenAI's
``image_url: {url, detail}``, ``input_audio: {data, format}`` and
``file: {file_data, filename}``, Anthropic's ``source: {type, media_type,
data}``, Qwen-VL's ``video: {url}``. Parts also carry processor hints
(``min_pixels``, ``max_pixels``, ``fps``) and API keys (``cache_control``).

Storage (``PART_TYPE``) types what transforms compute on and keeps every other
key as it was:

* ``type``: the part's type, any string (or null when the part had none);
* ``text`` and ``text_key``: the part's text and the key it sat under (null
  means ``text``);
* ``media`` and ``media_key``: the media reference (a URL, a path, a data URI
  or raw base64, never fetched) and its dotted path in the part
  (``image``, ``image_url.url``, ``source.data``);
* ``extra``: every other key, as the text of a JSON object (text, not ``Json``:
  ``datasets`` sizes a dataset before ``push_to_hub``, ``save_to_disk`` and
  ``to_parquet`` by flattening every list, and pyarrow cannot flatten an
  all-null list of structs holding an extension type, which ``parts`` is on
  every text-only chunk). Where the reference sat inside
  an object with other keys, that object is kept here whole with a null in the
  reference's place, so its keys come back in their order.

``part_from_storage`` gives back exactly the dict the part was. A part is refused
only where its text is truly ambiguous (a string under two of the text keys), a
text part's text is not text, or a value cannot be JSON (raw bytes).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from whileai_datasets.errors import SchemaError, WhileaiError

PART_TYPE = pa.struct(
    [
        ("type", pa.string()),
        ("text", pa.string()),
        ("media", pa.string()),
        ("media_key", pa.string()),
        ("extra", pa.string()),
        ("text_key", pa.string()),
    ]
)
#: Keys that may hold a part's text, in order; ``text`` is the default (a null ``text_key``).
TEXT_KEYS = ("text", "value", "content")
#: Part types whose text a text transform reads; other parts' text is read too,
#: but a non-text value under a text key is only refused on these.
TEXT_TYPES = ("text", "input_text", "output_text")
#: Part types that are media: their reference is looked for, never a text.
MEDIA_TYPES = (
    "image", "image_url", "input_image", "video", "video_url", "audio", "audio_url", "input_audio",
    "file", "input_file", "document",
)
#: Keys that may hold a media reference (a string, or an object holding it), in
#: order after the part's own type name (``value`` only on media types).
MEDIA_KEYS = (*MEDIA_TYPES, "source", "url", "path", "data", "base64", "bytes", "file_data", "file_id")
#: Keys of a media object that may hold its reference, in order.
INNER_MEDIA_KEYS = ("url", "path", "data", "bytes", "file_data", "file_url", "file_id", "base64", "image_url")

#: ``error(path, problem, hint)`` builds the exception to raise, with the row's location.
ErrorFactory = Callable[[str, str, str], WhileaiError]


def located(location: str) -> ErrorFactory:
    """An error factory for values outside a source row (a dict batch,
    ``Message.encode_example``): ``SchemaError``, which ``datasets``' encoder
    lets through (it swallows a ``ValueError`` and casts the raw value instead)."""

    def error(path: str, problem: str, hint: str) -> WhileaiError:
        return SchemaError(problem, location=f"{location}, {path}" if path else location, hint=hint)

    return error


def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def part_text(part: Any) -> str | None:
    """A raw part's text, wherever it sits (``text``, ``value``, ``content``), or
    None (a media part has none)."""
    if type(part) is not dict or part.get("type") in MEDIA_TYPES:
        return None
    return next((part[k] for k in TEXT_KEYS if isinstance(part.get(k), str)), None)


def part_to_storage(part: Any, error: ErrorFactory, path: str) -> dict[str, Any]:
    """One content part in ``PART_TYPE`` storage form (see the module docstring)."""
    if type(part) is not dict:
        raise error(path, f"expected a content part object, got {type_name(part)}", "Fix the row.")
    kind = part.get("type")
    if kind is not None and not isinstance(kind, str):
        raise error(f"{path}.type", f"expected the part type as a string, got {type_name(kind)}", "Fix the row.")
    out: dict[str, Any] = {"type": kind, "text": None, "media": None, "media_key": None, "text_key": None}
    rest = {k: v for k, v in part.items() if k != "type"}
    text_key = None if kind in MEDIA_TYPES else _text_key(part, kind, error, path)
    typed = []  # the keys typed fields stand for, in decode order
    if text_key is not None:
        out["text"] = rest.pop(text_key)
        out["text_key"] = None if text_key == "text" else text_key
        typed.append(text_key)
    else:
        found = _media(part, kind)
        if found is not None:
            out["media"], out["media_key"] = found
            outer = found[1].split(".")[0]
            _take_media(rest, found[1].split("."))
            typed.append(outer)
    if list(part) != [*(["type"] if kind is not None else []), *typed, *(k for k in rest if k not in typed)]:
        rest = _in_order(part, rest, typed)
    out["extra"] = _json_or_none(rest, error, path)
    return out


def _in_order(part: dict[str, Any], rest: dict[str, Any], typed: list[str]) -> dict[str, Any]:
    """``rest`` holding a null in the place of each typed key (``type`` too),
    so the part's keys decode in their own order."""
    out: dict[str, Any] = {}
    for key in part:
        if key == "type":
            out[key] = None
        elif key in typed:
            out[key] = rest.get(key)  # a media object stays whole, its reference nulled
        else:
            out[key] = rest[key]
    return out


def _text_key(part: dict[str, Any], kind: str | None, error: ErrorFactory, path: str) -> str | None:
    keys = [k for k in TEXT_KEYS if isinstance(part.get(k), str)]
    if len(keys) > 1:
        raise error(
            path,
            f"expected the part's text under one of {', '.join(map(repr, TEXT_KEYS))}, got text under {keys}",
            "Which one is the text is ambiguous (strip_think, truncation and the leak gate must read it): keep one.",
        )
    if keys:
        return keys[0]
    bad = next((k for k in TEXT_KEYS if part.get(k) is not None and not isinstance(part[k], (list, dict))), None)
    if kind in TEXT_TYPES and bad is not None:
        raise error(
            f"{path}.{bad}", f"expected the text part's text as a string, got {type_name(part[bad])}", "Fix the row."
        )
    return None


def _media(part: dict[str, Any], kind: str | None) -> tuple[str, str] | None:
    """``(reference, dotted path)`` of a part's media, or None (no single string reference)."""
    if kind and isinstance(part.get(kind), str) and "." not in kind:
        return part[kind], kind  # the common case: the reference under the part's own type name
    for key in (kind, *MEDIA_KEYS, "value") if kind in MEDIA_TYPES else (kind, *MEDIA_KEYS):
        if key is None:
            continue
        value = part.get(key)
        if isinstance(value, str) and "." not in key:
            return value, key
        if isinstance(value, dict):
            inner = next((k for k in INNER_MEDIA_KEYS if isinstance(value.get(k), str)), None)
            if inner is not None:
                return value[inner], f"{key}.{inner}"
    return None


def _take_media(rest: dict[str, Any], path: list[str]) -> None:
    """Remove the media reference at ``path`` from ``rest``: the key itself when
    nothing else sits beside it, else a null in its place (the object stays whole)."""
    outer = path[0]
    if len(path) == 1:
        del rest[outer]
        return
    inner = dict(rest[outer])
    if len(inner) == 1:
        del rest[outer]
        return
    inner[path[1]] = None
    rest[outer] = inner


def _json_or_none(rest: dict[str, Any], error: ErrorFactory, path: str) -> str | None:
    if not rest:
        return None
    try:
        return json.dumps(rest, ensure_ascii=False)
    except (TypeError, ValueError) as err:
        raise error(
            path,
            f"expected the part's keys to hold JSON values, got a value JSON cannot hold ({err})",
            "Store media as references (a URL, a path, a data: URI or base64 text), not as raw bytes or objects.",
        ) from err


def part_from_storage(value: dict[str, Any]) -> dict[str, Any]:
    """The part dict a storage struct stands for: exactly its own keys, in their order."""
    extra = value.get("extra")
    rest: dict[str, Any] = {} if extra is None else (json.loads(extra) if isinstance(extra, str) else dict(extra))
    out: dict[str, Any] = {}
    if "type" in rest:  # the key order is kept in ``rest``: fill in its places
        rest["type"] = value.get("type")
    elif value.get("type") is not None:
        out["type"] = value["type"]
    if value.get("text") is not None:
        _put(out, rest, value.get("text_key") or "text", value["text"])
    media_key = value.get("media_key")
    if media_key is not None:
        outer, _, inner = media_key.partition(".")
        holder = rest.get(outer)
        if not inner:
            _put(out, rest, outer, value.get("media"))
        elif isinstance(holder, dict):
            rest[outer] = {**holder, inner: value.get("media")}  # the reference back in its place
        else:
            _put(out, rest, outer, {inner: value.get("media")})
    out.update(rest)
    return out


def _put(out: dict[str, Any], rest: dict[str, Any], key: str, item: Any) -> None:
    if key in rest:
        rest[key] = item
    else:
        out[key] = item
