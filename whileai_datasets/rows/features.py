"""Chat messages stored as a typed struct (``MESSAGE_TYPE``), and their keys back.

What this package hands a user types a message column with ``message_feature()``:
``datasets``' built-in features (``List`` of a dict of ``Value``/``List``, ``Json`` for
``extra``), so a pushed, saved or Parquet-written dataset loads where this package
is not installed. ``ds[i]`` then shows the storage form: every field, null where
the message had no such key. What this package hands a chat template or writes
(tokenize, the renders, the JSONL writer, the wire shapes) goes through
``messages_from_arrow`` / ``message_from_storage``, which drop those nulls.

Why the nulls must not reach a template: Arrow structs have a fixed field set, so a user message read back from a plain
struct column carries ``tool_calls: None``, ``name: None`` and
``tool_call_id: None``. Chat templates test ``'tool_calls' in message`` or
``message.tool_calls is defined`` (Llama 3.1 does), so those invented keys
change the rendered text or raise. whileai never writes an explicit null for
those three keys (the key is absent), so "null means absent" is lossless, and
``message_from_storage`` drops them. Any other per-message key rides in
``extra`` (a JSON object) and is merged back on decode.

``reasoning_content`` is a typed field too (null means absent), and content
given as a list of parts is stored in ``parts`` (``rows.parts.PART_TYPE``)
with a null ``content``; decoding gives the list of part dicts back as
``content``.

``Message``, the feature type this package registered before, is kept so data saved
by earlier releases still loads; nothing this package writes names it any more.

Storage stays columnar: ``pc.struct_field(messages.flatten(), "role")`` works on
the Arrow data, and ``with_format("arrow")`` never decodes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, ClassVar

import pyarrow as pa
from datasets import Features, Json, List
from datasets.features.features import register_feature
from datasets.table import array_cast

from whileai_datasets.rows.parts import PART_TYPE, located, part_from_storage, part_to_storage

FUNCTION_TYPE = pa.struct([("name", pa.string()), ("arguments", pa.string())])
TOOL_CALL_TYPE = pa.struct([("id", pa.string()), ("type", pa.string()), ("function", FUNCTION_TYPE)])
MESSAGE_TYPE = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("tool_calls", pa.list_(TOOL_CALL_TYPE)),
        ("name", pa.string()),
        ("tool_call_id", pa.string()),
        ("extra", pa.json_()),
        ("reasoning_content", pa.string()),
        ("parts", pa.list_(PART_TYPE)),
    ]
)
#: Message keys that are typed fields; every other key goes to ``extra``.
TYPED_KEYS = ("role", "content", "reasoning_content", "tool_calls", "name", "tool_call_id")
#: Keys whose null means "absent" on decode (in decode order, after ``content``).
OPTIONAL_KEYS = ("reasoning_content", "tool_calls", "name", "tool_call_id")
FEATURE_TYPE_NAME = "WhileaiMessage"


def plain_feature(arrow_type: pa.DataType) -> Any:
    """The built-in ``datasets`` feature of ``arrow_type``: a dict for a struct, ``List`` for a list,
    ``Json`` for the json extension type, ``Value`` for a scalar (no feature type of this package)."""
    if isinstance(arrow_type, pa.JsonType):
        return Json()
    if pa.types.is_struct(arrow_type):
        return {f.name: plain_feature(f.type) for f in arrow_type}
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return List(plain_feature(arrow_type.value_type))
    return Features.from_arrow_schema(pa.schema([("x", arrow_type)]))["x"]


def message_feature(arrow_type: pa.DataType = MESSAGE_TYPE) -> Any:
    """A message list column's built-in feature: ``List`` of the message struct's fields."""
    return List(plain_feature(arrow_type))


def storage_type(arrow_type: pa.DataType) -> pa.DataType:
    """``arrow_type`` with every extension type (``Json``) replaced by its storage,
    so ``pa.array`` can build it from Python values (then ``cast`` back)."""
    if isinstance(arrow_type, pa.BaseExtensionType):
        return arrow_type.storage_type
    if pa.types.is_list(arrow_type):
        return pa.list_(storage_type(arrow_type.value_type))
    if pa.types.is_struct(arrow_type):
        return pa.struct([pa.field(f.name, storage_type(f.type)) for f in arrow_type])
    return arrow_type


def message_to_storage(message: dict[str, Any]) -> dict[str, Any]:
    """A message dict in the struct's storage form (other keys into ``extra``).

    A message already in storage form (every field of ``MESSAGE_TYPE``, as ``datasets`` decodes a plain
    struct column) is first read back to the message it stands for."""
    if is_storage_form(message):
        message = message_from_storage(message)
    out = {key: message.get(key) for key in TYPED_KEYS}
    calls = out["tool_calls"]
    if calls is not None:
        out["tool_calls"] = [_call_to_storage(call) for call in calls]
    content_parts(out)
    rest = {k: v for k, v in message.items() if k not in TYPED_KEYS}
    out["extra"] = json.dumps(rest, ensure_ascii=False) if rest else None
    return out


def is_storage_form(message: Any) -> bool:
    """Whether a message dict is a decoded ``MESSAGE_TYPE`` struct (every field as a key)."""
    return isinstance(message, dict) and message.keys() == _STORAGE_KEYS


_STORAGE_KEYS = frozenset(MESSAGE_TYPE.names)


def content_parts(out: dict[str, Any]) -> None:
    """Move list-of-parts ``content`` of a storage dict into ``parts`` (in place)."""
    content = out.get("content")
    if isinstance(content, list):
        error = located(f"message with role {out.get('role')!r}")
        out["parts"] = [part_to_storage(part, error, f"content[{j}]") for j, part in enumerate(content)]
        out["content"] = None


def _call_to_storage(call: dict[str, Any]) -> dict[str, Any]:
    function = dict(call.get("function") or {})
    arguments = function.get("arguments")
    if arguments is not None and not isinstance(arguments, str):
        arguments = json.dumps(arguments, separators=(",", ": "))
    return {
        "id": call.get("id"),
        "type": call.get("type"),
        "function": {"name": function.get("name"), "arguments": arguments},
    }


def message_from_storage(value: dict[str, Any]) -> dict[str, Any]:
    """The message dict a storage struct stands for: no invented None keys."""
    return _message(value["role"], *(value.get(name) for name in _FIELD_ORDER[1:]))


def decoded_content(value: dict[str, Any]) -> Any:
    """A storage struct's content: its text, or its list of part dicts."""
    parts = value.get("parts")
    return value["content"] if parts is None else [part_from_storage(part) for part in parts]


