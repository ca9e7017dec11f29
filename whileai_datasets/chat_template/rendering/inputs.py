"""What a chat template renders with: the messages, tools and variables prepared as transformers prepares them.

Keys whose value is None are dropped, values are rebuilt from plain JSON types, and a message's reasoning
(``reasoning_content``, ``thinking`` or ``reasoning``) is made available under ``reasoning_content`` and
``thinking``. Inputs holding the span markers' private-use characters are refused. ``batch_inputs`` lets a
caller that owns a batch's inputs (``tokenize``) skip the per-render work it has done once for the batch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from whileai_datasets.chat_template.sandbox.budget import shared_values, sharing
from whileai_datasets.chat_template.sandbox.environment import MARK_CLOSE, MARK_OPEN, pinned_strftime
from whileai_datasets.errors import TemplateError

_REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")


_EXACT = frozenset({str, int, float, bool, type(None)})


def plain(value: Any) -> Any:
    """``value`` rebuilt from JSON types; any other object becomes ``"<TypeName>"``."""
    kind = type(value)
    if kind in _EXACT:
        return value
    if kind is dict:  # the common case first: no abstract-class checks
        return {key if type(key) is str else plain(key): item if type(item) in _EXACT else plain(item)
                for key, item in value.items()}
    if kind is list:
        return [item if type(item) in _EXACT else plain(item) for item in value]
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {plain(key): plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, tuple):
        return tuple(plain(item) for item in value)
    return f"<{type(value).__name__}>"


def prepare_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The message dicts the template sees (see the module docstring)."""
    batch = _BATCH.get()
    if batch is not None and batch.messages_prepared:  # plain values already, no None: only the aliases
        return [message if message.keys().isdisjoint(_REASONING_KEYS) else _with_reasoning(dict(message))
                for message in messages]  # type: ignore[misc]
    prepared = []
    for index, message in enumerate(messages):
        if type(message) is not dict and not isinstance(message, Mapping):
            raise TemplateError(
                f"expected a message dict, got {type(message).__name__}",
                location=f"messages[{index}]",
                hint="Pass messages as dicts with 'role' and 'content'.",
            )
        prepared.append(_with_reasoning({key: plain(value) for key, value in message.items() if value is not None}))
    return prepared


def _with_reasoning(kept: dict[str, Any]) -> dict[str, Any]:
    """``kept`` with its reasoning under both names templates read (``thinking``, ``reasoning_content``)."""
    reasoning = next((kept[key] for key in _REASONING_KEYS if kept.get(key) is not None), None)
    if reasoning is None:
        return kept
    return {"thinking": reasoning, **kept, "reasoning_content": reasoning}


