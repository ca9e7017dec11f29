"""The per-chunk builders of the configs other trainers read, and the per-trainer report of rows
they cannot train exactly (no server: the Hub round trip is in test_trainer_configs.py).

The sharegpt checks compare with `lf_reference` below, a plain per-row reading of LLaMA-Factory's
sharegpt rules (its docs and data/converter.py), written independently of the column-wise builder.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from datasets import Dataset, load_dataset

from tests.conftest import SYSTEM_PROMPT, TOOLS, seeded_rows, write_jsonl
from tests.transforms.conftest import messages_table
from whileai_datasets.columnar import _arrow
from whileai_datasets.errors import SchemaError
from whileai_datasets.hub import configs, trainer_formats, trainer_gaps

SYSTEM = {"role": "system", "content": "You book rooms."}
BOOK = [{"type": "function", "function": {"name": "book", "parameters": {"type": "object"}}}]


def _call(call_id: str, arguments: dict[str, Any], name: str = "book") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _assistant(text: str, *calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **({"tool_calls": list(calls)} if calls else {})}


def _tool(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "content": text, "tool_call_id": call_id, "name": "book"}


def _table(rows: list[tuple[list[dict[str, Any]], list[int]]], tools: Any = BOOK) -> pa.Table:
    """Canonical rows by hand: (messages, loss_mask) pairs, the same tools on each."""
    table = messages_table([m for m, _ in rows])
    table = table.append_column("loss_mask", pa.array([mask for _, mask in rows], pa.list_(pa.int8())))
    text = None if tools is None else json.dumps(tools)
    return table.append_column("tools", pa.array([text] * len(rows), pa.string()).cast(pa.json_()))


@pytest.fixture(scope="module")
def rollouts(tmp_path_factory: pytest.TempPathFactory) -> pa.Table:
    """Canonical rows of whileai's seeded agent, every assistant turn marked."""
    folder = tmp_path_factory.mktemp("rollouts")
    source = write_jsonl(folder / "rows.jsonl", seeded_rows(seed=3, mode="rl", repeats=2, budget=16))
    ds = load_dataset("whileai/export", data_files=str(source), split="train", system_prompt=SYSTEM_PROMPT,
                      tools=TOOLS, mask_mode="assistant", cache_dir=str(folder / "cache"))
    return configs.canonical_table(ds, "split 'train'")


def _decoded(table: pa.Table) -> list[dict[str, Any]]:
    return list(Dataset(table))  # rows decode Json on every release; to_list() gives its text on 4.x


