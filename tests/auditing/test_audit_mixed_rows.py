"""The audit of files mixing unreadable and good rows (issue 47): every share of one base, one row number per
line, no advice to pass an option that changes nothing, and the text report before an --html page that cannot
be written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_jsonl
from whileai_datasets import cli
from whileai_datasets.auditing import audit

GOOD = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "mixed.jsonl", [GOOD, "{not json", GOOD, "[1]", GOOD])


def test_shares_of_a_mixed_file_are_of_one_base(mixed: Path) -> None:
    found = audit(str(mixed)).to_dict()
    assert (found["rows"], found["training_rows"]) == (5, 3)
    zero = found["findings"]["zero_loss"]
    assert (zero["rows"], zero["share"], zero["share_of"]) == (2, 2 / 5, "rows")
    assert all(f["share"] <= 1 for f in found["findings"].values())


def test_one_row_number_names_one_line(mixed: Path) -> None:
    found = audit(str(mixed)).to_dict()
    seen: dict[int, int] = {}
    for finding in found["findings"].values():
        for where in finding["first"]:
            if where.get("line") is not None:
                assert seen.setdefault(where["row"], where["line"]) == where["line"], finding
    lines = [line for line, raw in enumerate(mixed.read_text().splitlines(), 1)]
    assert seen == {line - 1: line for line in lines}  # every line is named, as row line - 1


def test_the_audit_never_advises_an_option_it_did_not_take(mixed: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["audit", str(mixed)]) == 0
    out = capsys.readouterr().out
    assert "first error: mixed.jsonl line 2 (row 1): not valid JSON" in out
    assert "--on-bad-row" not in out.split("first error:", 1)[1].splitlines()[0]
    every_bad = write_jsonl(tmp_path / "bad.jsonl", ["{not json", "[1]"])
    assert cli.main(["audit", str(every_bad)]) == 1
    err = capsys.readouterr().err
    assert "all 2 row(s) are bad and were left out" in err and "(--on-bad-row skip)" not in err


def test_a_pretty_printed_object_is_one_row_to_the_audit(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps(GOOD, indent=2), encoding="utf-8")
    found = audit(str(path)).to_dict()
    assert (found["rows"], found["training_rows"], found["findings"]["unreadable"]["rows"]) == (1, 1, 0)


def test_the_text_report_comes_before_an_html_page_that_cannot_be_written(
        mixed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as on an install without the report extra
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    code = cli.main(["audit", str(mixed), "--html", str(tmp_path / "page.html")])
    captured: Any = capsys.readouterr()
    assert code == 1 and "needs matplotlib" in captured.err
    assert captured.out.startswith("audit of ") and "zero-loss" in captured.out
