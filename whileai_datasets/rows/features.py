"""``Message``: a chat message stored as a typed struct, decoded with its own keys.

Arrow structs have a fixed field set, so a user message read back from a plain
struct column carries ``tool_calls: None``, ``name: None`` and
``tool_call_id: None``. Chat templates test ``'tool_calls' in message`` or
``message.tool_calls is defined`` (Llama 3.1 does), so those invented keys
change the rendered text or raise. whileai never writes an explicit null for
those three keys (the key is absent), so "null means absent" is lossless, and
``Message.decode_example`` drops them. Any other per-message key rides in
``extra`` (a JSON object) and is merged back on decode.

``reasoning_content`` is a typed field too (null means absent), and content
given as a list of parts is stored in ``parts`` (``rows.parts.PART_TYPE``)
with a null ``content``; decoding gives the list of part dicts back as
``content``.

Storage stays columnar: ``pc.struct_field(messages.flatten(), "role")`` works on
the Arrow data, and ``with_format("arrow")`` never decodes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, ClassVar

import pyarrow as pa
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
    """A message dict in the struct's storage form (other keys into ``extra``)."""
    out = {key: message.get(key) for key in TYPED_KEYS}
    calls = out["tool_calls"]
    if calls is not None:
        out["tool_calls"] = [_call_to_storage(call) for call in calls]
    content_parts(out)
    rest = {k: v for k, v in message.items() if k not in TYPED_KEYS}
    out["extra"] = json.dumps(rest, ensure_ascii=False) if rest else None
    return out


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
    """Feature type of one chat message (use as ``List(Message())``).

    Stored as an Arrow struct (``MESSAGE_TYPE``); decoded to a dict holding
    ``role`` and ``content`` plus only the keys the message had.

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
