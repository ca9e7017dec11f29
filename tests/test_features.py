"""The Message feature: typed storage, decoded with exactly the message's keys."""

from __future__ import annotations

import pyarrow as pa
from datasets import Dataset, Features, List

from whileai_datasets import Message
from whileai_datasets.rows.features import MESSAGE_TYPE

MESSAGES = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "hi"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}],
    },
    {"role": "tool", "content": "out", "name": "f", "tool_call_id": "c1"},
    {"role": "assistant", "content": "done", "weight": 0, "reasoning_content": "because"},
]


def _dataset() -> Dataset:
    return Dataset.from_dict({"messages": [MESSAGES]}, features=Features({"messages": List(Message())}))


def test_messages_decode_with_exactly_their_own_keys() -> None:
    assert _dataset()[0]["messages"] == MESSAGES


def test_other_keys_are_stored_in_extra_and_the_rest_is_typed() -> None:
    table = _dataset().with_format("arrow")[:]
    assert table.schema.field("messages").type == pa.list_(MESSAGE_TYPE)
    extra = table["messages"].combine_chunks().flatten().field("extra").to_pylist()
    assert extra == [None, None, None, None, '{"weight": 0}']  # reasoning_content is a typed field (issue 15)
    reasoning = table["messages"].combine_chunks().flatten().field("reasoning_content").to_pylist()
    assert reasoning == [None, None, None, None, "because"]


def test_decoding_survives_a_python_map() -> None:
    again = _dataset().map(lambda batch: batch, batched=True)
    assert again[0]["messages"] == MESSAGES


def test_arrow_format_never_decodes() -> None:
    row = _dataset().with_format("arrow")[0]
    assert row["messages"][0][0]["tool_calls"].as_py() is None


def test_cast_storage_fills_missing_fields_with_null() -> None:
    partial = pa.array([{"role": "user", "content": "x"}], pa.struct([("role", pa.string()), ("content", pa.string())]))
    cast = Message().cast_storage(partial)
    assert cast.type == MESSAGE_TYPE
    assert Message().decode_example(cast.to_pylist()[0]) == {"role": "user", "content": "x"}
