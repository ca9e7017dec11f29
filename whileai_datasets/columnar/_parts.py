"""Content parts on Arrow columns: their JSON, their wire shapes, their text.

A message's ``parts`` field is a list of ``rows.parts.PART_TYPE`` structs
(``type``, ``text``, ``media``, ``media_key``, ``extra``); a message without
parts has a null list there. Everything here works on the flattened parts of a
whole batch at once: ``owners`` maps each part to its message, and numpy over
offsets does the per-message bookkeeping.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets.columnar import _arrow
from whileai_datasets.columnar._text import NULL, concat, join, or_null, plain, quote
from whileai_datasets.errors import SchemaError
from whileai_datasets.rows.parts import TEXT_TYPES, part_from_storage

IMAGE_TYPES = ("image", "image_url", "input_image")
VIDEO_TYPES = ("video", "video_url")


def parts_of(messages: pa.Array) -> pa.Array | None:
    """The messages' parts lists, or None when no message has parts."""
    if "parts" not in messages.type.names:
        return None
    parts = pc.struct_field(messages, "parts")
    return None if parts.null_count == len(parts) else parts


def has_parts(messages: pa.Array) -> np.ndarray:
    """Per message: whether it holds a parts list."""
    parts = parts_of(messages)
    if parts is None:
        return np.zeros(len(messages), dtype=bool)
    return ~_arrow.null_mask(parts)


@dataclass
class FlatParts:
    """The parts of a batch's messages, flattened: ``lists`` (one per message),
    ``flat`` (every part) and ``owner`` (each part's message index)."""

    lists: pa.Array
    flat: pa.StructArray

    @property
    def owner(self) -> np.ndarray:
        return _arrow.parents(self.lists)

    def field(self, name: str) -> pa.Array:
        return pc.struct_field(self.flat, name)

    def kind_in(self, kinds: tuple[str, ...]) -> np.ndarray:
        return _arrow.to_numpy_bool(pc.is_in(self.field("type"), pa.array(kinds)))

    def with_text(self) -> np.ndarray:
        """Per part: whether it has text (under whichever key it sat)."""
        return ~_arrow.null_mask(self.field("text"))

    def rebuilt(self, **children: pa.Array | None) -> pa.ListArray:
        """The parts lists with some part fields replaced."""
        return _arrow.relist(self.lists, _arrow.replace_fields(self.flat, **children))


def flat_parts(messages: pa.Array) -> FlatParts | None:
    parts = parts_of(messages)
    if parts is None:
        return None
    if isinstance(parts, pa.ChunkedArray):
        parts = parts.combine_chunks()
    return FlatParts(parts, _arrow.flat(parts))


def _strings(values: np.ndarray | list[str | None]) -> pa.Array:
    return pa.array(list(values), pa.string())


# ---------------------------------------------------------------- JSON


def part_objects(flat: pa.StructArray) -> pa.Array:
    """The JSON object text of each part, with exactly the keys it decodes to.

    Parts with other keys (``extra``) or no type go through Python's ``json``;
    they are rare (``detail``, processor hints) and merging nested objects in
    string kernels would be fragile."""
    kind = pc.struct_field(flat, "type")
    pieces = ['{"type": ', or_null(quote(kind))]
    text = pc.struct_field(flat, "text")
    if text.null_count < len(text):
        keys = pc.struct_field(flat, "text_key") if "text_key" in flat.type.names else pa.nulls(len(flat), pa.string())
        prefix = pc.fill_null(join('"', keys, '": '), '"text": ')
        pieces.append(join(", ", prefix, quote(text)))
    media = pc.struct_field(flat, "media")
    if media.null_count < len(media):
        prefix, suffix = _media_affixes(pc.struct_field(flat, "media_key"))
        pieces.append(join(", ", prefix, quote(media), suffix))
    objects = concat(*pieces, "}")
    picked = _arrow.to_numpy_bool(pc.or_(pc.struct_field(flat, "extra").is_valid(), kind.is_null()))
    if picked.any():
        values = [json.dumps(part_from_storage(p), ensure_ascii=False) for p in pc.filter(flat, pa.array(picked)).to_pylist()]
        objects = pc.replace_with_mask(objects, pa.array(picked), _strings(values))
    return objects


def _media_affixes(keys: pa.Array) -> tuple[pa.Array, pa.Array]:
    """``'"image": '`` / ``''`` or ``'"image_url": {"url": '`` / ``'}'`` per media key."""
    encoded = keys.dictionary_encode()
    prefixes, suffixes = [], []
    for key in encoded.dictionary.to_pylist():
        outer, _, inner = key.partition(".")
        prefixes.append(json.dumps(outer) + ": " + ("{" + json.dumps(inner) + ": " if inner else ""))
        suffixes.append("}" if inner else "")
    return _strings(prefixes).take(encoded.indices), _strings(suffixes).take(encoded.indices)


