"""Arrow types and ``datasets`` features of the wire shapes.

OpenAI and Fireworks rows reuse ``Message`` (arguments are JSON text there).
TRL rows hold tool-call arguments as *values* (dicts, usually), because chat
templates render them with ``| tojson``; ``TrlMessage`` stores them as JSON
text in a ``pa.json_()`` field and decodes them back to the value, so
``ds[i]["messages"]`` is exactly the list whileai's ``to_trl`` writes.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa
from datasets.features.features import register_feature
from datasets.table import array_cast

from whileai_datasets.rows.features import MESSAGE_TYPE, OPTIONAL_KEYS, TYPED_KEYS, content_parts, decoded_content
from whileai_datasets.rows.parts import PART_TYPE

TRL_FUNCTION_TYPE = pa.struct([("name", pa.string()), ("arguments", pa.json_())])
TRL_TOOL_CALL_TYPE = pa.struct([("id", pa.string()), ("type", pa.string()), ("function", TRL_FUNCTION_TYPE)])
TRL_MESSAGE_TYPE = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("tool_calls", pa.list_(TRL_TOOL_CALL_TYPE)),
        ("name", pa.string()),
        ("tool_call_id", pa.string()),
        ("extra", pa.json_()),
        ("reasoning_content", pa.string()),
        ("parts", pa.list_(PART_TYPE)),
    ]
)
#: Fireworks preference rows: ``input`` is ``{"messages": [...], "tools": [...]}``.
FIREWORKS_INPUT_TYPE = pa.struct([("messages", pa.list_(MESSAGE_TYPE)), ("tools", pa.json_())])
TRL_FEATURE_TYPE_NAME = "WhileaiTrlMessage"


def trl_message_to_storage(message: dict[str, Any]) -> dict[str, Any]:
    """A TRL message dict (arguments as values) in ``TRL_MESSAGE_TYPE`` storage form."""
    out = {key: message.get(key) for key in TYPED_KEYS}
    calls = out["tool_calls"]
    if calls is not None:
        stored = []
        for call in calls:
            function = dict(call.get("function") or {})
            stored.append(
                {
                    "id": call.get("id"),
                    "type": call.get("type"),
                    "function": {
                        "name": function.get("name"),
                        "arguments": json.dumps(function.get("arguments"), ensure_ascii=False),
                    },
                }
            )
        out["tool_calls"] = stored
    content_parts(out)
    rest = {k: v for k, v in message.items() if k not in TYPED_KEYS}
    out["extra"] = json.dumps(rest, ensure_ascii=False) if rest else None
    return out


def trl_message_from_storage(value: dict[str, Any]) -> dict[str, Any]:
    """The TRL message a storage struct stands for: arguments decoded, no invented None keys."""
    out: dict[str, Any] = {"role": value["role"], "content": decoded_content(value)}
    for key in OPTIONAL_KEYS:
        item = value.get(key)
        if item is None:
            continue
        if key == "tool_calls":
            item = [_decode_call(call) for call in item]
        out[key] = item
    extra = value.get("extra")
    if extra is not None:
        out.update(json.loads(extra) if isinstance(extra, str) else extra)
    return out


def _decode_call(call: dict[str, Any]) -> dict[str, Any]:
    function = dict(call.get("function") or {})
    text = function.get("arguments")
    function["arguments"] = json.loads(text) if isinstance(text, str) else text
    return {**call, "function": function}


@dataclass
class TrlMessage:
    """Feature type of one TRL chat message (use as ``List(TrlMessage())``):
    ``Message`` with tool-call arguments stored as JSON and decoded to values."""

    decode: bool = True
    id: str | None = field(default=None, repr=False)
    pa_type: ClassVar[pa.DataType] = TRL_MESSAGE_TYPE
    _type: str = field(default=TRL_FEATURE_TYPE_NAME, init=False, repr=False)

    def __call__(self) -> pa.DataType:
        return self.pa_type

    def encode_example(self, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else trl_message_to_storage(value)

    def decode_example(
        self, value: dict[str, Any] | None, token_per_repo_id: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        return None if value is None else trl_message_from_storage(value)

    def cast_storage(self, storage: pa.Array) -> pa.Array:
        if storage.type == self.pa_type:
            return storage
        return array_cast(storage, self.pa_type)


with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=".*register_feature.*", category=UserWarning)
    register_feature(TrlMessage, TRL_FEATURE_TYPE_NAME)

__all__ = ["FIREWORKS_INPUT_TYPE", "MESSAGE_TYPE", "TRL_MESSAGE_TYPE", "TrlMessage"]
