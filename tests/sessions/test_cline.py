"""Cline task histories: Anthropic-format messages into one row with every call, result, text and readable thought,
the XML tool mode read as the text it is, ui_messages.json refused for what it is, OpenAI arrays never claimed."""

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
    results,
    said,
)
from whileai_datasets.errors import ExportFormatError
from whileai_datasets.sessions import cline

FIXTURE = FIXTURES["cline"]
RAW = json.loads(FIXTURE.read_text(encoding="utf-8"))


def _blocks(role: str) -> list[dict]:
    return [block for msg in RAW if msg["role"] == role for block in msg["content"]]


def test_cline_reads_every_call_result_text_and_thought_of_the_task() -> None:
    rows = read(cline, FIXTURE)
    assert [row["conversation"] for row in rows] == ["main"]
    assistant, user = _blocks("assistant"), _blocks("user")
    raw_calls = {block["id"]: (block["name"], block["input"]) for block in assistant if block["type"] == "tool_use"}
    assert calls(rows) == raw_calls and len(raw_calls) == 5
    assert sum(len(msg.get("tool_calls") or ()) for msg in rows[0]["messages"]) == 5
    assert results(rows) == {block["tool_use_id"] for block in user if block["type"] == "tool_result"}
    texts = [block["text"] for block in assistant if block["type"] == "text"]
    thoughts = [block["thinking"] for block in assistant if block["type"] == "thinking"]
    assert len(texts) == 2 and all(text in said(rows) for text in texts)
    assert len(thoughts) == 2 and all(thought in said(rows, "reasoning_content") for thought in thoughts)
    assert images(rows, "user") == 1 and images(rows, "tool") == 1
    environment = [block["text"] for block in user if block["type"] == "text" and "<environment_details>" in block["text"]]
    assert sum(json.dumps(row["messages"]).count("<environment_details>") for row in rows) == len(environment) == 4


def test_cline_rows_keep_the_interface_and_count_redacted_thinking() -> None:
    row = read(cline, FIXTURE)[0]
    assert_row_shape(row, "cline")
    assert row["session_id"] == "cline"  # a task folder's file takes the folder's name (test below)
    assert row["session_notes"] == {"redacted_thinking": 1}
    # attempt_completion ends the task without a result: the turn is complete, nothing is dropped
    assert row["messages"][-1]["tool_calls"][0]["function"]["name"] == "attempt_completion"
    assert row["tools_source"] == "inferred"


def test_cline_xml_tool_mode_is_read_as_the_text_the_model_wrote() -> None:
    path = FIXTURES["cline_xml"]
    raw = json.loads(path.read_text(encoding="utf-8"))
    row = read(cline, path)[0]
    assert_row_shape(row, "cline")
    assert [msg["role"] for msg in row["messages"]] == [msg["role"] for msg in raw]
    assert [msg["content"] for msg in row["messages"] if msg["role"] == "assistant"] == [
        msg["content"][0]["text"] for msg in raw if msg["role"] == "assistant"]
    assert (row["tools"], row["tools_source"]) == (None, None)


def test_cline_refuses_ui_messages_and_points_at_the_history_beside_it(tmp_path: Path) -> None:
    folder = tmp_path / "tasks" / "1762247523118"
    folder.mkdir(parents=True)
    path = folder / "ui_messages.json"
    path.write_text(json.dumps([
        {"ts": 1762247523120, "type": "say", "say": "task", "text": "Add a --dry-run flag to scripts/deploy.sh"},
        {"ts": 1762247524000, "type": "say", "say": "api_req_started", "text": "{\"request\": \"...\"}"},
        {"ts": 1762247529000, "type": "ask", "ask": "tool", "text": "{\"tool\": \"readFile\"}"}]), encoding="utf-8")
    assert cline.sniff(head(cline, path))
    with pytest.raises(ExportFormatError, match=rf"{path}: this is Cline's ui_messages.json.*Load "
                                                r"api_conversation_history.json from the same task folder"):
        read(cline, path)
    history = folder / "api_conversation_history.json"
    history.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    assert read(cline, history)[0]["session_id"] == "1762247523118"


def test_cline_sniff_claims_only_cline_files() -> None:
    assert cline.sniff(head(cline, FIXTURE)) and cline.sniff(head(cline, FIXTURES["cline_xml"]))
    assert not any(cline.sniff(other) for other in others(cline, "cline", "cline_xml"))


def test_cline_sniff_leaves_an_anthropic_chat_without_anthropic_blocks_alone() -> None:
    plain = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]},
             {"role": "assistant", "content": [{"type": "text", "text": "Hello!"}]}]
    assert not cline.sniff(plain)
    assert not cline.sniff([{"role": "tool", "tool_call_id": "x", "content": [{"type": "tool_result"}]}])


def test_cline_refuses_a_result_without_its_call_naming_the_message(tmp_path: Path) -> None:
    broken = [RAW[0], {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_gone", "content": ""}]}]
    path = tmp_path / "api_conversation_history.json"
    path.write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(ExportFormatError, match=rf"{path}: a tool result \(messages\[1\]\) answers call 'toolu_gone'"):
        read(cline, path)


def test_cline_task_stopped_mid_call_keeps_the_last_complete_turn(tmp_path: Path) -> None:
    cut = [*RAW[:3], {"role": "assistant", "content": [{"type": "text", "text": "Done reading."}]},
           {"role": "user", "content": "Also lint it"}, RAW[5]]
    path = tmp_path / "api_conversation_history.json"
    path.write_text(json.dumps(cut), encoding="utf-8")
    row = read(cline, path)[0]
    assert row["messages"][-1] == {"role": "assistant", "content": "Done reading."}
    assert row["session_notes"] == {"unanswered_calls": 1, "messages_cut": 2}


def test_cline_rows_render_through_a_real_chat_template() -> None:
    for path in (FIXTURE, FIXTURES["cline_xml"]):
        row = read(cline, path)[0]
        assert_renders(row)