def content_json(messages: pa.Array, content_text: pa.Array) -> pa.Array:
    """Each message's ``content`` JSON: its parts array where it has parts, else ``content_text``."""
    parts = flat_parts(messages)
    if parts is None:
        return content_text
    arrays = join("[", pc.binary_join(_arrow.relist(parts.lists, part_objects(parts.flat)), ", "), "]")
    return pc.if_else(parts.lists.is_valid(), arrays, content_text)


# ---------------------------------------------------------------- wire shapes


def _where(mask: np.ndarray, value: str, other: pa.Array | str | None) -> pa.Array:
    other_value = NULL if other is None else other
    return _arrow.if_else(pa.array(mask), pa.scalar(value, pa.string()), other_value)


def openai_parts(messages: pa.Array) -> pa.Array | None:
    """Parts lists as OpenAI content parts: ``text``, ``image_url`` and
    ``video_url`` (vLLM's name) objects holding ``url``; parts of other types
    (``input_audio``, ``file``, ...) as they were. None when no message has parts."""
    parts = flat_parts(messages)
    if parts is None:
        return None
    image, video = parts.kind_in(IMAGE_TYPES), parts.kind_in(VIDEO_TYPES)
    kind = _where(video, "video_url", _where(image, "image_url", parts.field("type")))
    key = _where(video, "video_url.url", _where(image, "image_url.url", parts.field("media_key")))
    return _rewired(parts, kind, key)


def _placeholders(messages: pa.Array, parts: FlatParts) -> np.ndarray:
    """Image parts of user and system turns: the ones that become TRL's
    ``{"type": "image"}`` placeholders, filled from ``images``. TRL fills none
    in tool turns, and a completion (an assistant turn) is prepared without
    images, so images in assistant and tool turns keep their reference."""
    seen = pc.is_in(pc.struct_field(messages, "role"), pa.array(["user", "system"]))
    return parts.kind_in(IMAGE_TYPES) & _arrow.to_numpy_bool(seen)[parts.owner]


def trl_parts(messages: pa.Array, *, inline_images: bool = False) -> pa.Array | None:
    """Parts lists in TRL's vision format: image parts of user and system turns
    as ``{"type": "image"}`` placeholders (their references go to the
    ``images`` column), the others as ``{"type": "image", "image": ref}``
    (``prepare_multimodal_messages`` keeps those and the processor loads
    them); videos as ``{"type": "video", "video": ref}``; other parts as they were."""
    parts = flat_parts(messages)
    if parts is None:
        return None
    image, video = parts.kind_in(IMAGE_TYPES), parts.kind_in(VIDEO_TYPES)
    placeholder = np.zeros(len(image), dtype=bool) if inline_images else _placeholders(messages, parts)
    kind = _where(video, "video", _where(image, "image", parts.field("type")))
    key = _where(video, "video", _where(image & ~placeholder, "image", parts.field("media_key")))
    key = _arrow.if_else(pa.array(placeholder), NULL, key)
    return _rewired(parts, kind, key, placeholder=placeholder)


def _rewired(parts: FlatParts, kind: pa.Array, key: pa.Array, *, placeholder: np.ndarray | None = None) -> pa.ListArray:
    """The parts with new types and media keys. A reference that moves out of
    an object (``source: {type, media_type, data}``) takes that object with it,
    base64 data becoming a data URI; every other key stays. Text parts' text
    goes under ``text`` (LLaMA-Factory's ``value``), the key every wire shape reads."""
    old_key = parts.field("media_key")
    media, extra = parts.field("media"), parts.field("extra")
    is_text = _arrow.to_numpy_bool(pc.is_in(parts.field("type"), pa.array(TEXT_TYPES)))
    renamed = is_text & ~_arrow.null_mask(parts.field("text_key"))
    moved = _arrow.to_numpy_bool(pc.fill_null(pc.not_equal(old_key, key), True)) & ~_arrow.null_mask(old_key)
    data = _arrow.to_numpy_bool(pc.fill_null(pc.ends_with(old_key, ".data"), False))
    touched = ((moved | renamed) & ~_arrow.null_mask(extra)) | (moved & data)
    if touched.any():
        rows = pc.filter(parts.flat, pa.array(touched)).to_pylist()
        fixed = [_moved_media(row, bool(m)) for row, m in zip(rows, moved[touched])]
        media = pc.replace_with_mask(media, pa.array(touched), _strings([m for m, _ in fixed]))
        extra = pc.replace_with_mask(plain(extra), pa.array(touched), _strings([e for _, e in fixed]))
    if placeholder is not None and placeholder.any():
        media = _arrow.if_else(pa.array(placeholder), NULL, media)
    text_key = _arrow.if_else(pa.array(is_text), NULL, parts.field("text_key"))
    return parts.rebuilt(type=kind, media=media, media_key=key, extra=extra, text_key=text_key)


