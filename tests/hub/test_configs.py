"""The configs publish builds from canonical rows (no server needed)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import Dataset, Features, Json, List, Value

from whileai_datasets.errors import PublishError, SchemaError
from whileai_datasets.hub import configs
from whileai_datasets.rows.features import Message

FEATURES = Features({"messages": List(Message()), "loss_mask": List(Value("int8")), "tools": Json(),
                     "prompt": Value("string"), "scenario_id": Value("string")})
CALL = {"id": "c1", "type": "function", "function": {"name": "look", "arguments": '{"id": 7}'}}
CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Find 7."},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "content": "found", "tool_call_id": "c1", "name": "look"},
    {"role": "assistant", "content": "It is 7."},
]


def _canonical(mask: list[int], messages: list[dict[str, Any]] = CONVERSATION) -> Any:
    ds = Dataset.from_dict({"messages": [messages], "loss_mask": [mask], "tools": [None], "prompt": ["Find 7."],
                            "scenario_id": ["s1"]}, features=FEATURES)
    return configs.canonical_table(ds, "split 'train'")


def _rows(table: Any) -> list[dict[str, Any]]:
    return [configs._portable.portable_features(table.schema).decode_example(r) for r in table.to_pylist()]


def test_default_config_has_one_row_per_marked_turn_with_the_turns_before_it_as_prompt():
    rows = _rows(configs.trainer_table(_canonical([0, 0, 1, 0, 1]), "split 'train'"))

    trl_call = {**CALL, "function": {"name": "look", "arguments": {"id": 7}}}
    assert [r["prompt"] for r in rows] == [CONVERSATION[:2], [*CONVERSATION[:2], {**CONVERSATION[2],
                                                                                   "tool_calls": [trl_call]},
                                                                CONVERSATION[3]]]
    assert [r["completion"] for r in rows] == [[{**CONVERSATION[2], "tool_calls": [trl_call]}], [CONVERSATION[4]]]
    assert [r["prompt_text"] for r in rows] == ["Find 7.", "Find 7."]  # never a `prompt` string beside messages
    assert "loss_mask" not in rows[0] and "messages" not in rows[0]


def test_default_config_of_a_final_mask_is_one_row_per_conversation():
    rows = _rows(configs.trainer_table(_canonical([0, 0, 0, 0, 1]), "split 'train'"))

    assert len(rows) == 1
    assert rows[0]["completion"] == [CONVERSATION[4]]
    assert len(rows[0]["prompt"]) == 4


def test_every_config_uses_only_built_in_feature_types():
    from whileai_datasets.columnar._portable import registered_feature_types

    canonical = _canonical([0, 0, 1, 0, 1])
    tables = {"default": (configs.trainer_table(canonical, "x"), ("prompt", "completion")),
              "canonical": (configs.canonical_rows(canonical), ("messages",))}
    for name, (table, message_columns) in tables.items():
        features = configs._portable.portable_features(table.schema)
        assert registered_feature_types(features) == {}, name
        assert [features[c] for c in message_columns] == [List(Json())] * len(message_columns), name


def test_canonical_config_keeps_each_messages_own_keys():
    rows = _rows(configs.canonical_rows(_canonical([0, 0, 1, 0, 1])))

    assert rows[0]["messages"] == CONVERSATION
    assert rows[0]["loss_mask"] == [0, 0, 1, 0, 1]


def test_a_mask_on_a_user_message_is_refused_with_its_location():
    with pytest.raises(SchemaError, match=r"split 'train', row 0, messages\[1\]: loss_mask marks a 'user' message"):
        _canonical([0, 1, 0, 0, 1])


def test_a_marked_turn_that_opens_the_conversation_is_refused():
    with pytest.raises(PublishError, match=r"row 0, messages\[0\]: a loss-carrying assistant turn opens its conv"):
        _canonical([1, 0], [{"role": "assistant", "content": "Hi."}, {"role": "user", "content": "Yo"}])


def test_errors_in_a_later_chunk_name_the_row_in_the_split():
    from whileai_datasets.hub.reading import read_all

    ds = Dataset.from_dict({"messages": [CONVERSATION], "loss_mask": [[0, 1, 0, 0, 1]], "tools": [None],
                            "prompt": ["Find 7."], "scenario_id": ["s1"]}, features=FEATURES)

    with pytest.raises(SchemaError, match=r"split 'train', row 4096, messages\[1\]: loss_mask marks a 'user'"):
        configs.canonical_chunk(read_all(ds), "split 'train'", first_row=4096)


def test_a_mask_of_the_wrong_length_is_refused():
    with pytest.raises(SchemaError, match=r"row 0: loss_mask has 2 entries for 5 messages"):
        _canonical([0, 1])


def test_trl_rows_and_json_rows_come_back_to_the_same_canonical_messages():
    from whileai_datasets.columnar import _arrow, _portable
    from whileai_datasets.transforms import wire

    canonical = _canonical([0, 0, 1, 0, 1])
    trl_lists = wire.trl_messages(_arrow.column(canonical, "messages"))
    json_lists = _portable.portable_messages(_arrow.column(canonical, "messages"))

    for lists in (trl_lists, json_lists):
        back = configs.message_structs(lists, "x")
        assert back.to_pylist() == _arrow.column(canonical, "messages").to_pylist()


def test_publish_refuses_a_split_with_no_loss_carrying_turn_before_any_request():
    from whileai_datasets.hub import streaming

    ds = Dataset.from_dict({"messages": [CONVERSATION], "loss_mask": [[0, 0, 0, 0, 0]], "tools": [None],
                            "prompt": ["Find 7."], "scenario_id": ["s1"]}, features=FEATURES)

    with pytest.raises(PublishError, match=r"split 'holdout': the 'default' config would have no rows in split "
                                           r"'holdout'.*check the export's mask_mode"):
        streaming.survey({"holdout": ds}, configs.Extras())


def _image_turn(url: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": "And this?"}, {"type": "image", "image": url}]}


def test_content_parts_and_reasoning_content_publish_in_every_config():
    conversation = [_image_turn("https://x.test/a.png"),
                    {"role": "assistant", "content": "A cat.", "reasoning_content": "It has whiskers."},
                    _image_turn("https://x.test/b.png"), {"role": "assistant", "content": "A dog."}]
    canonical = _canonical([0, 1, 0, 1], conversation)

    default = _rows(configs.trainer_table(canonical, "x"))
    rows = _rows(configs.canonical_rows(canonical))

    assert rows[0]["messages"] == conversation  # exactly, references and reasoning included
    placeholder = {"role": "user", "content": [{"type": "text", "text": "And this?"}, {"type": "image"}]}
    assert [r["prompt"] for r in default] == [[placeholder], [placeholder, conversation[1], placeholder]]
    assert [r["completion"] for r in default] == [conversation[1:2], conversation[3:]]
    # TRL's vision format: each row's `images` fill its prompt's placeholders, in order, and no more
    first, second = "https://x.test/a.png", "https://x.test/b.png"
    assert [r["images"] for r in default] == [[first], [first, second]]


def test_the_streaming_build_makes_every_registry_config_chunk_by_chunk(tmp_path, monkeypatch):
    """messages, sharegpt and the trainer gaps built per chunk equal the whole split's, with the first
    gap located in the split (not in its chunk), and every registry config is made."""
    from whileai_datasets.hub import streaming, trainer_formats, trainer_gaps

    plain, doubled = CONVERSATION, [*CONVERSATION, {"role": "assistant", "content": "Done."}]
    rows = [(plain, [0, 0, 1, 0, 1])] * 3 + [(doubled, [0, 0, 1, 0, 1, 1]), (plain, [0, 0, 0, 0, 1])]
    ds = Dataset.from_dict({"messages": [m for m, _ in rows], "loss_mask": [k for _, k in rows],
                            "tools": [None] * 5, "prompt": ["Find 7."] * 5, "scenario_id": ["s1"] * 5},
                           features=FEATURES)
    whole = configs.canonical_table(ds, "split 'train'")
    monkeypatch.setattr(streaming, "CHUNK_ROWS", 2)
    shards: list[streaming.Shard] = []

    built = streaming.build(configs.planned(configs.Extras()), {"rows": {"train": ds}}, tmp_path, 1 << 30,
                            shards.append)

    by_name = {c.name: c for c in built.configs}
    assert list(by_name) == [spec.name for spec in configs.REGISTRY if spec.name in by_name]
    assert {"default", "canonical", "messages", "sharegpt"} == set(by_name)
    written = {s.path.split("/")[0]: pa.concat_tables(pq.read_table(t.local) for t in built.shards
                                                       if t.path.startswith(s.path.split("/")[0] + "/"))
               for s in built.shards}
    assert len(shards) == len(built.shards) == 4  # one shard per config (the limit is never reached)
    assert written["sharegpt"].to_pylist() == trainer_formats.sharegpt_chunk(whole, "x").to_pylist()
    assert written["messages"].to_pylist() == trainer_formats.messages_chunk(whole, "x").to_pylist()
    assert by_name["sharegpt"].rows == {"train": 10}
    assert by_name["messages"].facts["train"] == {"rows": 5, **trainer_formats.messages_facts(
        trainer_formats.messages_chunk(whole, "x"))}
    assert built.gaps == trainer_gaps.merge_gaps([trainer_gaps.chunk_gaps(whole, "split 'train'")])
    assert built.gaps["ms-swift"]["consecutive_assistant_turns"] == {
        "rows": 1, "first": "split 'train', row 3, messages[5]"}


def test_without_a_tokenizer_the_default_config_counts_what_trl_may_misread_and_joins_parts_only_when_asked():
    from whileai_datasets.hub import facts

    conversation = [{"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
                    {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]},
                    _image_turn("https://x.test/a.png"), {"role": "assistant", "content": "A cat."}]
    canonical = _canonical([0, 1, 0, 1], conversation)
    table = configs.trainer_table(canonical, "x")
    # both rows hold parts; the second's prompt has an image, so the config is TRL's vision format
    assert facts.unmeasured_facts(table, canonical) == {"vision_rows": 2, "parts_rows": 2}
    joined = _rows(configs.trainer_table(canonical, "x", images=False, join_parts=True))
    # a template that concatenates strings is handed text-only parts as one string (as tokenize hands them);
    # content with an image stays parts
    assert joined[0]["prompt"] == [{"role": "user", "content": "Hi there"}]
    assert joined[0]["completion"] == [{"role": "assistant", "content": "Hello."}]
    assert joined[1]["prompt"][2]["content"][1] == {"type": "image"}
    assert facts.unmeasured_facts(configs.trainer_table(canonical, "x", images=False), canonical)["vision_rows"] == 0
