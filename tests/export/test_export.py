"""whileai_datasets.export_dataset / export_preference as a drop-in, and the
``whileai-datasets export`` command. Parity over the option grid lives in
tests/transforms/test_parity.py; this file covers sources, outputs and the CLI."""

from __future__ import annotations

import argparse
import inspect
import json
import re
from pathlib import Path
from typing import Any

import datasets
import pytest
from transforms.conftest import SYSTEM, TOOLS, all_rows, edge_rows, read_jsonl, seeded_rows, without_none, write_jsonl
from transforms.conftest import QUIET_LOSS_WARNINGS, with_rows_without_loss

import whileai_datasets
from whileai_datasets.cli import export as export_cli
from whileai_datasets.export import sources as _sources

pytestmark = QUIET_LOSS_WARNINGS


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return all_rows()


def _theirs(rows: Any, path: Path, **options: Any) -> tuple[dict[str, Any], list[Any]]:
    from whileai.simulations import export_dataset

    report = json.loads(json.dumps(export_dataset(rows, str(path), **options)))
    written = read_jsonl(path)
    return with_rows_without_loss(report, written), written


def test_same_names_and_signatures_as_whileai() -> None:
    import whileai.simulations as wai

    assert whileai_datasets.export_dataset is whileai_datasets.export_training
    # our own options, after all of whileai's, with their defaults
    added = {"export_dataset": [("weights", None), ("on_bad_row", None), ("filesystem", None), ("engine", "local")],
             "export_preference": []}
    for name in ("export_dataset", "export_preference"):
        ours = list(inspect.signature(getattr(whileai_datasets, name)).parameters.values())
        theirs = inspect.signature(getattr(wai, name)).parameters
        assert [(p.name, p.kind, p.default) for p in ours[: len(theirs)]] == [
            (p.name, p.kind, p.default) for p in theirs.values()
        ]
        assert [(p.name, p.kind, p.default) for p in ours[len(theirs) :]] == [
            (extra, inspect.Parameter.KEYWORD_ONLY, default) for extra, default in added[name]
        ]


def test_a_canonical_dataset_exports_the_same_rows(tmp_path: Path, rows: list[dict[str, Any]], load: Any) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", rows)
    ds = load(path, system_prompt=SYSTEM)
    options = dict(tools=TOOLS, unroll=True, max_tool_output_chars=40, validate=False)
    report = whileai_datasets.export_dataset(ds, str(tmp_path / "ours.jsonl"), **options)
    their_report, their_rows = _theirs(rows, tmp_path / "theirs.jsonl", system_prompt=SYSTEM, **options)
    assert read_jsonl(tmp_path / "ours.jsonl") == their_rows
    for key in ("n", "groups", "tool_call_roundtrip", "trained_messages", "rewards", "tool_output_chars_cut"):
        assert report[key] == their_report[key]
    # a dataset carries no privileged blocks: the report says the check was vacuous
    assert report["privileged_leaks"]["checked"] is False
    assert "came through the export" in report["privileged_leaks"]["summary"]


def test_a_system_prompt_is_prepended_to_a_dataset_source(
    tmp_path: Path, rows: list[dict[str, Any]], load: Any
) -> None:
    ds = load(write_jsonl(tmp_path / "run.jsonl", rows))
    whileai_datasets.export_dataset(ds, str(tmp_path / "ours.jsonl"), system_prompt=SYSTEM, tools=TOOLS, validate=False)
    _, their_rows = _theirs(rows, tmp_path / "theirs.jsonl", system_prompt=SYSTEM, tools=TOOLS, validate=False)
    assert read_jsonl(tmp_path / "ours.jsonl") == their_rows


def test_the_system_prompt_the_dataset_was_loaded_with_is_not_added_twice(
    tmp_path: Path, rows: list[dict[str, Any]], load: Any
) -> None:
    ds = load(write_jsonl(tmp_path / "run.jsonl", rows), system_prompt=SYSTEM)
    whileai_datasets.export_dataset(ds, str(tmp_path / "ours.jsonl"), system_prompt=SYSTEM, tools=TOOLS, validate=False)
    _, their_rows = _theirs(rows, tmp_path / "theirs.jsonl", system_prompt=SYSTEM, tools=TOOLS, validate=False)
    assert read_jsonl(tmp_path / "ours.jsonl") == their_rows


