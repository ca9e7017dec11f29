"""Wire shapes: ds[i] and the JSONL writer give exactly whileai's rows."""

from __future__ import annotations

import json
from typing import Any

import datasets
import pyarrow.parquet as pq
import pytest

from whileai_datasets import transforms as wai_transforms
from whileai_datasets.errors import OptionError, SchemaError
from whileai_datasets.transforms import think, wire

from tests.conftest import template_rows

from .conftest import (
    TOOLS,
    all_rows,
    canonical,
    decoded,
    edge_rows,
    messages_table,
    reference,
    roundtrip,
    with_tools,
    without_none,
    written,
)


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return all_rows()


def _training(rows: list[dict[str, Any]]) -> Any:
    """Canonical rows as training_rows builds them (think stripped, tools on, groups)."""
    from whileai_datasets.transforms import groups

    return groups.stamp_table(with_tools(think.strip_table(canonical(rows))))


def test_openai_rows_equal_whileai_written_and_decoded(rows: list[dict[str, Any]]) -> None:
    table = wai_transforms.to_openai(_training(rows))
    theirs = reference(rows)
    assert written(table) == theirs
    assert [without_none(r) for r in decoded(table)] == [without_none(r) for r in theirs]


@pytest.mark.parametrize("kind", ["training", "completion"])
def test_trl_rows_equal_whileai_written_and_decoded(rows: list[dict[str, Any]], kind: str) -> None:
    from whileai.simulations import to_trl

    table = wai_transforms.to_trl(kind)(_training(rows))
    theirs = roundtrip(to_trl(reference(rows), kind))
    assert written(table) == theirs
    assert [without_none(r) for r in decoded(table)] == [without_none(r) for r in theirs]


def test_trl_arguments_are_whileais_decoded_values(rows: list[dict[str, Any]]) -> None:
    table = wai_transforms.to_trl("training")(_training(edge_rows()))
    calls = [c for r in decoded(table) for m in r["messages"] for c in m.get("tool_calls", [])]
    values = [c["function"]["arguments"] for c in calls]
    assert {"order_id": "A", "n": 1.5, "ok": True, "none": None} in values
    assert {"order_id": "B"} in values  # doubly encoded, unwrapped
    assert "order C please" in values  # unparseable text stays text
    assert [1, 2] in values and 7 in values and "just text" in values


def test_fireworks_rows_equal_whileai(rows: list[dict[str, Any]]) -> None:
    from whileai.simulations.export import _fireworks_training_row

    table = wai_transforms.to_fireworks(wai_transforms.to_openai(_training(rows)))
    theirs = roundtrip([_fireworks_training_row(r) for r in reference(rows)])
    assert written(table) == theirs
    assert [without_none(r) for r in decoded(table)] == theirs


def test_messages_decode_without_invented_keys(rows: list[dict[str, Any]]) -> None:
    for shape in (wai_transforms.to_openai, wai_transforms.to_trl("training"), wai_transforms.to_fireworks):
        for row in decoded(shape(_training(edge_rows()))):
            for message in row["messages"]:
                assert None not in (message.get(k, 0) for k in ("tool_calls", "name", "tool_call_id", "weight"))


def test_message_keys_whileai_never_writes_are_dropped() -> None:
    table = messages_table([[{"role": "user", "content": "q", "lang": "en"}, {"role": "assistant", "content": "a"}]])
    assert template_rows(table)[0]["messages"][0] == {"role": "user", "content": "q", "lang": "en"}
    assert decoded(table)[0]["messages"][0]["extra"] == {"lang": "en"}  # canonical ds[i]: the struct's fields
    assert decoded(wai_transforms.to_openai(table))[0]["messages"] == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"},
    ]


def test_wire_shapes_keep_their_features_through_map_and_parquet(tmp_path: Any, rows: list[dict[str, Any]]) -> None:
    from whileai.simulations import to_trl

    ds = datasets.Dataset(_training(rows)).with_format("arrow")
    trl = ds.map(wai_transforms.to_trl("completion"), batched=True)
    theirs = roundtrip(to_trl(reference(rows), "completion"))
    assert [without_none(r) for r in trl.with_format(None)] == [without_none(r) for r in theirs]
    trl.to_parquet(str(tmp_path / "trl.parquet"))
    back = datasets.load_dataset("parquet", data_files=str(tmp_path / "trl.parquet"), split="train")
    assert [without_none(r) for r in back] == [without_none(r) for r in theirs]
    assert pq.read_schema(tmp_path / "trl.parquet").names == trl.column_names


def test_plain_map_of_a_wire_shape_drops_and_retypes_columns(rows: list[dict[str, Any]]) -> None:
    from whileai.simulations import to_trl

    ds = datasets.Dataset(_training(rows))
    out = ds.map(wai_transforms.to_trl("completion"), batched=True)
    theirs = roundtrip(to_trl(reference(rows), "completion"))
    assert [without_none(r) for r in out] == [without_none(r) for r in theirs]
    # IterableDataset.map merges dicts too: the shape's dropped columns go with remove_columns
    streamed = datasets.Dataset(_training(rows)).to_iterable_dataset()
    streamed = streamed.map(wai_transforms.to_trl("completion"), batched=True, remove_columns=ds.column_names)
    assert [without_none(r) for r in streamed] == [without_none(r) for r in theirs]


def test_to_trl_rejects_an_unknown_kind() -> None:
    with pytest.raises(OptionError, match="^kind must be one of 'training', 'completion', 'preference', got 'dpo'"):
        wai_transforms.to_trl("dpo")


def test_preference_shapes_drop_and_cut_like_whileai() -> None:
    from whileai.simulations.export import _fireworks_preference_rows, _trl_preference_rows

    edge = edge_rows()
    pairs = [
        {"prompt": "p", "chosen": edge[5], "rejected": edge[6]},
        {"prompt": "same", "chosen": edge[0], "rejected": edge[0]},
        {"prompt": "q", "chosen": edge[7], "rejected": edge[8]},
    ]
    table = wai_transforms.to_openai(with_tools(think.strip_table(canonical(pairs, config="preference")), TOOLS))
    openai_rows = written(table, preference=True)
    ours, dropped, cut = wire.trl_preference_table(table)
    theirs, their_dropped, their_cut = _trl_preference_rows(openai_rows)
    assert (written(ours, preference=True), dropped, cut) == (roundtrip(theirs), their_dropped, their_cut)
    ours, dropped, cut = wire.fireworks_preference_table(table)
    theirs, their_dropped, their_cut = _fireworks_preference_rows(openai_rows)
    assert (written(ours), dropped, cut) == (roundtrip(theirs), their_dropped, their_cut)
    assert json.loads(json.dumps(decoded(wai_transforms.to_fireworks(table)))) == roundtrip(theirs)
