"""OpenHands trajectories: each LLM response once, its calls' observations as tool messages paired by id, the
system prompt and tools from the session, a condensation as context with what came before it in a row of its
own, finish as a call that awaits no result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.session_readers import (
    FIXTURES,
    assert_paired,
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


# ------------------------------------------------------------------ V1: a conversation folder, one file per event

V1_ROOT = FIXTURE.parent / "openhands_v1"
V1_FOLDER = next(V1_ROOT.iterdir())
V1_EVENTS = [json.loads(path.read_text(encoding="utf-8"))
             for path in sorted((V1_FOLDER / "events").glob("event-*.json"))]
V1_STATE = json.loads((V1_FOLDER / "base_state.json").read_text(encoding="utf-8"))


def _v1_texts(parts: list[dict]) -> list[str]:
    return [part["text"] for part in parts if part.get("type") == "text" and part["text"]]


def _v1_raw() -> dict[str, list]:
    """What the folder's event files hold, counted by a reading of the V1 layout written for this test."""
    raw: dict[str, list] = {"calls": [], "results": [], "texts": [], "thoughts": [], "user": []}
    for event in V1_EVENTS:
        kind = event["kind"]
        if kind == "ActionEvent":
            raw["calls"].append((event["tool_call"]["id"], event["tool_call"]["name"],
                                 json.loads(event["tool_call"]["arguments"])))
            raw["texts"] += _v1_texts(event.get("thought", []))
            raw["thoughts"] += [event["reasoning_content"]] if event.get("reasoning_content") else []
            raw["thoughts"] += [block["thinking"] for block in event.get("thinking_blocks", ()) if "thinking" in block]
            raw["thoughts"] += event.get("responses_reasoning_item", {}).get("summary", [])
        elif (kind in ("ObservationEvent", "UserRejectObservation", "AgentErrorEvent")
              and event["tool_name"] != "finish"):
            raw["results"].append(event["tool_call_id"])
        elif kind == "MessageEvent":
            said_ = event["llm_message"]
            raw["texts" if said_["role"] == "assistant" else "user"] += _v1_texts(said_["content"])
            raw["thoughts"] += [said_["reasoning_content"]] if said_.get("reasoning_content") else []
    return raw