def test_a_path_source_writes_next_to_it_by_default(tmp_path: Path) -> None:
    rows = seeded_rows(0, "sft")
    path = write_jsonl(tmp_path / "run.jsonl", rows)
    report = whileai_datasets.export_dataset(str(path), tools=TOOLS, validate=False)
    assert report["path"] == str(tmp_path / "run.train.jsonl")
    assert report["n_written"] == len(rows) == len(read_jsonl(report["path"]))


def test_parquet_output_reads_back_to_whileais_rows(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    for fmt in ("openai", "trl", "fireworks"):
        out = tmp_path / f"{fmt}.parquet"
        report = whileai_datasets.export_dataset(
            rows, str(out), system_prompt=SYSTEM, tools=TOOLS, format=fmt, unroll=True, validate=False
        )
        _, their_rows = _theirs(
            rows, tmp_path / f"{fmt}.jsonl", system_prompt=SYSTEM, tools=TOOLS, format=fmt, unroll=True, validate=False
        )
        back = datasets.load_dataset("parquet", data_files=str(out), split="train", cache_dir=str(tmp_path / "cache"))
        assert report["n_written"] == back.num_rows
        assert [without_none(r) for r in back] == [without_none(r) for r in their_rows]


def test_many_small_chunks_give_the_same_rows_and_report(
    tmp_path: Path, rows: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sources, "CHUNK_ROWS", 4)
    for options in (dict(format="trl", mask_mode="final"), dict(format="openai", unroll=True)):
        report = whileai_datasets.export_dataset(
            rows, str(tmp_path / "ours.jsonl"), tools=TOOLS, validate=False, **options
        )
        their_report, their_rows = _theirs(rows, tmp_path / "theirs.jsonl", tools=TOOLS, validate=False, **options)
        report.pop("path")
        their_report.pop("path")
        assert read_jsonl(tmp_path / "ours.jsonl") == their_rows
        assert report == their_report


def test_no_rows_write_an_empty_file_like_whileai(tmp_path: Path) -> None:
    report = whileai_datasets.export_dataset([], str(tmp_path / "ours.jsonl"))
    their_report, their_rows = _theirs([], tmp_path / "theirs.jsonl")
    report.pop("path")
    their_report.pop("path")
    assert report == their_report and read_jsonl(tmp_path / "ours.jsonl") == their_rows == []


def test_progress_counts_every_source_row(
    tmp_path: Path, rows: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from whileai_datasets.export.exporters import run_training

    monkeypatch.setattr(_sources, "CHUNK_ROWS", 10)
    seen: list[tuple[int, int]] = []
    run_training(rows, None, whileai_datasets.TrainingOptions.whileai_export(validate=False),
                 progress=lambda done, total: seen.append((done, total)))
    assert sum(done for done, _ in seen) == len(rows) and {total for _, total in seen} == {len(rows)}


def test_dataset_chunks_read_the_cache_files_as_the_dataset_reads_them(
    tmp_path: Path, rows: list[dict[str, Any]], load: Any
) -> None:
    import pyarrow as pa

    ds = load(write_jsonl(tmp_path / "run.jsonl", rows * 3))
    assert _sources._plain_files(ds) is not None
    chunks = list(_sources.dataset_chunks(ds, rows=7))
    assert pa.concat_tables(chunks).to_pylist() == ds.data.to_pylist()
    picked = ds.select(range(5, 40))
    assert _sources._plain_files(picked) is None
    assert (
        pa.concat_tables(list(_sources.dataset_chunks(picked, rows=7))).to_pylist()
        == picked.with_format("arrow")[:].to_pylist()
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(format="jsonl"), "format must be one of 'openai', 'trl', 'fireworks', got 'jsonl'"),
        (dict(mask_mode="last"), "mask_mode must be one of 'assistant', 'final', got 'last'"),
        (dict(push_to="me/set"), "push_to needs an output path"),
    ],
)
def test_bad_options_say_what_to_pass(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        whileai_datasets.export_dataset(edge_rows(), None, **options)


def test_a_missing_source_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"nope\.jsonl: no such file"):
        whileai_datasets.export_dataset(str(tmp_path / "nope.jsonl"), str(tmp_path / "out.jsonl"))


# ---------------------------------------------------------------- CLI


def _cli(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="whileai-datasets")
    export_cli.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["export", *argv])