def _has_markers(value: Any) -> bool:
    """Whether any string in ``value`` holds a marker character (one C-speed serialisation)."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str, check_circular=False)
    except (TypeError, ValueError, RecursionError):
        return True  # undecided: let the walk below look
    return MARK_OPEN in text or MARK_CLOSE in text


def _check_no_markers(value: Any, where: str) -> None:
    if isinstance(value, str):
        if MARK_OPEN in value or MARK_CLOSE in value:
            raise TemplateError(
                "the input contains the private-use character U+E000 or U+E001, which span tracking reserves",
                location=where,
                hint="Remove those characters from the conversation before rendering.",
            )
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _check_no_markers(item, f"{where}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_no_markers(item, f"{where}[{index}]")


def template_context(
    messages: list[dict[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    add_generation_prompt: bool,
    kwargs: Mapping[str, Any],
    now: datetime | None,
) -> dict[str, Any]:
    """The variables a template renders with, as transformers passes them."""
    batch = _BATCH.get()
    if (batch is None or not batch.messages_clean) and _has_markers(messages):
        _check_no_markers(messages, "inputs['messages']")
    context = dict(_fixed_context(kwargs, add_generation_prompt, now, batch))
    context["messages"] = messages
    if tools is not None:
        context["tools"] = prepared_tools(tools)
    return context


def _fixed_context(kwargs: Mapping[str, Any], add_generation_prompt: bool, now: datetime | None,
                   batch: _BatchInputs | None) -> dict[str, Any]:
    """The context but for messages and tools, checked for markers: once per batch for the same values."""
    try:
        # each value with its type: 1, 1.0 and True are equal keys but render as "1", "1.0" and "True"
        key = (tuple((name, type(value), value) for name, value in kwargs.items()), add_generation_prompt,
               now) if batch is not None else None
        known = batch.contexts.get(key) if batch is not None else None  # type: ignore[arg-type]
    except TypeError:  # a value that does not hash: prepared every render
        key = known = None
    if known is not None:
        return known
    context: dict[str, Any] = {name: plain(value) for name, value in kwargs.items()}
    context.update(messages=[], tools=None, documents=context.get("documents"),
                   add_generation_prompt=add_generation_prompt)
    if now is not None:
        context["strftime_now"] = pinned_strftime(now)
    if _has_markers(context):
        _check_no_markers(context, "inputs")
    if batch is not None and key is not None:
        batch.contexts[key] = context
    return context


@dataclass
class _BatchInputs:
    tools: dict[int, tuple[Any, list[Any]]] = field(default_factory=dict)
    messages_clean: bool = False
    messages_prepared: bool = False
    contexts: dict[Any, dict[str, Any]] = field(default_factory=dict)  # ``_fixed_context`` by its inputs


_BATCH: ContextVar[_BatchInputs | None] = ContextVar("whileai_batch_inputs", default=None)


@contextmanager
def batch_inputs(*, messages_clean: bool = False, messages_prepared: bool = False) -> Iterator[None]:
    """Within: renders of one batch of rows, whose caller owns the inputs and changes none of them inside.

    A tool list handed to several renders is prepared (``plain``) and checked
    for marker characters once (``tokenize`` decodes each distinct tools text
    of a batch once, so its rows share the lists); the prepared copy is shared
    too, which the immutable sandbox makes safe: no template can change it.
    ``messages_clean``: the caller has checked every text the messages hold
    (``marker_free``), so they are not serialised again per render.
    ``messages_prepared``: the messages hold plain JSON values and no key whose
    value is None (``prepare_messages`` would copy them unchanged), so they are
    handed to the template as they are. The context but for messages and tools
    is prepared and checked once for the same special tokens.
    """
    token = _BATCH.set(_BatchInputs(messages_clean=messages_clean, messages_prepared=messages_prepared))
    try:
        with sharing():  # and what pure filters make of the prepared tools, once (``budget.SharedValues``)
            yield
    finally:
        _BATCH.reset(token)


#: A marker character's UTF-8 bytes, and its JSON escape (text decoded later, like tool-call arguments or extra
#: keys; JSON spells the escape with a lower-case ``u`` and either case of hex digit).
_MARKER_BYTES = (MARK_OPEN.encode(), MARK_CLOSE.encode())
assert len({marker[:1] for marker in _MARKER_BYTES}) == 1  # one lead byte (``_strings_marker_free``)
_MARKER_ESCAPE = re.compile(rb"\\u[eE]00[01]")


def _string_bytes(array: pa.Array) -> bytes:
    """The UTF-8 bytes of a string array's values, end to end (only its own slice of the data buffer)."""
    buffers = array.buffers()
    if len(array) == 0 or buffers[2] is None:
        return b""
    width = np.dtype(np.int64 if pa.types.is_large_string(array.type) else np.int32)
    offsets = np.frombuffer(buffers[1], dtype=width, count=len(array) + 1, offset=array.offset * width.itemsize)
    return memoryview(buffers[2])[int(offsets[0]):int(offsets[-1])].tobytes()


def _strings_marker_free(array: pa.Array) -> bool:
    """No marker character, nor its JSON escape, in a string array's bytes, searched in one buffer (an Arrow
    regex per value took 9 ms for a batch of 1,000 agent rows). Both markers' UTF-8 starts with 0xEE and the
    escape with a backslash: one-byte searches (memchr, some 0.02 ms a megabyte) settle most buffers, and
    only one holding such a byte is searched for the markers themselves. Bytes under null values count too
    (undecided, never wrongly clean)."""
    data = _string_bytes(array)
    if data.find(_MARKER_BYTES[0][:1]) >= 0 and any(marker in data for marker in _MARKER_BYTES):
        return False
    return data.find(b"\\") < 0 or _MARKER_ESCAPE.search(data) is None


def marker_free(array: pa.Array | pa.ChunkedArray) -> bool:
    """True when no string anywhere in ``array`` (lists and structs gone through) can hold a marker character.

    A substring search over each string column's data buffer instead of a
    serialisation of every row; False (undecided: check each render) for a
    type it does not read.
    """
    kind = array.type
    if isinstance(array, pa.ChunkedArray):
        return all(marker_free(chunk) for chunk in array.chunks)
    if isinstance(kind, pa.ExtensionType):
        return marker_free(array.storage)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _strings_marker_free(array)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return marker_free(array.flatten())
    if pa.types.is_struct(kind):
        return all(marker_free(field) for field in array.flatten())
    return pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind) or \
        pa.types.is_null(kind)


def prepared_tools(tools: Sequence[Mapping[str, Any]]) -> list[Any]:
    """``plain(list(tools))``, checked for marker characters (once per list inside ``batch_inputs``)."""
    batch = _BATCH.get()
    known = None if batch is None else batch.tools
    entry = None if known is None else known.get(id(tools))
    if entry is not None and entry[0] is tools:
        return entry[1]
    prepared = plain(list(tools))
    if _has_markers(prepared):
        _check_no_markers(prepared, "inputs['tools']")
    if known is not None:
        known[id(tools)] = (tools, prepared)  # holding ``tools`` keeps its id from being reused meanwhile
        shared = shared_values()
        if shared is not None:
            shared.share(prepared)
    return prepared
