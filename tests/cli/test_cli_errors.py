"""Every error a command prints names options the way that command takes them.

Each case runs one error path of ``export``, ``push`` or ``show-mask`` through the console entry
and checks that every ``--flag`` the message names exists in that command's own parser, and that
no Python keyword spelling (``on_bad_row='skip'``, ``data_files=``, ``validate=False``) is left.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_jsonl
from tests.support.near_miss_rows import LLAMA_FACTORY_ROWS
from whileai_datasets import cli
from whileai_datasets import option_names
from whileai_datasets.cli.main import build_parser

GOOD = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
LEAKY = {"prompt": "Refund PAY-1 please", "scenario_id": "s", "final_text": "The hidden refund code is ZETA-42-OMEGA.",
         "privileged": {"reference": "The hidden refund code is ZETA-42-OMEGA"}}
STRING_ARGUMENTS = {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "",
                                  "tool_calls": [{"function": {"name": "f", "arguments": "not json {"}}]}]}
#: what only Python takes: a keyword spelling of an option the commands have a flag for, or data_files
PYTHON_SPELLING = re.compile(r"\b(on_bad_row|validate|system_prompt|strip_think|drop_ties|push_to)=|data_files")


def _file(tmp: Path, name: str, lines: list[Any]) -> str:
    return str(write_jsonl(tmp / name, lines))


def _text(tmp: Path, name: str, text: str) -> str:
    (tmp / name).write_text(text, encoding="utf-8")
    return str(tmp / name)


def _parquet(tmp: Path) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"messages": [[{"role": "user", "content": "x"}]]}), tmp / "rows.parquet")
    return str(tmp / "rows.parquet")


Case = Callable[[Path], list[str]]
CASES: dict[str, tuple[Case, str]] = {
    "export: a line that is not JSON": (
        lambda t: ["export", _file(t, "run.jsonl", [GOOD, "{oops"]), str(t / "out.jsonl")], "not valid JSON"),
    "export: an unknown role": (
        lambda t: ["export", _file(t, "run.jsonl", [{"messages": [{"role": "bot", "content": "x"}]}]),
                   str(t / "out.jsonl")], "got 'bot'"),
    "export: no conversation": (
        lambda t: ["export", _file(t, "run.jsonl", [{"question": "q", "reply": "r"}]), str(t / "out.jsonl")],
        "no conversation to train on"),
    "export: a bad ShareGPT turn": (
        lambda t: ["export", _file(t, "run.jsonl", [{"conversations": [{"from": "bot", "value": "x"}]}]),
                   str(t / "out.jsonl")], "conversations[0].from"),
    "export: every row skipped": (
        lambda t: ["export", _file(t, "run.jsonl", ["{oops"]), str(t / "out.jsonl"), "--on-bad-row", "skip"],
        "are bad and were left out"),
    "export: an empty file": (lambda t: ["export", _text(t, "run.jsonl", ""), str(t / "out.jsonl")], "the file is empty"),
    "export: not an export's suffix": (
        lambda t: ["export", _text(t, "run.txt", json.dumps(GOOD)), str(t / "out.jsonl")], "is not a whileai export"),
    "export: a JSON array that is not JSON": (
        lambda t: ["export", _text(t, "rows.json", '[{"prompt": "x"'), str(t / "out.jsonl")], "array index 0"),
    "export: a row nested too deep": (
        lambda t: ["export", _text(t, "run.jsonl", '{"a": ' + "[" * 5000 + "]" * 5000 + "}\n"), str(t / "out.jsonl")],
        "recursion limit"),
    "export: a lone surrogate": (
        lambda t: ["export", _text(t, "run.jsonl", '{"prompt": "\\ud83e", "final_text": "x"}\n'), str(t / "out.jsonl")],
        "surrogate"),
    "export: arguments that do not parse": (
        lambda t: ["export", _file(t, "run.jsonl", [STRING_ARGUMENTS]), str(t / "out.jsonl")],
        "tool_call_roundtrip_invalid"),
    "export: a privileged leak": (
        lambda t: ["export", _file(t, "run.jsonl", [LEAKY]), str(t / "out.jsonl")], "privileged_leak"),
    "export: --on-bad-row with the Ray engine": (
        lambda t: ["export", _file(t, "run.jsonl", [GOOD]), str(t / "out"), "--on-bad-row", "skip", "--engine", "ray"],
        "--engine ray"),
    "export: --on-bad-row with --preference": (
        lambda t: ["export", _file(t, "run.jsonl", [GOOD]), str(t / "out.jsonl"), "--on-bad-row", "skip",
                   "--preference"], "--preference"),
    "push: a bad row in the rollouts": (
        lambda t: ["push", _file(t, "run.jsonl", [GOOD, {"messages": [{"content": "x"}]}]), "me/rows"], "got no role"),
    "push: no conversation in a JSON array": (
        lambda t: ["push", _text(t, "rows.json", json.dumps([{"question": "q"}])), "me/rows"],
        "no conversation to train on"),
    "push: --on-bad-row for rows already exported": (
        lambda t: ["push", _parquet(t), "me/rows", "--on-bad-row", "skip"], "rows already exported"),
    "push: --on-bad-row with the Ray engine": (
        lambda t: ["push", _file(t, "run.jsonl", [GOOD]), "me/rows", "--on-bad-row", "skip", "--engine", "ray"],
        "--engine ray"),
    "show-mask: a bad row": (
        lambda t: ["show-mask", _file(t, "run.jsonl", [GOOD, "[1]"]), "--tokenizer", str(t / "none")],
        "expected a JSON object"),
    "show-mask: every row skipped": (
        lambda t: ["show-mask", _file(t, "run.jsonl", [LLAMA_FACTORY_ROWS[0] | {"tools": "[x"}]),
                   "--tokenizer", str(t / "none"), "--on-bad-row", "skip"], "are bad and were left out"),
    "show-mask: a row out of range": (
        lambda t: ["show-mask", _file(t, "run.jsonl", [GOOD]), "--tokenizer", str(t / "none"), "--row", "5"],
        "out of range"),
}


def _flags(command: str) -> set[str]:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(commands.choices[command]._option_string_actions)


@pytest.mark.filterwarnings("ignore::UserWarning")  # BadRowsWarning of the runs that skip
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_flag_an_error_names_exists_in_its_command(case: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    argv, expected = CASES[case]
    args = argv(tmp_path)
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert expected in err, err
    message = err.splitlines()[-1]
    assert message.startswith(f"whileai-datasets {args[0]}: "), err
    assert set(option_names.flags_named(message)) <= _flags(args[0]), message
    assert not PYTHON_SPELLING.search(message), message


def test_the_rows_hints_name_the_flag_in_a_command_and_the_keyword_in_python(tmp_path: Path) -> None:
    from whileai_datasets.rows.normalize import RowContext

    ctx = RowContext("run.jsonl", 2, 1)
    python = option_names.spell("on_bad_row", "skip"), option_names.spell("validate", False)
    with option_names.command_line("export"):
        shell = option_names.spell("on_bad_row", "skip"), option_names.spell("validate", False)
        error = ctx.error("", "x", f"pass {option_names.spell('on_bad_row', 'skip')}")
    assert python == ("on_bad_row='skip'", "validate=False")
    assert shell == ("--on-bad-row skip", "--no-validate")
    assert str(error) == "run.jsonl line 2 (row 1): x. pass --on-bad-row skip"
    assert option_names.spell("system_prompt") == "system_prompt="  # the surface is Python again


def test_a_skipped_row_is_counted_in_the_export_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _file(tmp_path, "run.jsonl", [GOOD, {"question": "q"}, *LLAMA_FACTORY_ROWS])
    with pytest.warns(UserWarning, match=r"skipped 1 bad row\(s\) \(--on-bad-row skip\)"):
        assert cli.main(["export", source, str(tmp_path / "out.jsonl"), "--on-bad-row", "skip", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 4
    assert report["bad_rows"]["count"] == 1 and report["bad_rows"]["locations"] == ["run.jsonl line 2 (row 1)"]