@pytest.fixture(scope="module")
def v1_rows(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    """The folder loaded through the front door: by a glob of its files, and as a data_dir."""
    import datasets

    from tests.conftest import template_rows

    cache = str(tmp_path_factory.mktemp("cache"))
    by_glob = datasets.load_dataset("whileai/export", data_files=str(V1_ROOT / "**"), split="train", cache_dir=cache)
    by_dir = datasets.load_dataset("whileai/export", data_dir=str(V1_ROOT), split="train", cache_dir=cache)
    return {"glob": template_rows(by_glob), "data_dir": template_rows(by_dir), "loss_mask": by_glob["loss_mask"]}


def test_openhands_v1_folder_is_one_conversation_with_every_call_result_text_and_thought(v1_rows: dict) -> None:
    assert list((V1_FOLDER / "observations").glob("*.txt"))  # a glob of the folder takes them too, unread
    raw = _v1_raw()
    rows = v1_rows["glob"]
    assert rows == v1_rows["data_dir"]
    assert [row["conversation"] for row in rows] == ["pre-compaction:1", "main"]
    assert {(row["agent"], row["session_id"], row["source_file"]) for row in rows} == {
        ("openhands", V1_STATE["id"], V1_FOLDER.name)}
    made = [(call["id"], call["function"]["name"], json.loads(call["function"]["arguments"]))
            for row in rows for msg in row["messages"] for call in msg.get("tool_calls") or ()]
    assert sorted(made) == sorted(raw["calls"]) and len(made) == 7  # each call once, though the condensation forgot 3
    answered = [msg["tool_call_id"] for row in rows for msg in row["messages"] if msg["role"] == "tool"]
    assert sorted(answered) == sorted(raw["results"]) and len(answered) == 6
    assert all(text in said(rows) for text in raw["texts"]) and len(raw["texts"]) == 6
    assert all(thought in said(rows, "reasoning_content") for thought in raw["thoughts"]) and len(raw["thoughts"]) == 4
    user = "\n".join(str(msg["content"]) for row in rows for msg in row["messages"] if msg["role"] == "user")
    assert all(text in user for text in raw["user"])
    assert images(rows, "user") == 2  # the user's screenshot, in both rows
    # the two calls of one LLM response are one assistant message; its thought is that message's text
    first = next(msg for msg in rows[0]["messages"] if msg.get("tool_calls"))
    assert [call["id"] for call in first["tool_calls"]] == ["toolu_01Vx7aQ2", "toolu_01Vx7aQ3"]
    assert first["content"] == "Let me reproduce the crash and read the parser."
    for row in rows:
        assert_paired(row)
        assert_renders(row)


def test_openhands_v1_condensation_summary_is_context_and_what_it_forgot_a_row_of_its_own(v1_rows: dict) -> None:
    pre, main = v1_rows["glob"]
    condensation = next(event for event in V1_EVENTS if event["kind"] == "Condensation")
    at = [msg["content"] for msg in main["messages"]].index(condensation["summary"])
    assert at == condensation["summary_offset"] and main["messages"][at]["role"] == "user"
    assert v1_rows["loss_mask"][1][at] == 0  # context: it trains nothing (the builder read its weight 0)
    assert all(any(mask) for mask in v1_rows["loss_mask"])  # no row without a turn to train
    forgotten = {event["tool_call_id"] for event in V1_EVENTS
                 if event["id"] in condensation["forgotten_event_ids"] and event["kind"] == "ActionEvent"}
    assert len(forgotten) == 3 and forgotten <= set(calls([pre])) and not forgotten & set(calls([main]))
    assert main["messages"][-1]["tool_calls"][0]["function"]["name"] == "finish"  # its echo is counted, not read
    assert main["session_notes"] == {"compaction_summaries": 1, "conversation_state_update_events": 2,
                                     "encrypted_reasoning": 1, "finish_observations": 1, "redacted_thinking": 1}


def test_openhands_v1_tools_are_named_and_described_by_the_session_and_their_parameters_inferred(
        v1_rows: dict) -> None:
    system = next(event for event in V1_EVENTS if event["kind"] == "SystemPromptEvent")
    described = {tool["title"]: tool["description"] for tool in system["tools"]}
    for row in v1_rows["glob"]:
        assert row["tools_source"] == "session+inferred"
        called = {call["function"]["name"] for msg in row["messages"] for call in msg.get("tool_calls") or ()}
        assert {tool["function"]["name"] for tool in row["tools"]} == called
        for tool in row["tools"]:
            assert tool["function"].get("description") == described.get(tool["function"]["name"])
    assert row["messages"][0] == {"role": "system", "content": system["system_prompt"]["text"] + "\n"
                                  + system["dynamic_context"]["text"]}


def _copy_folder(tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(V1_FOLDER, tmp_path / "conversations" / V1_FOLDER.name))


def test_openhands_v1_refuses_a_cut_event_file_and_a_missing_one_naming_the_file(tmp_path: Path, load: Any) -> None:
    folder = _copy_folder(tmp_path)
    last = sorted((folder / "events").glob("event-*.json"))[-1]
    last.write_bytes(last.read_bytes()[:40])
    with pytest.raises(ExportFormatError, match=rf"{folder.name}/events/{last.name} line 1: not one whole JSON value"):
        load(str(folder.parent / "**"))
    last.unlink()
    (folder / "events" / sorted(p.name for p in (folder / "events").glob("event-*.json"))[3]).unlink()
    missing = r"event-00004-.*\.json: the event file of index 3 is missing \(the indexes jump from 2 to 4\)"
    with pytest.raises(ExportFormatError, match=missing):
        load(str(folder.parent / "**"), download_mode="force_redownload")


def test_openhands_v1_two_folders_are_two_conversations_and_one_event_file_alone_is_refused(
        tmp_path: Path, load: Any) -> None:
    import shutil

    folder = _copy_folder(tmp_path)
    other = Path(shutil.copytree(folder, folder.parent / "0c0ffee00c0ffee00c0ffee00c0ffee0"))
    state = {**V1_STATE, "id": "0c0ffee0-0c0f-fee0-0c0f-fee00c0ffee0"}
    (other / "base_state.json").write_text(json.dumps(state), encoding="utf-8")
    ds = load(str(folder.parent / "*" / "events" / "*.json"))
    assert ds["session_id"] == [state["id"]] * 2 + [V1_STATE["id"]] * 2
    assert ds["source_file"] == [other.name] * 2 + [folder.name] * 2
    event = sorted((folder / "events").glob("event-*.json"))[2]
    assert openhands.sniff(json.loads(event.read_text(encoding="utf-8"))) and openhands.sniff(V1_STATE)
    with pytest.raises(ExportFormatError, match="one file of an OpenHands conversation folder"):
        list(openhands.read(json.loads(event.read_text(encoding="utf-8")), event.name))


def test_openhands_v1_a_session_folder_walk_finds_the_conversation_files(tmp_path: Path) -> None:
    from whileai_datasets.sessions.detect import session_files

    folder = _copy_folder(tmp_path)
    found, left_out = session_files(str(folder.parent))
    assert left_out == []
    assert sorted(found) == sorted([str(folder / "base_state.json"), *map(str, (folder / "events").glob("event-*"))])
