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


def _decoded_row_by_row(array: pa.Array | pa.ChunkedArray) -> list[object]:
    from whileai_datasets.rows.features import message_from_storage

    return [None if row is None else [message_from_storage(m) for m in row] for row in array.to_pylist()]


def test_messages_read_field_by_field_equal_the_row_by_row_decode() -> None:
    from whileai_datasets.rows.features import messages_from_arrow

    parts = {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url",
                                                                            "image_url": {"url": "u"}}]}
    rows = [MESSAGES, [], [parts, {"role": "assistant", "content": None, "tool_calls": MESSAGES[2]["tool_calls"]}],
            MESSAGES[::-1], [{"role": "user", "content": "x", "note": None, "tags": ["a"]}]]
    table = Dataset.from_dict({"messages": rows}, features=Features({"messages": List(Message())})) \
        .with_format("arrow")[:]
    column = table["messages"]
    chunked = pa.chunked_array([column.combine_chunks().slice(0, 2), column.combine_chunks().slice(2)])
    for array in (column, column.combine_chunks().slice(1, 3), chunked):
        decoded = messages_from_arrow(array)
        assert decoded == _decoded_row_by_row(array)
        # the same keys in the same order: templates may loop over a message's items
        assert [[list(m) for m in row] for row in decoded] == [[list(m) for m in row] for row in
                                                               _decoded_row_by_row(array)]
    assert messages_from_arrow(column)[2][0]["content"] == parts["content"]


def test_messages_of_a_struct_with_fewer_fields_or_null_rows_decode_as_row_by_row() -> None:
    from whileai_datasets.rows.features import messages_from_arrow

    fewer = pa.array([[{"role": "user", "content": "hi"}, {"role": "assistant", "content": None}], []],
                     pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])))
    assert messages_from_arrow(fewer) == [[{"role": "user", "content": "hi"},
                                           {"role": "assistant", "content": None}], []]
    with_nulls = pa.array([[{"role": "user", "content": "hi"}], None], fewer.type)
    assert messages_from_arrow(with_nulls) == [[{"role": "user", "content": "hi"}], None]  # as to_pylist has it


def test_tokenize_refuses_a_row_whose_messages_are_null_naming_it() -> None:
    import pytest

    from tests.support.tiny_lm import train_tokenizer, trl_template
    from whileai_datasets import SchemaError
    from whileai_datasets.tokenize.token_masks import tokenize

    tokenizer = train_tokenizer(["hi there", "be brief"], chat_template=trl_template("qwen2_5"))
    rows = [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], None]
    from whileai_datasets.rows.features import message_to_storage, storage_type

    stored = [None if row is None else [message_to_storage(m) for m in row] for row in rows]
    table = pa.table({"messages": pa.array(stored, pa.list_(storage_type(MESSAGE_TYPE))).cast(pa.list_(MESSAGE_TYPE)),
                      "loss_mask": pa.array([[0, 1], None], pa.list_(pa.int8()))})
    with pytest.raises(SchemaError, match=r"row 1 of the batch has no 'messages' \(null\).*ds.filter"):
        tokenize(tokenizer)(table)
    with pytest.raises(SchemaError, match=r"row 41 has no 'messages' \(null\)"):
        tokenize(tokenizer)(table, indices=[40, 41])  # ds.map(..., with_indices=True): the dataset's numbers


def test_tokenize_refuses_a_row_whose_tools_are_not_json_naming_it_and_the_place() -> None:
    import pytest

    from tests.support.tiny_lm import train_tokenizer, trl_template
    from whileai_datasets import SchemaError
    from whileai_datasets.rows.features import message_to_storage, storage_type
    from whileai_datasets.tokenize.token_masks import tokenize

    tokenizer = train_tokenizer(["hi there", "be brief"], chat_template=trl_template("qwen2_5"))
    row = [message_to_storage(m) for m in [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]]
    table = pa.table({"messages": pa.array([row, row, row], pa.list_(storage_type(MESSAGE_TYPE))),
                      "loss_mask": pa.array([[0, 1]] * 3, pa.list_(pa.int8())),
                      "tools": pa.array(["[]", None, '[{"type": "function",'])})
    with pytest.raises(SchemaError, match=r"row 2 of the batch: its 'tools' is not JSON \(.* at character 21\)"):
        tokenize(tokenizer)(table)
    with pytest.raises(SchemaError, match=r"row 12: its 'tools' is not JSON"):
        tokenize(tokenizer)(table, indices=[10, 11, 12])
    assert tokenize(tokenizer)(table.slice(0, 2)).num_rows == 2  # the good rows tokenize