# --- an independent reading of LLaMA-Factory's sharegpt rules -------------------------------------------
def _lf_value(message: dict[str, Any]) -> str:
    calls = [{"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
             for c in message.get("tool_calls") or []]
    if not calls:
        return message["content"] or ""
    payload = json.dumps(calls[0] if len(calls) == 1 else calls)
    return f"{message['content']}<tool_call>{payload}</tool_call>" if message["content"] else payload


def lf_reference(messages: list[dict[str, Any]], mask: list[int], tools: Any) -> list[dict[str, Any]]:
    """One sharegpt row per marked turn, built message by message."""
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    body = messages[1:] if system or (messages and messages[0]["role"] == "system") else messages
    start = len(messages) - len(body)
    rows = []
    for end, flag in enumerate(mask):
        if not flag:
            continue
        turns: list[dict[str, str]] = []
        for message in body[:end - start + 1]:
            tag = {"user": "human", "tool": "observation", "system": "system"}.get(message["role"])
            tag = tag or ("function_call" if message.get("tool_calls") else "gpt")
            if tag == "observation" and turns and turns[-1]["from"] == "observation":
                turns[-1]["value"] += "\n</tool_response>\n<tool_response>\n" + message["content"]
            else:
                turns.append({"from": tag, "value": _lf_value(message)})
        rows.append({"conversations": turns, "system": system, "tools": json.dumps(tools) if tools else ""})
    return rows


# --- messages -----------------------------------------------------------------------------------------
def test_messages_weight_and_loss_are_the_loss_mask_of_every_message(rollouts):
    built = trainer_formats.messages_chunk(rollouts, "split 'train'")

    rows = _decoded(built)
    source = _decoded(rollouts)
    assert len(rows) == len(source)  # every seeded row marks a turn
    for row, canonical in zip(rows, source):
        assert [m["weight"] for m in row["messages"]] == canonical["loss_mask"]
        assert [m["loss"] for m in row["messages"]] == [bool(f) for f in canonical["loss_mask"]]
        assert [m["role"] for m in row["messages"]] == [m["role"] for m in canonical["messages"]]
        assert row["tools"] == TOOLS and "loss_mask" not in row
    calls = [c for row in rows for m in row["messages"] for c in m.get("tool_calls") or []]
    assert calls and all(isinstance(c["function"]["arguments"], dict) for c in calls)
    assert trainer_formats.messages_facts(built)["weighted_messages"] == sum(sum(r["loss_mask"]) for r in source)


def test_messages_leaves_out_rows_that_mark_nothing_and_keeps_the_rest_whole():
    table = _table([([SYSTEM, _user("a"), _assistant("x")], [0, 0, 0]),
                    ([SYSTEM, _user("b"), _assistant("y"), _user("c"), _assistant("z")], [0, 0, 0, 0, 1])])

    rows = _decoded(trainer_formats.messages_chunk(table, "t"))

    assert [[(m["content"], m["weight"]) for m in r["messages"]] for r in rows] == [
        [("You book rooms.", 0), ("b", 0), ("y", 0), ("c", 0), ("z", 1)]]


def test_messages_chunks_concatenate_to_the_whole(rollouts):
    whole = trainer_formats.messages_chunk(rollouts, "w")
    parts = [trainer_formats.messages_chunk(rollouts.slice(i, 1), "w") for i in range(rollouts.num_rows)]

    assert pa.concat_tables(parts).to_pylist() == whole.to_pylist()


def test_a_loss_mask_of_the_wrong_length_is_refused_with_its_row():
    table = _table([([_user("a"), _assistant("x")], [0, 1]), ([_user("b"), _assistant("y")], [1])])

    with pytest.raises(SchemaError, match=r"split 'x', row 1: loss_mask has 1 entries for 2 messages"):
        trainer_formats.messages_chunk(table, "split 'x'")


# --- sharegpt -----------------------------------------------------------------------------------------
def test_sharegpt_has_one_row_per_marked_turn_ending_at_it(rollouts):
    built = trainer_formats.sharegpt_chunk(rollouts, "split 'train'")

    source = _decoded(rollouts)
    expected = [row for r in source for row in lf_reference(r["messages"], r["loss_mask"], r["tools"])]
    assert built.num_rows == sum(sum(r["loss_mask"]) for r in source)
    assert [json.loads(r["tools"]) for r in built.to_pylist()] == [json.loads(r["tools"]) for r in expected]
    assert [(r["conversations"], r["system"]) for r in built.to_pylist()] == [
        (r["conversations"], r["system"]) for r in expected]
    assert all(r["conversations"][-1]["from"] in ("gpt", "function_call") for r in built.to_pylist())
    assert {str(f.type) for f in built.schema} <= {"string", "list<item: struct<from: string, value: string>>"}


def test_sharegpt_writes_calls_as_llama_factory_reads_them():
    parallel = _assistant("", _call("c1", {"room": 1}), _call("c2", {"room": 2}))
    beside = _assistant("Booking now.", _call("c3", {"room": 3}))
    table = _table([([SYSTEM, _user("book two"), parallel, _tool("c1", "ok 1"), _tool("c2", "ok 2"),
                      _assistant("Done."), _user("and one"), beside], [0, 0, 1, 0, 0, 1, 0, 1])], tools=None)

    rows = trainer_formats.sharegpt_chunk(table, "t").to_pylist()

    last = rows[-1]["conversations"]
    assert [t["from"] for t in last] == ["human", "function_call", "observation", "gpt", "human", "function_call"]
    assert json.loads(last[1]["value"]) == [{"name": "book", "arguments": {"room": 1}},
                                            {"name": "book", "arguments": {"room": 2}}]
    assert last[2]["value"] == "ok 1\n</tool_response>\n<tool_response>\nok 2"
    assert last[5]["value"] == 'Booking now.<tool_call>{"name": "book", "arguments": {"room": 3}}</tool_call>'
    assert [len(r["conversations"]) for r in rows] == [2, 4, 6]
    assert rows[0]["system"] == "You book rooms." and rows[0]["tools"] == ""


def test_sharegpt_of_a_row_without_a_system_message_has_an_empty_system():
    table = _table([([_user("a"), _assistant("x")], [0, 1]), ([SYSTEM, _user("b"), _assistant("y")], [0, 0, 1])])

    rows = trainer_formats.sharegpt_chunk(table.slice(0), "t").to_pylist()

    assert [r["system"] for r in rows] == ["", "You book rooms."]
    assert [r["conversations"] for r in rows] == [[{"from": "human", "value": "a"}, {"from": "gpt", "value": "x"}],
                                                  [{"from": "human", "value": "b"}, {"from": "gpt", "value": "y"}]]


def test_sharegpt_of_a_sliced_chunk_matches_the_reference(rollouts):
    sliced = rollouts.slice(1)

    rows = trainer_formats.sharegpt_chunk(sliced, "t").to_pylist()

    source = _decoded(sliced)
    expected = [row for r in source for row in lf_reference(r["messages"], r["loss_mask"], r["tools"])]
    assert [r["conversations"] for r in rows] == [r["conversations"] for r in expected]


# --- labels -------------------------------------------------------------------------------------------
def test_labels_are_the_ids_where_the_mask_is_set_and_minus_100_elsewhere():
    tokenized = pa.table({"input_ids": pa.array([[5, 6, 7, 8], [9, 10]], pa.list_(pa.int64())),
                          "assistant_masks": pa.array([[0, 1, 1, 0], [1, 1]], pa.list_(pa.int64()))})

    out = trainer_formats.labels_chunk(tokenized.slice(0), "t")

    assert out.column("labels").to_pylist() == [[-100, 6, 7, -100], [9, 10]]
    assert trainer_formats.labels_facts(out) == {"labels": 6, "trained_labels": 4}


def test_labels_refuse_masks_that_do_not_fit_the_ids():
    tokenized = pa.table({"input_ids": pa.array([[5, 6]], pa.list_(pa.int64())),
                          "assistant_masks": pa.array([[1]], pa.list_(pa.int64()))})

    with pytest.raises(SchemaError, match=r"split 'x', row 0: assistant_masks and input_ids differ in length"):
        trainer_formats.labels_chunk(tokenized, "split 'x'")


# --- what each trainer cannot express ---------------------------------------------------------------
def _gaps(table: pa.Table) -> dict[str, dict[str, int]]:
    found = trainer_gaps.merge_gaps([trainer_gaps.chunk_gaps(table, "split 'train'")])
    return {trainer: {shape: hit["rows"] for shape, hit in shapes.items() if hit["rows"]}
            for trainer, shapes in found.items()}


def test_rows_every_trainer_reads_exactly_report_nothing(rollouts):
    plain = [SYSTEM, _user("a"), _assistant("x"), _user("b"), _assistant("y")]
    calls = [_user("a"), _assistant("", _call("c1", {"r": 1}), _call("c2", {"r": 2})), _tool("c1", "1"),
             _tool("c2", "2"), _assistant("", _call("c3", {"r": 3})), _tool("c3", "3"), _assistant("done")]
    table = _table([(plain, [0, 0, 1, 0, 1]), (plain, [0, 0, 0, 0, 1]), (calls, [0, 1, 0, 0, 1, 0, 1])])

    assert _gaps(table) == {trainer: {} for trainer in trainer_gaps.EFFECTS}
    assert _gaps(rollouts) == {trainer: {} for trainer in trainer_gaps.EFFECTS}


def test_two_assistant_turns_in_a_row_are_reported_for_llama_factory_and_ms_swift():
    doubled = [SYSTEM, _user("a"), _assistant("x"), _assistant("y"), _user("b"), _assistant("z")]
    table = _table([([_user("ok"), _assistant("fine")], [0, 1]), (doubled, [0, 0, 1, 1, 0, 1])])

    found = trainer_gaps.merge_gaps([trainer_gaps.chunk_gaps(table, "split 'train'", offset=10)])

    # LLaMA-Factory: rows ending at "y" and at "z" hold the pair; the one ending at "x" does not
    assert found["llama-factory"]["consecutive_assistant_turns"] == {
        "rows": 2, "first": "split 'train', row 11, messages[3]"}
    assert found["llama-factory"]["broken_alternation"]["rows"] == 0
    assert found["ms-swift"]["consecutive_assistant_turns"] == {"rows": 1,
                                                               "first": "split 'train', row 11, messages[3]"}
    assert found["axolotl"]["empty_marked_turn"]["rows"] == 0


def test_other_alternation_breaks_are_reported_for_llama_factory_only():
    two_users = [_user("a"), _user("again"), _assistant("x")]
    late_system = [_user("a"), _assistant("x"), SYSTEM, _user("b"), _assistant("y")]
    opens = [_assistant("hello"), _user("a"), _assistant("x")]
    table = _table([(two_users, [0, 0, 1]), (late_system, [0, 1, 0, 0, 1]), (opens, [0, 0, 1])])

    assert _gaps(table) == {"llama-factory": {"broken_alternation": 3}, "ms-swift": {}, "axolotl": {}}


def test_text_beside_a_tool_call_is_reported_for_llama_factory_and_ms_swift():
    beside = [_user("a"), _assistant("Let me book.", _call("c1", {"r": 1})), _tool("c1", "ok"), _assistant("done")]
    table = _table([(beside, [0, 1, 0, 1]), (beside, [0, 0, 0, 1])])

    assert _gaps(table) == {"llama-factory": {"text_beside_tool_call": 3}, "ms-swift": {"text_beside_tool_call": 2},
                            "axolotl": {}}


def test_an_empty_marked_turn_is_reported_for_axolotl():
    table = _table([([_user("a"), _assistant(""), _user("b"), _assistant("y")], [0, 1, 0, 1]),
                    ([_user("a"), _assistant(""), _user("b"), _assistant("y")], [0, 0, 0, 1])])

    found = trainer_gaps.merge_gaps([trainer_gaps.chunk_gaps(table, "split 'train'")])

    assert found["axolotl"]["empty_marked_turn"] == {"rows": 1, "first": "split 'train', row 0, messages[1]"}
    assert sum(hit["rows"] for hit in found["llama-factory"].values()) == 0


def test_the_trainer_report_names_each_config_and_only_the_shapes_found():
    table = _table([([_user("a"), _assistant("x"), _assistant("y")], [0, 1, 1])])
    gaps = trainer_gaps.merge_gaps([trainer_gaps.chunk_gaps(table, "split 'train'")])

    report = trainer_gaps.trainer_report(gaps, {"messages": 1, "sharegpt": 2})

    assert report["axolotl"] == {"config": "messages", "rows": 1, "unit": "conversations", "exact": True,
                                 "inexact": {}}
    assert report["llama-factory"]["inexact"]["consecutive_assistant_turns"]["rows"] == 1
    assert "skips the row" in report["llama-factory"]["inexact"]["consecutive_assistant_turns"]["effect"]
    assert report["ms-swift"]["exact"] is False


def test_gaps_of_chunks_add_up_to_the_gaps_of_the_whole():
    doubled = [_user("a"), _assistant("x"), _assistant("y")]
    empty = [_user("a"), _assistant("")]
    table = _table([(doubled, [0, 1, 1]), (empty, [0, 1]), (doubled, [0, 0, 1])])

    whole = trainer_gaps.merge_gaps([trainer_gaps.chunk_gaps(table, "s")])
    parts = trainer_gaps.merge_gaps(trainer_gaps.chunk_gaps(table.slice(i, 1), "s", offset=i) for i in range(3))

    assert parts == whole
    flat = trainer_gaps.gap_facts(table, table)
    assert flat["llama-factory/consecutive_assistant_turns"] == whole["llama-factory"]["consecutive_assistant_turns"][
        "rows"] == 2
    assert flat["axolotl/empty_marked_turn"] == 1 and len(flat) == sum(map(len, trainer_gaps.EFFECTS.values()))


def test_gaps_of_a_chunk_moved_to_its_place_are_the_gaps_found_there():
    doubled = [_user("a"), _assistant("x"), _assistant("y")]
    empty = [_user("a"), _assistant("")]
    table = _table([([_user("ok"), _assistant("fine")], [0, 1]), (doubled, [0, 1, 1]), (empty, [0, 1])])

    moved = trainer_gaps.shift_rows(trainer_gaps.chunk_gaps(table, "split 'row 3, a'"), 4096)

    assert moved == trainer_gaps.chunk_gaps(table, "split 'row 3, a'", offset=4096)
    assert moved["axolotl"]["empty_marked_turn"]["first"] == "split 'row 3, a', row 4098, messages[1]"
    assert moved["ms-swift"]["text_beside_tool_call"] == {"rows": 0, "first": None}


def test_weighted_messages_are_counted_even_when_arguments_mention_a_weight():
    calls = _assistant("", _call("c1", {"weight": 1, "loss": True}))
    table = _table([([_user('"weight": 1, "loss": true}'), calls, _tool("c1", "ok"), _assistant("x")], [0, 1, 0, 0])])

    facts = trainer_formats.messages_facts(trainer_formats.messages_chunk(table, "t"))

    assert facts == {"messages": 4, "weighted_messages": 1}


def test_marked_messages_of_a_chunk_are_the_flattened_loss_mask():
    table = _table([([_user("a"), _assistant("x")], [0, 1]), ([_user("b"), _assistant("y")], [0, 0])])

    assert trainer_formats.marked_messages(table.slice(1), "t").tolist() == [False, False]
    assert _arrow.lengths(table.column("messages").combine_chunks()).tolist() == [2, 2]
