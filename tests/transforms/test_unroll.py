"""unroll and loss_mask against whileai's _unroll and loss_mask."""

from __future__ import annotations

import json
from typing import Any

import datasets
import pyarrow as pa
import pytest

from whileai_datasets import transforms as wai_transforms
from whileai_datasets.errors import OptionError, SchemaError
from whileai_datasets.transforms import masks, unrolling

from .conftest import all_rows, canonical, edge_rows, messages_table, reference, written

UNROLL_KEYS = ("messages", "loss_mask", "unroll", "lineage", "tool_output_truncated", "tool_output_chars_cut")


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return all_rows()


def test_unrolled_samples_equal_whileai(rows: list[dict[str, Any]]) -> None:
    table = wai_transforms.truncate_tool_output(40)(canonical(rows))
    ours = written(wai_transforms.to_openai(wai_transforms.unroll(table)))
    theirs = reference(rows, strip_think=False, unroll=True, max_tool_output_chars=40)
    assert [{k: r.get(k) for k in UNROLL_KEYS} for r in ours] == [{k: r.get(k) for k in UNROLL_KEYS} for r in theirs]


def test_unroll_keeps_every_other_column_per_sample(rows: list[dict[str, Any]]) -> None:
    table = canonical(rows)
    out = wai_transforms.unroll(table)
    turns = [sum(m["role"] == "assistant" for m in row) or 1 for row in table.column("messages").to_pylist()]
    expected = [value for value, n in zip(table.column("reward").to_pylist(), turns) for _ in range(n)]
    assert out.column("reward").to_pylist() == expected


@pytest.mark.parametrize(
    ("lineage", "merged"),
    [
        (None, {}),
        ({}, {}),
        ({"a": 1, "nested": {"b": [1, 2]}}, {"a": 1, "nested": {"b": [1, 2]}}),
        ({"unrolled_from": "old", "z": None}, {"z": None}),
        ({"note": 'a "unrolled_from" mention'}, {"note": 'a "unrolled_from" mention'}),
    ],
)
def test_lineage_merge_keeps_the_rows_lineage(lineage: Any, merged: dict[str, Any]) -> None:
    row = {
        "prompt": "ask",
        "rollout_index": 4,
        "scenario_id": "s-1",
        "lineage": lineage,
        "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
    }
    [ours] = written(wai_transforms.to_openai(wai_transforms.unroll(canonical([row]))))
    [theirs] = reference([row], unroll=True)
    assert ours["lineage"] == theirs["lineage"]
    assert {k: v for k, v in ours["lineage"].items() if k != "unrolled_from"} == merged


def test_merge_lineage_on_text_equals_a_json_merge() -> None:
    texts = ['{"a": 1}', " { } ", '{"a": {"unrolled_from": 1}}', None, '{"x": "}"}  ']
    source = pa.array(['{"prompt_sha1": "abc", "rollout_index": null}'] * len(texts))
    merged = unrolling.merge_lineage(pa.array(texts, pa.string()).cast(pa.json_()), source).storage.to_pylist()
    expected = [
        {**json.loads(t or "{}"), "unrolled_from": {"prompt_sha1": "abc", "rollout_index": None}} for t in texts
    ]
    assert [json.loads(m) for m in merged] == expected


def test_a_conversation_with_no_assistant_turn_is_one_sample_as_it_stands() -> None:
    table = messages_table([[{"role": "user", "content": "hello?"}]], loss_mask=[[0]])
    out = wai_transforms.unroll(table).to_pylist()
    assert len(out) == 1 and out[0]["unroll"] is None and out[0]["loss_mask"] == [0]
    assert out[0]["messages"] == table.column("messages").to_pylist()[0]


def test_null_message_lists_stay_null() -> None:
    table = messages_table([None, [{"role": "assistant", "content": "a"}]])
    out = wai_transforms.unroll(table).to_pylist()
    assert [r["messages"] is None for r in out] == [True, False]
    assert out[1]["unroll"] == {"turn": 1, "turns": 1}


def test_a_sliced_batch_unrolls_only_its_own_rows() -> None:
    table = canonical(edge_rows())
    whole = wai_transforms.unroll(table.slice(0, 4)).to_pylist()
    first = wai_transforms.unroll(table.slice(0, 2)).to_pylist()
    second = wai_transforms.unroll(table.slice(2, 2)).to_pylist()
    assert first + second == whole


def test_batch_size_one_equals_one_big_batch() -> None:
    ds = datasets.Dataset(canonical(edge_rows())).with_format("arrow")
    one = ds.map(wai_transforms.unroll, batched=True, batch_size=1)
    big = ds.map(wai_transforms.unroll, batched=True, batch_size=1000)
    assert one.data.to_pylist() == big.data.to_pylist()


@pytest.mark.parametrize("arrow", [True, False])
def test_unroll_without_batched_says_to_pass_it(arrow: bool) -> None:
    ds = datasets.Dataset(canonical(edge_rows()[:2]))
    ds = ds.with_format("arrow") if arrow else ds
    with pytest.raises(SchemaError, match=r"Pass batched=True: ds.map\(unroll, batched=True\)"):
        ds.map(wai_transforms.unroll)


def test_unroll_without_batched_fails_on_an_iterable_dataset_too() -> None:
    ds = datasets.Dataset(canonical(edge_rows()[:2])).to_iterable_dataset()
    with pytest.raises(SchemaError, match="changes the number of rows"):
        list(ds.map(wai_transforms.unroll))


# ---------------------------------------------------------------- loss_mask


@pytest.mark.parametrize("mode", ["assistant", "final"])
def test_loss_mask_equals_whileai(rows: list[dict[str, Any]], mode: str) -> None:
    from whileai.simulations import loss_mask as theirs

    table = wai_transforms.loss_mask(mode)(canonical(rows))
    messages = [[{"role": m["role"]} for m in row] for row in table.column("messages").to_pylist()]
    assert table.column("loss_mask").to_pylist() == [theirs(m, mode=mode) for m in messages]


def test_loss_mask_has_one_entry_per_message_and_nulls_stay_null() -> None:
    table = messages_table([[{"role": "assistant", "content": "a"}, {"role": None, "content": "b"}], None, []])
    out = masks.mask_table(table, "final").column("loss_mask").to_pylist()
    assert out == [[1, 0], None, []]


def test_loss_mask_on_a_sliced_batch() -> None:
    table = canonical(edge_rows())
    whole = masks.mask_table(table, "final").column("loss_mask").to_pylist()
    assert wai_transforms.loss_mask("final")(table.slice(2, 3)).column("loss_mask").to_pylist() == whole[2:5]


def test_loss_mask_batch_size_one_equals_one_big_batch() -> None:
    ds = datasets.Dataset(canonical(edge_rows())).with_format("arrow")
    one = ds.map(wai_transforms.loss_mask("final"), batched=True, batch_size=1)
    big = ds.map(wai_transforms.loss_mask("final"), batched=True, batch_size=100)
    assert one.data.column("loss_mask").to_pylist() == big.data.column("loss_mask").to_pylist()


def test_an_unknown_mask_mode_lists_the_allowed_ones() -> None:
    with pytest.raises(OptionError, match="^mode must be one of 'assistant', 'final', got 'last'"):
        wai_transforms.loss_mask("last")
