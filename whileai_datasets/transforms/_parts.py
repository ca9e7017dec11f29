"""Content parts on Arrow columns: their JSON, their wire shapes, their text.

A message's ``parts`` field is a list of ``rows.content.PART_TYPE`` structs
(``type``, ``text``, ``media``, ``media_key``, ``extra``); a message without
parts has a null list there. Everything here works on the flattened parts of a
whole batch at once: ``owners`` maps each part to its message, and numpy over
offsets does the per-message bookkeeping.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets.errors import SchemaError
from whileai_datasets.rows.content import part_from_storage
from whileai_datasets.transforms import _arrow
from whileai_datasets.transforms._text import NULL, concat, join, or_null, plain, quote

IMAGE_TYPES = ("image", "image_url")
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

    Parts with other keys (``extra``) go through Python's ``json``; they are
    rare (``detail``, processor hints) and merging nested objects in string
    kernels would be fragile."""
    kind = pc.struct_field(flat, "type")
    pieces = ['{"type": ', or_null(quote(kind))]
    text = pc.struct_field(flat, "text")
    if text.null_count < len(text):
        pieces.append(join(', "text": ', quote(text)))
    media = pc.struct_field(flat, "media")
    if media.null_count < len(media):
        prefix, suffix = _media_affixes(pc.struct_field(flat, "media_key"))
        pieces.append(join(", ", prefix, quote(media), suffix))
    objects = concat(*pieces, "}")
    extra = pc.struct_field(flat, "extra")
    if extra.null_count < len(extra):
        picked = extra.is_valid()
        values = [json.dumps(part_from_storage(p), ensure_ascii=False) for p in pc.filter(flat, picked).to_pylist()]
        objects = pc.replace_with_mask(objects, picked, _strings(values))
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
    return pc.if_else(pa.array(mask), pa.scalar(value, pa.string()), other_value)


def openai_parts(messages: pa.Array) -> pa.Array | None:
    """Parts lists as OpenAI content parts: ``text``, ``image_url`` and
    ``video_url`` (vLLM's name) objects holding ``url``; other keys are kept
    only on parts that already had OpenAI's shape. None when no message has parts."""
    parts = flat_parts(messages)
    if parts is None:
        return None
    image, video = parts.kind_in(IMAGE_TYPES), parts.kind_in(VIDEO_TYPES)
    kind = _where(video, "video_url", _where(image, "image_url", parts.field("type")))
    key = _where(video, "video_url.url", _where(image, "image_url.url", None))
    own_shape = parts.kind_in(("image_url", "video_url"))
    extra = pc.if_else(pa.array(own_shape), plain(parts.field("extra")), NULL).cast(pa.json_())
    return parts.rebuilt(type=kind, media_key=key, extra=extra)


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
    them); videos as ``{"type": "video", "video": ref}``."""
    parts = flat_parts(messages)
    if parts is None:
        return None
    image, video = parts.kind_in(IMAGE_TYPES), parts.kind_in(VIDEO_TYPES)
    placeholder = np.zeros(len(image), dtype=bool) if inline_images else _placeholders(messages, parts)
    kind = _where(video, "video", _where(image, "image", parts.field("type")))
    key = _where(video, "video", _where(image & ~placeholder, "image", None))
    media = pc.if_else(pa.array(placeholder), NULL, parts.field("media"))
    return parts.rebuilt(type=kind, media=media, media_key=key, extra=None)


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
    return _arrow.build_list(_arrow.offsets_of(counts), pc.filter(parts.field("media"), pa.array(placeholder)))


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
    message = int(parts.owner[first])
    row = int(_arrow.parents(lists)[message])
    in_row = message - int(_arrow.offsets_of(_arrow.lengths(lists))[row])
    in_message = first - int(_arrow.offsets_of(_arrow.lengths(parts.lists))[message])
    got = "a video part" if video[first] else f"an image referenced as {media[first].as_py()[:60]!r}"
    raise SchemaError(
        f"Fireworks training data takes images as base64 data URIs (data:image/png;base64,...), got {got}",
        location=f"batch row {row}, {column}[{in_row}].content[{in_message}]",
        hint="Inline the images as data URIs before to_fireworks (nothing is downloaded here), or use to_openai / to_trl.",
    )
