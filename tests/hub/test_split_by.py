"""split_by keeps every situation in one split; publish refuses splits that claim a key but share values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest
from datasets import Dataset, DatasetDict, Features, Json, Value

from whileai_datasets.errors import ExportFormatError, PublishError, SchemaError
from whileai_datasets.hub import HoldOut, publish, split_by


def _rows(keys: Sequence[str | None]) -> Dataset:
    return Dataset.from_dict({"scenario_id": keys, "i": list(range(len(keys)))},
                             features=Features({"scenario_id": Value("string"), "i": Value("int64")}))


def _col(ds: Dataset, name: str) -> list[Any]:
    return list(ds[name])


def test_split_by_puts_every_group_in_exactly_one_split():
    ds = _rows([f"s{i % 7}" for i in range(40)])

    parts = split_by(ds, "scenario_id", test_size=0.3, seed=1)

    train, holdout = set(_col(parts["train"], "scenario_id")), set(_col(parts["holdout"], "scenario_id"))
    assert not train & holdout
    assert train | holdout == {f"s{i}" for i in range(7)}
    assert parts["train"].num_rows + parts["holdout"].num_rows == 40


def test_split_by_holds_out_a_share_of_groups_not_of_rows():
    ds = _rows(["big"] * 30 + [f"small{i}" for i in range(9)])  # 10 groups

    held = [len(set(_col(split_by(ds, "scenario_id", test_size=size, seed=0)["holdout"], "scenario_id")))
            for size in (0.1, 0.3, 0.25, 4)]

    assert held == [1, 3, 3, 4]  # 0.25 of 10 rounds up; an int is a number of groups


def test_split_by_is_deterministic_for_a_seed_and_keeps_row_order():
    ds = _rows([f"s{i % 10}" for i in range(50)])

    first, again = (split_by(ds, "scenario_id", test_size=0.3, seed=7) for _ in range(2))
    other_seeds = {tuple(_col(split_by(ds, "scenario_id", test_size=0.3, seed=s)["holdout"], "i")) for s in range(8)}

    assert _col(first["holdout"], "i") == _col(again["holdout"], "i")
    assert _col(first["train"], "i") == sorted(_col(first["train"], "i"))
    assert len(other_seeds) > 1


def test_a_hold_out_holds_out_the_groups_split_by_holds_out():
    """The Ray publish picks its held-out groups from the distinct keys alone (`HoldOut.held`), before any row is
    split: the same groups as `split_by` over the rows, for every seed, in any order of the keys."""
    ds = _rows([f"s{i % 13}" for i in range(60)])
    for seed in range(6):
        hold_out = HoldOut("scenario_id", test_size=0.3, seed=seed, names=("fit", "eval"))
        parts = split_by(ds, "scenario_id", test_size=0.3, seed=seed, names=("fit", "eval"))
        keys = pa.array([f"s{i}" for i in reversed(range(13))])
        assert sorted(hold_out.held(keys).to_pylist()) == sorted(set(_col(parts["eval"], "scenario_id")))
        assert {name: _col(split, "i") for name, split in hold_out.split(ds).items()} == {
            name: _col(split, "i") for name, split in parts.items()}


def test_split_by_reads_keys_through_a_selection():
    ds = _rows(["a", "a", "b", "b", "c", "c"]).select([5, 4, 1, 0])  # indices mapping: c, c, a, a

    parts = split_by(ds, "scenario_id", test_size=1, seed=0)

    assert sorted(_col(parts["train"], "scenario_id") + _col(parts["holdout"], "scenario_id")) == ["a", "a", "c", "c"]
    assert len(set(_col(parts["holdout"], "scenario_id"))) == 1


def test_split_by_names_the_splits():
    parts = split_by(_rows(["a", "b"]), "scenario_id", test_size=1, names=("fit", "eval"))

    assert list(parts) == ["fit", "eval"]


def test_split_by_rejects_a_missing_key_column():
    with pytest.raises(SchemaError, match=r"key='group_id': expected a column 'group_id' naming each row's "
                                          r"situation, got columns \['scenario_id', 'i'\]"):
        split_by(_rows(["a", "b"]), "group_id")


def test_split_by_rejects_a_json_key_column():
    ds = Dataset.from_dict({"scenario_id": [{"a": 1}, [2]]}, features=Features({"scenario_id": Json()}))

    with pytest.raises(SchemaError, match=r"column 'scenario_id': expected 'scenario_id' to hold strings or "
                                          r"integers, got Json"):
        split_by(ds, "scenario_id")


def test_split_by_names_the_first_row_without_a_key():
    with pytest.raises(ExportFormatError, match=r"row 2, column 'scenario_id': 2 rows have no 'scenario_id'"):
        split_by(_rows(["a", "b", None, "c", None]), "scenario_id")


@pytest.mark.parametrize("test_size", [0.0, 1.0, 5, 0, True])
def test_split_by_rejects_a_test_size_that_empties_a_split(test_size):
    with pytest.raises(ValueError, match=r"test_size"):
        split_by(_rows(["a", "b", "c", "d", "e"]), "scenario_id", test_size=test_size)


def test_split_by_needs_two_groups():
    with pytest.raises(ValueError, match=r"at least 2 distinct 'scenario_id' values .* got 1"):
        split_by(_rows(["a", "a"]), "scenario_id")


def test_publish_refuses_splits_that_share_a_split_key_value_before_any_request():
    overlapping = DatasetDict({"train": _rows(["a", "b"]), "holdout": _rows(["b", "c"])})

    with pytest.raises(PublishError, match=r"split_key='scenario_id': 1 'scenario_id' values appear in both "
                                           r"'train' and 'holdout', e\.g\. 'b'"):
        publish(overlapping, "alice/x", token="never-sent", split_key="scenario_id")