def messages_from_arrow(array: pa.Array | pa.ChunkedArray) -> list[list[dict[str, Any]]]:
    """``[[message_from_storage(m) for m in row] for row in array.to_pylist()]``, read field by field.

    ``array`` is a list-of-message-structs column (any subset of ``MESSAGE_TYPE``'s fields). Each field is
    converted to Python in one call and the message dicts are built from them, instead of a dict of every
    field per message first (half the time on whileai's rows). A column with null rows or null messages is
    read row by row, as ``to_pylist`` reads it (a null row is None).
    """
    if isinstance(array, pa.ChunkedArray):
        return [row for chunk in array.chunks for row in messages_from_arrow(chunk)]
    if pa.types.is_list(array.type) and isinstance(array.type.value_type, pa.JsonType):  # one object per message
        texts = array.cast(pa.list_(pa.string())).to_pylist()
        return [None if row is None else [None if m is None else json.loads(m) for m in row] for row in texts]
    if isinstance(array.type, pa.BaseExtensionType):
        array = array.storage
    flat = array.flatten() if array.null_count == 0 else None
    if flat is None or flat.null_count or not pa.types.is_struct(flat.type):
        return [None if row is None else [None if m is None else message_from_storage(m) for m in row]  # type: ignore[misc]
                for row in array.to_pylist()]
    names = {flat.type.field(i).name for i in range(flat.type.num_fields)}
    none = [None] * len(flat)
    fields = [flat.field(name).to_pylist() if name in names else none for name in _FIELD_ORDER]
    messages = [_message(*values) for values in zip(*fields)]
    bounds = array.offsets.to_numpy()
    bounds = (bounds - bounds[0]).tolist()
    return [messages[a:b] for a, b in pairwise(bounds)]


