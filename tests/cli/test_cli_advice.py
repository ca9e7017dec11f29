"""Every piece of advice a command prints names only flags that command has.

Each command that reads rows (``export``, ``push``, ``show-mask``, ``audit``) runs over the same rows in the
shapes that draw advice (a line that is not JSON, with and without ``--on-bad-row skip``; a preference pair in
the default config; a misspelt key; a row with no conversation; a quoted leak; arguments that do not parse; a
row the template cannot render; rows with no system message). Everything it says is collected: its errors and
printed warnings (stderr), the warnings it raises, and its report (stdout). Each ``--flag`` named in it must
be one of that command's own flags (its argparse parser): an audit must not advise an export-only flag, nor
push a flag only ``export`` has.
"""

from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_jsonl
from tests.support.near_miss_rows import LLAMA_FACTORY_ROWS
from tests.support.tiny_lm import train_tokenizer, trl_template
from whileai_datasets import cli, option_names
from whileai_datasets.cli.main import build_parser

GOOD = {"messages": [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "fine thanks"}]}
LEAKY = {"prompt": "Refund PAY-1 please", "scenario_id": "s", "final_text": "The hidden refund code is ZETA-42-OMEGA.",
         "privileged": {"reference": "The hidden refund code is ZETA-42-OMEGA"}}
BAD_ARGUMENTS = {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "",
                              "tool_calls": [{"function": {"name": "f", "arguments": "not json {"}}]}]}
PAIR = {"conversations": [{"from": "human", "value": "Hi"}], "chosen": {"from": "gpt", "value": "Hello"},
        "rejected": {"from": "gpt", "value": "Yo"}}
MISSPELT = {"mesages": [{"role": "user", "content": "x"}], **GOOD}
#: a private-use character: the renderer refuses the row (a bad row for the tokenizing commands)
UNRENDERABLE = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a\ue000b"}]}
#: each input: the lines of its file (a str is written as it is)
INPUTS: dict[str, list[Any]] = {
    "not-json": [GOOD, "{oops"],
    "pair-in-default": [GOOD, PAIR],
    "misspelt-key": [MISSPELT],
    "no-conversation": [GOOD, {"question": "q", "reply": "r"}],
    "leak": [LEAKY, GOOD],
    "bad-arguments": [BAD_ARGUMENTS, GOOD],
    "unrenderable": [UNRENDERABLE, GOOD],
    "llama-factory": LLAMA_FACTORY_ROWS,
}
#: the inputs with rows a command cannot read or render: run with --on-bad-row skip too
BAD_ROWS = ("not-json", "no-conversation", "unrenderable")
#: per command: the arguments after the input, given a temp folder and the tokenizer folder
COMMANDS: dict[str, Callable[[Path, Path], list[str]]] = {
    "export": lambda tmp, tok: [str(tmp / "out.jsonl")],
    "push": lambda tmp, tok: ["me/rows"],  # the Hub is out of reach: everything before the upload is said
    "show-mask": lambda tmp, tok: ["--tokenizer", str(tok), "--rows", "3", "--no-color"],
    "audit": lambda tmp, tok: ["--tokenizer", str(tok)],
}


def _flags(command: str) -> set[str]:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {flag for flag in commands.choices[command]._option_string_actions if flag.startswith("--")}


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("advice") / "tok"
    words = ["hello there", "fine thanks", "Refund PAY-1 please", "The hidden refund code is", "Where is order"]
    train_tokenizer(words * 20, chat_template=trl_template("qwen2_5"), vocab_size=300).save_pretrained(str(folder))
    return folder


def _said(argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    """All a run says: stdout, stderr and the text of each warning it raised."""
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # a closed port: push stops at its first request
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cli.main(argv)
    out = capsys.readouterr()
    return "\n".join([out.out, out.err, *(str(w.message) for w in caught)])


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_flag_a_command_advises_is_one_of_its_own(command: str, tmp_path: Path, tokenizer_dir: Path,
                                                       capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    own = _flags(command)
    wrong: dict[str, list[str]] = {}
    for name, lines in INPUTS.items():
        for skip in ([], ["--on-bad-row", "skip"]) if name in BAD_ROWS else ([],):
            source = write_jsonl(tmp_path / f"{name}.jsonl", lines)
            said = _said([command, str(source), *COMMANDS[command](tmp_path, tokenizer_dir), *skip], capsys,
                         monkeypatch)
            named = set(option_names.flags_named(said)) - own
            if named:
                wrong[f"{name} {' '.join(skip)}".strip()] = sorted(named)
    assert not wrong, json.dumps(wrong, indent=1)


def test_each_option_spelled_as_a_flag_is_a_flag_of_the_command_running() -> None:
    for command in ("export", "push", "show-mask", "audit", "demo", "template"):
        own = _flags(command)
        with option_names.command_line(command, own):
            for name, flag in option_names.CLI_FLAGS.items():
                for value in (flag if isinstance(flag, dict) else {option_names.NO_VALUE: flag}):
                    spelt = option_names.spell(name) if value is option_names.NO_VALUE else \
                        option_names.spell(name, value)
                    assert set(option_names.flags_named(spelt)) <= own, (command, name, spelt)
                    assert option_names.has_flag(name, value) == bool(option_names.flags_named(spelt)), \
                        (command, name)


def test_every_flag_in_the_table_is_a_flag_of_some_command() -> None:
    every = set().union(*(_flags(c) for c in ("export", "push", "show-mask", "audit")))
    for flag in option_names.CLI_FLAGS.values():
        for one in (flag.values() if isinstance(flag, dict) else [flag] if flag else []):
            assert one in every, one


def test_rows_read_for_another_call_advise_none_of_the_loaders_own_keywords() -> None:
    assert option_names.LOADER_ONLY == {"parse_workers", "chunk_rows", "download_mode"}
    assert all(option_names.has_flag(name) for name in option_names.LOADER_ONLY)  # load_dataset takes them
    with option_names.read_for_another_call():  # export_dataset / audit reading a path: they take none of them
        assert not any(option_names.has_flag(name) for name in option_names.LOADER_ONLY)
        assert option_names.has_flag("on_bad_row") and option_names.has_flag("system_prompt")
    assert option_names.has_flag("parse_workers")
