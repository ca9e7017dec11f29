"""OpenHands trajectories: each LLM response once, its calls' observations as tool messages paired by id, the
system prompt and tools from the session, a condensation as context with what came before it in a row of its
own, finish as a call that awaits no result."""

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
from whileai_datasets.sessions import openhands

FIXTURE = FIXTURES["openhands"]
EVENTS = json.loads(FIXTURE.read_text(encoding="utf-8"))


def _responses() -> dict[str, dict]:
    """The LLM responses behind the agent's actions, by id (each read once)."""
    return {event["tool_call_metadata"]["model_response"]["id"]: event["tool_call_metadata"]["model_response"]
            for event in EVENTS if "action" in event and "tool_call_metadata" in event}


def test_openhands_reads_every_call_result_text_and_thought_of_the_trajectory() -> None:
    rows = read(openhands, FIXTURE)
    assert [row["conversation"] for row in rows] == ["pre-compaction:1", "main"]
    said_ = [response["choices"][0]["message"] for response in _responses().values()]
    raw_calls = {call["id"]: (call["function"]["name"], json.loads(call["function"]["arguments"]))
                 for msg in said_ for call in msg["tool_calls"]}
    assert calls(rows) == raw_calls and len(raw_calls) == 5
    # every call in exactly one row: the condensation forgot the first response and its results in the main row
    assert sum(len(msg.get("tool_calls") or ()) for row in rows for msg in row["messages"]) == 5
    assert results(rows) == {event["tool_call_metadata"]["tool_call_id"] for event in EVENTS
                             if "observation" in event and "tool_call_metadata" in event}
    assert all(msg["content"] in said(rows) for msg in said_)
    thoughts = [msg["reasoning_content"] for msg in said_ if "reasoning_content" in msg]
    thoughts += [block["thinking"] for msg in said_ for block in msg.get("thinking_blocks", ()) if "thinking" in block]
    assert len(thoughts) == 2 and all(thought in said(rows, "reasoning_content") for thought in thoughts)
    assert images(rows, "user") == 2 and images(rows, "tool") == 1  # the user's screenshot in both rows


def test_openhands_takes_the_system_prompt_and_tools_from_the_session() -> None:
    system = next(event for event in EVENTS if event.get("action") == "system")
    for row in read(openhands, FIXTURE):
        assert_row_shape(row, "openhands")
        assert row["messages"][0] == {"role": "system", "content": system["args"]["content"]}
        assert (row["tools"], row["tools_source"]) == (system["args"]["tools"], "session")
        assert row["session_id"] == "openhands"  # the file's name: a trajectory records no id


def test_openhands_condensation_summary_is_context_and_the_history_before_it_a_row() -> None:
    pre, main = read(openhands, FIXTURE)
    condensation = next(event for event in EVENTS if event.get("action") == "condensation")
    summary = [msg for msg in main["messages"] if msg.get("weight") == 0]
    assert summary == [{"role": "user", "content": condensation["args"]["summary"], "weight": 0}]
    assert main["messages"].index(summary[0]) == condensation["args"]["summary_offset"]
    forgotten = {"toolu_oh_01", "toolu_oh_02"}
    assert forgotten <= set(calls([pre])) and not forgotten & set(calls([main]))
    assert pre["messages"][-1]["role"] == "tool"  # the agent went on after these results: nothing dropped
    assert pre["session_notes"] == {}
    assert main["session_notes"] == {"compaction_summaries": 1, "redacted_thinking": 1,
                                     "agent_state_changed_events": 2, "recall_events": 2}


def test_openhands_each_condensation_leaves_its_own_row_named_by_its_number(tmp_path: Path) -> None:
    second = {"id": 11.5, "source": "agent", "action": "condensation", "args": {
        "forgotten_event_ids": [10, 11], "summary": "parse() now uses csv.reader.", "summary_offset": 3}}
    events = [*EVENTS[:12], second, *EVENTS[12:]]
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(events), encoding="utf-8")
    rows = {row["conversation"]: row for row in read(openhands, path)}
    assert list(rows) == ["pre-compaction:1", "pre-compaction:2", "main"]
    assert set(calls([rows["pre-compaction:2"]])) == {"toolu_oh_03"}
    assert set(calls([rows["main"]])) == {"toolu_oh_04", "toolu_oh_05"}
    assert [msg["content"] for msg in rows["main"]["messages"] if msg.get("weight") == 0] == [
        EVENTS[9]["args"]["summary"], second["args"]["summary"]]


def test_openhands_finish_ends_the_session_without_a_result() -> None:
    main = read(openhands, FIXTURE)[-1]
    assert main["messages"][-1]["tool_calls"][0]["function"]["name"] == "finish"
    assert "unanswered_calls" not in main["session_notes"]


def test_openhands_sniff_claims_only_trajectories() -> None:
    assert openhands.sniff(head(openhands, FIXTURE))
    assert not any(openhands.sniff(other) for other in others(openhands, "openhands"))


def test_openhands_refuses_an_observation_for_a_call_never_made(tmp_path: Path) -> None:
    events = [event for event in EVENTS if event["id"] not in (5, 6)]  # the actions of the first response lost
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(events), encoding="utf-8")
    with pytest.raises(ExportFormatError, match=rf"{path}: a tool result \(event id 7\) answers call 'toolu_oh_01'"):
        read(openhands, path)


def test_openhands_refuses_agent_actions_written_without_function_calling(tmp_path: Path) -> None:
    events = [*EVENTS[:3], {"id": 3, "source": "agent", "action": "run", "args": {"command": "ls", "thought": ""}}]
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(events), encoding="utf-8")
    with pytest.raises(ExportFormatError, match=rf"{path}: the agent's 'run' action \(event id 3\) carries no "
                                                "tool_call_metadata. Only trajectories written in function-calling"):
        read(openhands, path)


def test_openhands_rows_render_through_a_real_chat_template() -> None:
    for row in read(openhands, FIXTURE):
        assert_renders(row)
