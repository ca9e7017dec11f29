"""The console demo on the bundled sample."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from whileai.simulations import training_rows

from tests.conftest import template_rows
from whileai_datasets import cli
from whileai_datasets.cli.demo import sample_meta, sample_rows


def test_bundled_sample_loads_like_whileai_training_rows(tmp_path: Path) -> None:
    from whileai_datasets.cli.demo import load_sample

    meta = sample_meta()
    ours = load_sample(cache_dir=str(tmp_path / "cache"))
    theirs = training_rows(sample_rows(), system_prompt=meta["system_prompt"], tools=meta["tools"], strip_think=False)
    assert [row["messages"] for row in template_rows(ours)] == [row["messages"] for row in theirs]


def test_demo_prints_what_it_loaded_and_writes_parquet(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out" / "sample.parquet"
    assert cli.main(["demo", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    rows = sample_rows()
    passed = sum(1 for row in rows if (row.get("reward") or 0) >= 0.5)
    assert f"rows        {len(rows)} ({len({r['scenario_id'] for r in rows})} scenarios)" in text
    assert "tools       lookup_order, refund_payment" in text
    assert f"rewards     {len(rows)} graded, {passed} pass" in text
    table = pq.read_table(out)
    assert table.num_rows == len(rows)
    assert "messages" in table.column_names


def test_demo_json_output_is_machine_readable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sample.parquet"
    assert cli.main(["demo", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == len(sample_rows())
    assert summary["loss_turns"] == sum(
        1 for row in sample_rows() for m in row["messages"] if m["role"] == "assistant"
    )
    assert summary["parquet"] == str(out)