#: The struct fields ``_message`` takes, in its parameters' order.
_FIELD_ORDER = ("role", "content", "parts", "reasoning_content", "tool_calls", "name", "tool_call_id", "extra")


def _message(role: Any, content: Any, parts: Any, reasoning: Any, calls: Any, name: Any, call_id: Any,
             extra: Any) -> dict[str, Any]:
    """``message_from_storage`` of one message given as its fields (``_FIELD_ORDER``)."""
    out: dict[str, Any] = {"role": role, "content": content if parts is None else
                           [part_from_storage(part) for part in parts]}
    if reasoning is not None:
        out["reasoning_content"] = reasoning
    if calls is not None:
        out["tool_calls"] = calls
    if name is not None:
        out["name"] = name
    if call_id is not None:
        out["tool_call_id"] = call_id
    if extra is not None:
        out.update(json.loads(extra) if isinstance(extra, str) else extra)
    return out


@dataclass
class Message:
    """Feature type of one chat message (use as ``List(Message())``), registered with ``datasets``.

    Stored as an Arrow struct (``MESSAGE_TYPE``); decoded to a dict holding
    ``role`` and ``content`` plus only the keys the message had. Nothing this
    package hands a user uses it any more (a dataset whose features name it
    loads only where this package is imported: use ``message_feature()``); it
    stays so data saved by earlier releases, and code that builds with it, still work.

    Example:
        >>> from datasets import Dataset, Features, List
        >>> from whileai_datasets.rows.features import Message
        >>> ds = Dataset.from_dict(
        ...     {"messages": [[{"role": "user", "content": "hi"}]]},
        ...     features=Features({"messages": List(Message())}),
        ... )
        >>> ds[0]["messages"]
        [{'role': 'user', 'content': 'hi'}]
    """

    decode: bool = True
    id: str | None = field(default=None, repr=False)
    pa_type: ClassVar[pa.DataType] = MESSAGE_TYPE
    _type: str = field(default=FEATURE_TYPE_NAME, init=False, repr=False)

    def __call__(self) -> pa.DataType:
        return self.pa_type

    def encode_example(self, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return None
        return message_to_storage(value)

    def decode_example(
        self, value: dict[str, Any] | None, token_per_repo_id: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        if value is None:
            return None
        return message_from_storage(value)

    def cast_storage(self, storage: pa.Array) -> pa.StructArray:
        """Cast a struct array holding a subset of the fields to ``MESSAGE_TYPE``."""
        if storage.type == self.pa_type:
            return storage
        if not pa.types.is_struct(storage.type):
            raise TypeError(f"cannot cast {storage.type} to a message struct")
        names = {storage.type.field(i).name for i in range(storage.type.num_fields)}
        unknown = names - set(TYPED_KEYS) - {"extra", "parts"}
        if unknown:
            raise TypeError(
                f"message struct has fields {sorted(unknown)} that are not typed message keys; "
                "build rows with Message().encode_example so they land in 'extra'"
            )
        children = []
        for target in self.pa_type:
            if target.name in names:
                child = storage.field(target.name)
                children.append(array_cast(child, target.type) if child.type != target.type else child)
            else:
                children.append(pa.nulls(len(storage), target.type))
        return pa.StructArray.from_arrays(children, fields=list(self.pa_type), mask=storage.is_null())


register_feature(Message, FEATURE_TYPE_NAME)
