"""`export_dataset(..., format="openai", weights=...)`: whileai's OpenAI rows plus a per-message
`weight` from the loss mask, so a file uploaded to OpenAI, Together or Fireworks trains exactly
the mask. whileai's own export (run here) is the reference for everything but the weights."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import whileai_datasets
from whileai_datasets.errors import OptionError

from .conftest import QUIET_LOSS_WARNINGS, SYSTEM, TOOLS, all_rows, read_jsonl

pytestmark = QUIET_LOSS_WARNINGS


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return all_rows()


def _export(tmp_path: Path, rows: Any, name: str, **options: Any) -> list[dict[str, Any]]:
    whileai_datasets.export_dataset(rows, str(tmp_path / name), system_prompt=SYSTEM, tools=TOOLS, validate=False,
                                    **options)
    return read_jsonl(tmp_path / name)


def _without_weight(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "messages": [{k: v for k, v in m.items() if k != "weight"} for m in row["messages"]]}


@pytest.mark.parametrize(("mask_mode", "unroll"), [("assistant", False), ("final", False), ("assistant", True)])
def test_assistant_weights_are_the_loss_mask_and_nothing_else_changes(tmp_path, rows, mask_mode, unroll):
    from whileai.simulations import export_dataset as theirs

    theirs(rows, str(tmp_path / "theirs.jsonl"), system_prompt=SYSTEM, tools=TOOLS, validate=False,
           mask_mode=mask_mode, unroll=unroll)
    ours = _export(tmp_path, rows, "ours.jsonl", mask_mode=mask_mode, unroll=unroll, weights="assistant")

    reference = read_jsonl(tmp_path / "theirs.jsonl")
    assert [_without_weight(r) for r in ours] == reference
    for row in ours:
        for message, flag in zip(row["messages"], row["loss_mask"]):
            if message["role"] == "assistant":
                assert message["weight"] == flag
            else:
                assert "weight" not in message
    unmarked = any(m.get("weight") == 0 for r in ours for m in r["messages"])
    assert unmarked or (mask_mode, unroll) == ("assistant", False)


def test_all_weights_put_zero_on_every_context_message(tmp_path, rows):
    ours = _export(tmp_path, rows, "all.jsonl", mask_mode="final", weights="all")

    assert all([m["weight"] for m in r["messages"]] == r["loss_mask"] for r in ours)
    assert {m["role"] for r in ours for m in r["messages"] if m["weight"] == 0} >= {"system", "user"}


def test_the_default_export_writes_no_weight(tmp_path, rows):
    ours = _export(tmp_path, rows, "plain.jsonl")

    assert not any("weight" in m for r in ours for m in r["messages"])


def test_weighted_parquet_keeps_the_weights(tmp_path, rows):
    from datasets import Dataset

    whileai_datasets.export_dataset(rows, str(tmp_path / "w.parquet"), system_prompt=SYSTEM, tools=TOOLS,
                                    validate=False, weights="all")

    loaded = list(Dataset.from_parquet(str(tmp_path / "w.parquet")))  # to_list() gives Json as text on 4.x
    assert all([m["weight"] for m in r["messages"]] == r["loss_mask"] for r in loaded)


@pytest.mark.parametrize(("options", "message"), [
    ({"format": "trl", "weights": "assistant"}, "weights apply to format='openai' files, got format='trl'"),
    ({"weights": "every"}, "weights must be one of 'assistant', 'all' or None, got 'every'"),
])
def test_weights_that_cannot_apply_are_refused_before_anything_is_written(tmp_path, rows, options, message):
    with pytest.raises(OptionError, match=message):
        whileai_datasets.export_dataset(rows, str(tmp_path / "x.jsonl"), system_prompt=SYSTEM, tools=TOOLS,
                                        validate=False, **options)

    assert not (tmp_path / "x.jsonl").exists()


def test_the_export_command_writes_weights(tmp_path, rows):
    from tests.conftest import write_jsonl
    from whileai_datasets.cli.main import main

    source = write_jsonl(tmp_path / "rows.jsonl", rows)

    code = main(["export", str(source), str(tmp_path / "out.jsonl"), "--tools", str(_tools_file(tmp_path)),
                 "--no-validate", "--weights", "all", "--json"])

    assert code == 0
    assert all([m["weight"] for m in r["messages"]] == r["loss_mask"] for r in read_jsonl(tmp_path / "out.jsonl"))


def _tools_file(tmp_path: Path) -> Path:
    import json

    path = tmp_path / "tools.json"
    path.write_text(json.dumps(TOOLS))
    return path