def test_cli_prints_the_report_as_a_table_and_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = seeded_rows(0, "sft")
    source = write_jsonl(tmp_path / "run.jsonl", rows)
    (tmp_path / "tools.json").write_text(json.dumps(TOOLS))
    argv = [
        str(source),
        str(tmp_path / "out.jsonl"),
        "--tools",
        str(tmp_path / "tools.json"),
        "--system-prompt",
        SYSTEM,
        "--unroll",
        "--no-validate",
    ]
    assert export_cli.run(_cli(*argv, "--json")) == 0
    report = json.loads(capsys.readouterr().out)
    their_report, their_rows = _theirs(
        rows, tmp_path / "theirs.jsonl", tools=TOOLS, system_prompt=SYSTEM, unroll=True, validate=False
    )
    assert read_jsonl(tmp_path / "out.jsonl") == their_rows
    report.pop("path"), their_report.pop("path")
    assert report == their_report
    assert export_cli.run(_cli(*argv)) == 0
    table = capsys.readouterr().out
    assert re.search(rf"^n +{report['n']}$", table, re.M)
    assert re.search(r"^tool_call_roundtrip\.encoding +json_string$", table, re.M)
    assert re.search(r"^privileged_leaks\.leaked\[0\]\.field +reference$", table, re.M)
    assert "warning: " + report["warnings"][0] in table


def test_cli_exports_preference_pairs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from whileai.simulations import export_preference

    edge = edge_rows()
    pairs = [{"prompt": "p", "chosen": edge[7], "rejected": edge[8], "margin": 0.5}]
    source = write_jsonl(tmp_path / "pairs.jsonl", pairs)
    assert (
        export_cli.run(_cli(str(source), str(tmp_path / "out.jsonl"), "--preference", "--format", "trl", "--json")) == 0
    )
    report = json.loads(capsys.readouterr().out)
    theirs = export_preference(pairs, str(tmp_path / "theirs.jsonl"), format="trl")
    assert read_jsonl(tmp_path / "out.jsonl") == read_jsonl(tmp_path / "theirs.jsonl")
    assert report["pairs"] == theirs["pairs"] and report["mean_margin"] == theirs["mean_margin"]


def test_cli_failures_exit_1_and_say_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "tools.json").write_text("{not json")
    source = write_jsonl(tmp_path / "run.jsonl", edge_rows())
    assert export_cli.run(_cli(str(source), str(tmp_path / "out.jsonl"), "--tools", str(tmp_path / "tools.json"))) == 1
    assert "tools.json: the tools file is not valid JSON" in capsys.readouterr().err
    assert export_cli.run(_cli(str(source), str(tmp_path / "out.jsonl"))) == 1
    assert "tool_call_roundtrip_invalid" in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()


def test_a_parquet_source_gets_the_same_leak_report_as_whileai(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from whileai.simulations import export_dataset as whileai_export

    from tests.conftest import DATA, read_jsonl
    from whileai_datasets import export_dataset

    rows = read_jsonl(DATA / "engine_multiturn.jsonl")[:2]
    leaked = dict(rows[0], final_text="The reference says: secret answer, as the grader was told.")
    leaked["steps"] = [s for s in rows[0]["steps"] if "tool" not in s]
    clean = dict(rows[1], steps=[], privileged={"reference": "a reference that nobody quotes here"})
    source = [leaked, clean]
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(source), path)
    theirs = whileai_export(source, str(tmp_path / "w.jsonl"), validate=False)
    ours = export_dataset(str(path), str(tmp_path / "o.jsonl"), validate=False)
    assert theirs["privileged_leaks"]["n_leaked"] == 1
    assert ours["privileged_leaks"] == theirs["privileged_leaks"]


def test_tool_calls_with_several_text_arguments_match_whileai_byte_for_byte(tmp_path: Path) -> None:
    """Arguments that are an object of texts take a fast path in the builder; with two
    or more keys its separators must be whileai's (",", ": "), not json.dumps' default."""
    step = {"tool": "lookup_order", "arguments": {"order_id": "ORD-1", "note": 'say "hi"', "lang": "é"},
            "result": {"status": "ok"}, "text": "Checking."}
    rows = [{"prompt": f"Find order {i}", "steps": [step, {"text": "Done."}], "final_text": "Done.",
             "reward": 1.0, "scenario_id": f"sc-{i}"} for i in range(3)]
    path = write_jsonl(tmp_path / "run.jsonl", rows)
    ours = tmp_path / "ours.jsonl"
    whileai_datasets.export_dataset(str(path), str(ours), validate=False)
    from whileai.simulations import export_dataset

    export_dataset(str(path), str(tmp_path / "theirs.jsonl"), validate=False)
    assert ours.read_bytes() == (tmp_path / "theirs.jsonl").read_bytes()
    assert b'\\"order_id\\": \\"ORD-1\\",\\"note\\"' in ours.read_bytes()