def _moved_media(part: dict[str, Any], moved: bool) -> tuple[Any, str | None]:
    """``(reference, extra JSON)`` of a part whose reference moves from its
    ``media_key`` (``moved``) or whose text moves under ``text``."""
    raw = part.get("extra")
    rest: dict[str, Any] = {} if raw is None else (json.loads(raw) if isinstance(raw, str) else dict(raw))
    media = part.get("media")
    text_key = part.get("text_key")
    if text_key and text_key in rest:  # the text's place in the key order
        rest = {("text" if k == text_key else k): v for k, v in rest.items()}
    if moved:
        old_key = str(part["media_key"])
        holder = rest.pop(old_key.split(".")[0], None)  # the object the reference sat in goes with it
        if isinstance(holder, dict) and old_key.endswith(".data") and isinstance(holder.get("media_type"), str):
            media = f"data:{holder['media_type']};base64,{media}"  # Anthropic's base64 source as a data URI
    return media, (json.dumps(rest, ensure_ascii=False) if rest else None)


def check_references(lists: pa.Array, column: str) -> None:
    """Raise unless every image and video part has one media reference: a wire
    shape must say where the media is (``{"type": "image"}`` alone, or a video
    given as a list of frames, has none)."""
    messages = _arrow.flat(lists)
    parts = flat_parts(messages)
    if parts is None:
        return
    bad = (parts.kind_in(IMAGE_TYPES) | parts.kind_in(VIDEO_TYPES)) & _arrow.null_mask(parts.field("media"))
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise SchemaError(
            f"expected each image and video part to hold one media reference (a URL, path or data URI) in a wire shape, "
            f"got a {parts.field('type')[first].as_py()!r} part without one",
            location=_part_location(lists, parts, first, column),
            hint="Give the part its reference (TRL rows: read them with their images column), or drop the part.",
        )


def _part_location(lists: pa.Array, parts: FlatParts, index: int, column: str) -> str:
    message = int(parts.owner[index])
    row = int(_arrow.parents(lists)[message])
    in_row = message - int(_arrow.offsets_of(_arrow.lengths(lists))[row])
    in_message = index - int(_arrow.offsets_of(_arrow.lengths(parts.lists))[message])
    return f"batch row {row}, {column}[{in_row}].content[{in_message}]"


def images_column(lists: pa.Array) -> pa.ListArray | None:
    """Per row, the references of its image placeholders in order (TRL's
    ``images``); None when the rows have no image placeholder."""
    messages = _arrow.flat(lists)
    parts = flat_parts(messages)
    if parts is None:
        return None
    placeholder = _placeholders(messages, parts)
    if not placeholder.any():
        return None
    row = _arrow.parents(lists)[parts.owner]
    counts = np.bincount(row[placeholder], minlength=len(lists))
    picked = pc.filter(parts.flat, pa.array(placeholder))
    media = pc.struct_field(picked, "media")
    data = _arrow.to_numpy_bool(pc.fill_null(pc.ends_with(pc.struct_field(picked, "media_key"), ".data"), False))
    if data.any():  # base64 sources as data URIs, as the wire shapes write them
        fixed = [_moved_media(part, True)[0] for part in pc.filter(picked, pa.array(data)).to_pylist()]
        media = pc.replace_with_mask(media, pa.array(data), _strings(fixed))
    return _arrow.build_list(_arrow.offsets_of(counts), media)


def with_images(out: pa.Table, lists: pa.Array, images: bool | None) -> pa.Table:
    """``out`` with TRL's ``images`` column from the image parts of ``lists``
    (``images``: True always, False never, None when some row has one)."""
    if images is False or "images" in out.column_names:
        return out
    column = images_column(lists)
    if column is None and images is None:
        return out
    if column is None:
        column = _arrow.build_list(np.zeros(out.num_rows + 1, dtype=np.int64), pa.array([], pa.string()))
    return _arrow.set_column(out, "images", column)


def check_fireworks(lists: pa.Array, column: str) -> None:
    """Raise unless every media part is what Fireworks documents for training
    data: ``image_url`` parts holding base64 data URIs (no URLs, no videos)."""
    messages = _arrow.flat(lists)
    parts = flat_parts(messages)
    if parts is None:
        return
    media = pc.fill_null(parts.field("media"), "")
    inline = _arrow.to_numpy_bool(pc.starts_with(media, "data:image/"))
    video = parts.kind_in(VIDEO_TYPES)
    bad = (parts.kind_in(IMAGE_TYPES) & ~inline) | video
    if not bad.any():
        return
    first = int(np.flatnonzero(bad)[0])
    got = "a video part" if video[first] else f"an image referenced as {media[first].as_py()[:60]!r}"
    raise SchemaError(
        f"Fireworks training data takes images as base64 data URIs (data:image/png;base64,...), got {got}",
        location=_part_location(lists, parts, first, column),
        hint="Inline the images as data URIs before to_fireworks (nothing is downloaded here), or use to_openai / to_trl.",
    )
