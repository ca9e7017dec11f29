"""Sessions are told by content: each agent's sniff takes its own files only (never whileai rows), an event log
no reader takes is refused with its file, line and closest known layout, and a last line cut short is refused
naming the file and line; nothing of the kind is read as empty rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from whileai_datasets.errors import ExportFormatError
from whileai_datasets.sessions import detect
from whileai_datasets.sessions.common import SessionFormatError

DATA = Path(__file__).resolve().parents[1] / "data" / "sessions"
AGENT_OF = {"claude_code.jsonl": "claude_code", "codex.jsonl": "codex", "codex_legacy.jsonl": "codex",
            "gemini.jsonl": "gemini", "gemini_legacy.json": "gemini", "copilot.jsonl": "copilot",
            "hermes.jsonl": "hermes", "aider.chat.history.md": "aider"}
WHILEAI_ROWS = [
    {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], "reward": 1.0},
    {"prompt": "where is my order?", "steps": [{"tool": "lookup", "arguments": {"n": 1}, "result": "day 2"}],
     "final_text": "It ships on day 2."},
    {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]},
]


def _load(path: Path, cache: Path) -> Any:
    import datasets

    return datasets.load_dataset("whileai/export", data_files=str(path), split="train", cache_dir=str(cache))


@pytest.mark.parametrize("name", AGENT_OF)
def test_each_file_is_taken_by_its_own_agent_only(name: str) -> None:
    with open(DATA / name, "rb") as handle:
        found = detect.detect(name, handle)
        assert handle.tell() == 0
    assert found is not None and found.agent == AGENT_OF[name]
    head = [json.loads(line) for line in (DATA / name).read_text().splitlines()[:16]] if name.endswith(".jsonl") else None
    if head is not None:  # no other agent's sniff takes this head
        takers = [m.AGENT for m in detect.readers() if m.LAYOUT == "jsonl" and m.sniff(head)]
        assert takers == [AGENT_OF[name]]


def test_whileai_rows_are_no_session(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in WHILEAI_ROWS))
    with open(path, "rb") as handle:
        assert detect.detect(path.name, handle) is None
    assert not any(m.sniff(WHILEAI_ROWS) for m in detect.readers() if m.LAYOUT == "jsonl")


def test_an_unknown_event_log_is_refused_with_its_file_line_and_closest_layout(tmp_path: Path) -> None:
    path = tmp_path / "agent-events.jsonl"
    events = [{"type": "session_begin", "timestamp": "2026-11-01T00:00:00Z", "payload": {"id": "x"}},
              {"type": "model_output", "timestamp": "2026-11-01T00:00:01Z", "payload": {"text": "hi"}}]
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    with pytest.raises(SessionFormatError, match=r"agent-events.jsonl line 1: this looks like an event log .*"
                                                r"closest known layout is codex's"):
        _load(path, tmp_path / "cache")


def test_a_session_whose_last_line_is_cut_short_is_refused_naming_file_and_line(tmp_path: Path) -> None:
    text = (DATA / "codex.jsonl").read_text()
    path = tmp_path / "rollout-cut.jsonl"
    path.write_text(text[: len(text) - 40])  # the last line loses its end and its newline
    lines = text.count("\n")
    with pytest.raises(SessionFormatError, match=rf"rollout-cut.jsonl line {lines}: the last line is cut short"):
        _load(path, tmp_path / "cache")


#: Every session file among the fixtures (a folder of OpenHands conversations is tested in test_openhands.py).
SESSION_FILES = sorted(path.name for path in DATA.iterdir() if path.is_file() and not path.name.endswith(".md"))


@pytest.mark.parametrize("name", SESSION_FILES)
def test_every_agent_s_session_cut_short_is_refused_naming_file_and_line(name: str, tmp_path: Path) -> None:
    text = (DATA / name).read_text(encoding="utf-8").rstrip("\n")
    path = tmp_path / name
    path.write_text(text[:-9], encoding="utf-8")  # a copy that stops inside the last record
    if name.endswith(".jsonl"):
        where, what = text.count("\n") + 1, "the last line is cut short"
    else:
        with pytest.raises(json.JSONDecodeError) as cut:
            json.loads(text[:-9])
        where = cut.value.lineno
        what = "this .* session is cut short" if text.startswith("[") else "not valid JSON"
    with pytest.raises(ExportFormatError, match=rf"{name} line {where}\b.*{what}"):
        _load(path, tmp_path / "cache")


def test_a_markdown_file_that_is_no_aider_history_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "NOTES.md"
    path.write_text("# Notes\n\nnothing here\n")
    with pytest.raises(SessionFormatError, match=r"NOTES.md line 1: a .md file is read only as an Aider chat"):
        _load(path, tmp_path / "cache")


def test_a_session_with_no_complete_turn_is_refused_not_read_as_an_empty_row(tmp_path: Path) -> None:
    first_two = (DATA / "copilot.jsonl").read_text().splitlines(keepends=True)[:3]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(first_two))
    with pytest.raises(SessionFormatError, match=r"events.jsonl: no complete assistant turn in this copilot"):
        _load(path, tmp_path / "cache")


def test_a_glob_over_a_session_folder_reads_every_agent_and_whileai_rows_beside_them(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    for name in ("claude_code.jsonl", "codex.jsonl", "gemini_legacy.json"):
        shutil.copy(DATA / name, folder / name)
    (folder / "rows.jsonl").write_text(json.dumps(WHILEAI_ROWS[0]) + "\n")
    import datasets

    ds = datasets.load_dataset("whileai/export", data_files=str(folder / "*"), split="train",
                               cache_dir=str(tmp_path / "cache"))
    assert sorted(set(a for a in ds["agent"] if a)) == ["claude_code", "codex", "gemini"]
    assert ds["agent"].count(None) == 1 and ds.num_rows == 4 + 2 + 1 + 1


def test_the_audit_takes_a_session_folder_and_says_which_files_it_left_out(tmp_path: Path) -> None:
    from whileai_datasets import audit

    for project, name in (("-home-dev-shop", "claude_code.jsonl"), ("-home-dev-app", "hermes.jsonl")):
        (tmp_path / project).mkdir()
        shutil.copy(DATA / name, tmp_path / project / name)
    (tmp_path / "-home-dev-app" / "logs.json").write_text('[{"sessionId": "x", "type": "user", "message": "hi"}]')
    with pytest.warns(UserWarning, match=r"read 2 session log\(s\); left out 1 file\(s\) that are no session"):
        found = audit(str(tmp_path))
    assert found.training_rows == 4 + 2


def test_an_export_of_sessions_loads_back_with_its_session_columns(tmp_path: Path) -> None:
    import datasets

    from whileai_datasets import export_dataset

    export_dataset(str(DATA / "copilot.jsonl"), str(tmp_path / "out.jsonl"))
    again = datasets.load_dataset("whileai/export", data_files=str(tmp_path / "out.jsonl"), split="train",
                                  cache_dir=str(tmp_path / "cache"))
    assert again["agent"] == ["copilot"] and again["conversation"] == ["main"]
    assert again[0]["session_notes"]["tool.execution_start_events"] == 1
