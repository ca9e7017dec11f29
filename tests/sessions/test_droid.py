"""Factory Droid sessions: every call, result, text and readable thought of the file in the row, results paired
by id, local notes and redacted thinking counted, damaged records refused with file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.session_readers import (
    FIXTURES,
    assert_renders,
    assert_row_shape,
    calls,
    head,
    images,
    others,
    read,
    records,
    results,
    said,
)
from whileai_datasets.errors import ExportFormatError
from whileai_datasets.sessions import droid

FIXTURE = FIXTURES["droid"]


def _blocks(role: str) -> list[dict]:
    """The raw content blocks of the file's messages of `role` that the model saw."""
    return [block for _, record in records(FIXTURE) if record["type"] == "message"
            and record["message"]["role"] == role and record["message"].get("visibility") != "user_only"
            for block in record["message"]["content"]]


def test_droid_reads_every_call_result_text_and_thought_of_the_file() -> None:
    rows = read(droid, FIXTURE)
    assert [row["conversation"] for row in rows] == ["main"]
    assistant, user = _blocks("assistant"), _blocks("user")
    raw_calls = {block["id"]: (block["name"], block["input"]) for block in assistant if block["type"] == "tool_use"}
    assert calls(rows) == raw_calls and len(raw_calls) == 5
    assert sum(len(msg.get("tool_calls") or ()) for msg in rows[0]["messages"]) == len(raw_calls)
    assert results(rows) == {block["tool_use_id"] for block in user if block["type"] == "tool_result"}
    texts = [block["text"] for block in assistant if block["type"] == "text"]
    thoughts = [block["thinking"] for block in assistant if block["type"] == "thinking"]
    assert len(texts) == 3 and all(text in said(rows) for text in texts)
    assert len(thoughts) == 3 and all(thought in said(rows, "reasoning_content") for thought in thoughts)
    assert images(rows, "user") == 1 and images(rows, "tool") == 1


def test_droid_pairs_each_result_with_its_call_and_names_the_tool() -> None:
    row = read(droid, FIXTURE)[0]
    assert_row_shape(row, "droid")
    names = {call_id: name for call_id, (name, _) in calls([row]).items()}
    assert all(msg["name"] == names[msg["tool_call_id"]] for msg in row["messages"] if msg["role"] == "tool")
    assert row["session_id"] == records(FIXTURE)[0][1]["id"]


def test_droid_counts_what_the_model_never_saw_or_cannot_be_read() -> None:
    row = read(droid, FIXTURE)[0]
    assert row["session_notes"] == {"redacted_thinking": 1, "user_only_messages": 1, "todo_state_records": 1}
    assert "(note: check the CSV export later)" not in json.dumps(row["messages"])
    assert row["messages"][0] == {"role": "user", "content": _blocks("user")[0]["text"]}  # llm_only context kept
    assert row["tools_source"] == "inferred"
    assert {tool["function"]["name"] for tool in row["tools"]} == {"Grep", "Read", "Edit", "Execute"}


def test_droid_sniff_claims_only_droid_files() -> None:
    assert droid.sniff(head(droid, FIXTURE))
    assert not any(droid.sniff(other or []) for other in others(droid, "droid"))


def _copy(tmp_path: Path, change: dict[int, object] | None = None, extra: list[object] = ()) -> Path:
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    for number, value in (change or {}).items():
        lines[number - 1] = json.dumps(value)
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join([*lines, *map(json.dumps, extra)]) + "\n", encoding="utf-8")
    return path


def test_droid_refuses_a_record_that_is_not_a_message_naming_file_and_line(tmp_path: Path) -> None:
    path = _copy(tmp_path, {5: {"type": "message", "message": {"role": "robot", "content": "hi"}}})
    with pytest.raises(ExportFormatError, match=rf"{path},? line 5: a message record whose 'message' has role "
                                                r"'robot'.*fix or remove it"):
        read(droid, path)
    path = _copy(tmp_path, {3: ["not", "an", "object"]})
    with pytest.raises(ExportFormatError, match=rf"{path},? line 3: a record without a string 'type' \(list\)"):
        read(droid, path)


def test_droid_refuses_a_result_whose_call_was_never_made(tmp_path: Path) -> None:
    stray = {"type": "message", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_nowhere", "content": "?"}]}}
    path = _copy(tmp_path, {5: stray})
    with pytest.raises(ExportFormatError, match=rf"{path},? line 5: a tool result answers call 'toolu_nowhere', "
                                                "which no earlier assistant message made"):
        read(droid, path)


def test_droid_session_ending_on_a_result_keeps_the_last_complete_turn(tmp_path: Path) -> None:
    tail = [{"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": "Run it again"}]}},
            {"type": "message", "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_06Again", "name": "Execute", "input": {"command": "pytest -q"}}]}},
            {"type": "message", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_06Again", "content": "12 passed"}]}}]
    whole, cut = read(droid, FIXTURE)[0], read(droid, _copy(tmp_path, extra=tail))[0]
    assert cut["messages"] == whole["messages"]
    assert cut["session_notes"] == {**whole["session_notes"], "ends_inside_turn": 1, "messages_cut": 3}


def test_droid_rows_render_through_a_real_chat_template() -> None:
    row = read(droid, FIXTURE)[0]
    assert_renders(row)
