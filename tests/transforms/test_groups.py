"""stamp_groups against whileai's _stamp_groups, floats bit for bit."""

from __future__ import annotations

from typing import Any

import datasets
import pyarrow as pa
import pytest

import whileai_datasets
from whileai_datasets.errors import SchemaError
from whileai_datasets.transforms import groups

from .conftest import all_rows, canonical, reference

GROUP_KEYS = ("group_id", "k", "n0", "n1", "reward_mean", "reward_std")


def _rows_with_rewards(rewards: list[Any]) -> list[dict[str, Any]]:
    rows = []
    for i, reward in enumerate(rewards):
        rows.append(
            {
                "prompt": f"ask {i % 3}",
                "scenario_id": "" if i % 5 == 0 else f"s-{i % 4}",
                "reward": reward,
                "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
            }
        )
    return rows


def _theirs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: r[k] for k in GROUP_KEYS if k in r} for r in reference(rows)]


def _ours(table: pa.Table) -> list[dict[str, Any]]:
    out = []
    for row in table.to_pylist():
        out.append({} if row.get("group_id") is None else {k: row[k] for k in GROUP_KEYS})
    return out


@pytest.mark.parametrize(
    "rewards",
    [
        [0.1, 0.7, 0.3, 0.2, 0.9, 0.6, 0.15, 0.35, 0.05, 0.95, 0.45, 0.55, 0.3333333333333333, 1 / 7, 2 / 3],
        [1.0, 0.0, 0.5, None, 0.5, 1.0, None, None, 0.0, 0.25, 0.75, float("nan"), 0.5, 1.0, 0.0],
        [None] * 12,
    ],
)
def test_group_fields_equal_whileai(rewards: list[Any]) -> None:
    rows = _rows_with_rewards(rewards)
    assert _ours(groups.stamp_table(canonical(rows))) == _theirs(rows)


def test_group_fields_of_seeded_runs_equal_whileai() -> None:
    rows = all_rows()
    assert _ours(groups.stamp_table(canonical(rows))) == _theirs(rows)


def test_nothing_is_stamped_when_no_task_repeats() -> None:
    rows = _rows_with_rewards([1.0, 0.0])
    table = canonical(rows)
    assert groups.stamp_table(table) is table
    assert _theirs(rows) == [{}, {}]


def test_stamp_groups_on_a_dataset_adds_the_columns(tmp_path: Any) -> None:
    rows = _rows_with_rewards([0.1, 0.7, 0.3, 0.2, 0.9, 0.6, 0.15, 0.35, 0.05, 0.95])
    ds = datasets.Dataset(canonical(rows))
    stamped = whileai_datasets.stamp_groups(ds)
    assert stamped.column_names[-6:] == list(GROUP_KEYS)
    assert _ours(stamped.data.table) == _theirs(rows)
    again = whileai_datasets.stamp_groups(stamped)
    assert again.data.to_pylist() == stamped.data.to_pylist()


def test_stamp_groups_refuses_a_streaming_dataset() -> None:
    ds = datasets.Dataset(canonical(_rows_with_rewards([1.0, 0.0, 1.0]))).to_iterable_dataset()
    with pytest.raises(SchemaError, match="needs every row to count a group"):
        whileai_datasets.stamp_groups(ds)
