"""Bad input gets a clear error naming file, line and field, and loses nothing."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

import whileai_datasets
from tests.conftest import DATA, read_jsonl, write_jsonl
from whileai_datasets import BadRowsWarning, ExportFormatError, OptionError

GOOD = read_jsonl(DATA / "otel.jsonl")[0]


def _bad_file(tmp_path: Path, bad_line: str) -> Path:
    return write_jsonl(tmp_path / "run.jsonl", [GOOD, "", GOOD, bad_line, GOOD])


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ('{"prompt": "cut off', r"run\.jsonl line 4 \(row 2\): not valid JSON .*the line starts '\{\"prompt\": \"cut off'"),
        ('["a", "list"]', r"run\.jsonl line 4 \(row 2\): expected a JSON object, got list"),
        (
            json.dumps({"messages": [{"role": "user", "content": "hi"}, {"content": "no role"}]}),
            r"run\.jsonl line 4 \(row 2\), messages\[1\]\.role: expected one of 'system', 'user', 'assistant', "
            r"'tool', got no role\. Fix the exporter",
        ),
        (
            json.dumps({"messages": [{"role": "Assistant", "content": "hi"}]}),
            r"messages\[0\]\.role: expected one of .*, got 'Assistant'",
        ),
        (json.dumps({**GOOD, "reward": "high"}), r"line 4 \(row 2\), reward: expected a number, got str \"high\""),
        (json.dumps({**GOOD, "reward": True}), r"reward: expected a number, got bool true"),
        (
            json.dumps({"messages": [{"role": "user", "content": [{"type": "text", "value": "a", "content": "b"}]}]}),
            r"line 4 \(row 2\), messages\[0\]\.content\[0\]: expected the part's text under one of 'text', 'value', "
            r"'content', got text under \['value', 'content'\]",
        ),
        (json.dumps({"messages_json": "[not json", "prompt": "x"}), r"messages_json: expected JSON text"),
    ],
)
def test_builder_reports_file_line_and_field_for_bad_rows(tmp_path: Path, load: Any, bad_line: str, message: str) -> None:
    with pytest.raises(ExportFormatError, match=message):
        load(_bad_file(tmp_path, bad_line))


def test_skip_keeps_every_good_row_and_reports_the_bad_lines(tmp_path: Path, load: Any) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", [GOOD, "{oops", GOOD, "[1]", GOOD, json.dumps({"messages": [{}]})])
    with pytest.warns(BadRowsWarning, match=r"skipped 3 bad row\(s\).*first: run\.jsonl line 2 \(row 1\): not valid JSON"):
        ds = load(path, on_bad_row="skip")
    assert ds.num_rows == 3
    assert all(row["prompt"] == GOOD["prompt"] for row in ds)
    report = whileai_datasets.bad_rows(ds)
    assert report["count"] == 3
    assert report["locations"] == ["run.jsonl line 2 (row 1)", "run.jsonl line 4 (row 3)", "run.jsonl line 6 (row 5), messages[0].role"]


def test_bad_rows_report_is_empty_when_nothing_was_skipped(load: Any) -> None:
    ds = load(DATA / "otel.jsonl", on_bad_row="skip")
    assert whileai_datasets.bad_rows(ds) == {"count": 0, "first_error": None, "locations": []}


@pytest.mark.parametrize(
    ("kwargs", "message", "error"),
    [
        ({"mask_mode": "last"}, r"^mask_mode must be one of 'assistant', 'final', got 'last'", OptionError),
        ({"on_bad_row": "ignore"}, r"^on_bad_row must be one of 'raise', 'skip', got 'ignore'", OptionError),
        ({"tools": {"name": "x"}}, r"tools must be a list of tool schemas, JSON text of one, or a path to a JSON file, got dict",
         ExportFormatError),
        ({"tools": "/nonexistent/tools.json"}, r"/nonexistent/tools\.json: cannot read the tools file", ExportFormatError),
        ({"chunk_rows": 0}, r"^chunk_rows must be a whole number, 1 or more, got int 0", OptionError),
    ],
)
def test_bad_options_are_refused_before_reading(load: Any, kwargs: dict[str, Any], message: str,
                                                error: type[Exception]) -> None:
    with pytest.raises(error, match=message):
        load(DATA / "otel.jsonl", **kwargs)


def test_a_tools_file_that_is_not_json_names_the_file(tmp_path: Path, load: Any) -> None:
    tools_file = tmp_path / "tools.json"
    tools_file.write_text("{broken")
    with pytest.raises(ExportFormatError, match=r"tools\.json: the tools file is not valid JSON"):
        load(DATA / "otel.jsonl", tools=str(tools_file))


def test_missing_data_files_say_what_to_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    # datasets fills in every file of the working directory when data_files is left out
    (tmp_path / "notes.txt").write_text("not an export")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ExportFormatError, match=r"notes\.txt.*is not a whileai export.*Pass data_files="):
        datasets.load_dataset("whileai/export", cache_dir=str(tmp_path / "cache"))


def test_the_builder_keeps_its_facts_in_one_file_beside_the_split(tmp_path: Path, load: Any) -> None:
    """Skipped rows, leak facts, rows that train nothing and unread keys: one JSON file beside the Arrow files."""
    path = write_jsonl(tmp_path / "run.jsonl", [GOOD, "{oops", {**GOOD, "grader_notes": "kept aside"}])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # each fact is also said as a warning, which its own tests check
        ds = load(path, on_bad_row="skip")
    folder = Path(ds.cache_files[0]["filename"]).parent
    assert sorted(p.name for p in folder.glob("whileai_*.json")) == ["whileai_split_facts.json"]
    facts = json.loads((folder / "whileai_split_facts.json").read_text())
    assert facts["bad_rows"]["locations"] == ["run.jsonl line 2 (row 1)"]
    assert {"no_loss", "unread"} <= set(facts["splits"]["train"])  # leaks too when the export scans them
    assert whileai_datasets.bad_rows(ds) == facts["bad_rows"]
