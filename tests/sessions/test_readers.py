"""Each agent's session files load through ``load_dataset("whileai/export")``, with nothing lost and nothing
invented: every tool call, tool result, assistant text block and readable reasoning block of the raw file is in
the rows (counted here from the raw file, by a reading of each layout written for the test), results pair with
their calls by id, and what was read but not trained is named in ``session_notes``.

The fixtures in tests/data/sessions/ are small files written for these tests in each agent's layout.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "sessions"


def _jsonl(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


class Raw:
    """What a raw session file holds, counted: call ids, result ids, assistant texts, readable reasoning."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.results: list[str] = []
        self.texts: list[str] = []
        self.reasoning: list[str] = []


def _claude_code(name: str) -> Raw:
    raw = Raw()
    for record in _jsonl(name):
        message = record.get("message") or {}
        content = message.get("content")
        if not isinstance(content, list) or message.get("model") == "<synthetic>":
            continue
        for block in content:
            kind = block.get("type")
            if kind == "tool_use":
                raw.calls.append(block["id"])
            elif kind == "tool_result":
                raw.results.append(block["tool_use_id"])
            elif kind == "text" and record["type"] == "assistant":
                raw.texts.append(block["text"])
            elif kind == "thinking" and block["thinking"]:
                raw.reasoning.append(block["thinking"])
    return raw


def _codex(name: str) -> Raw:
    raw = Raw()
    for record in _jsonl(name):
        item = record.get("payload") if record.get("type") == "response_item" else record
        kind = item.get("type")
        if kind in ("function_call", "custom_tool_call"):
            raw.calls.append(item["call_id"])
        elif kind in ("function_call_output", "custom_tool_call_output"):
            raw.results.append(item["call_id"])
        elif kind == "message" and item["role"] == "assistant":
            raw.texts += [part["text"] for part in item["content"]]
        elif kind == "reasoning":
            raw.reasoning += [p["text"] for key in ("summary", "content") for p in item.get(key) or ()]
    return raw


def _gemini_messages(name: str) -> list[dict[str, Any]]:
    if name.endswith(".json"):
        return json.loads((DATA / name).read_text())["messages"]
    kept: dict[str, dict[str, Any]] = {}
    for record in _jsonl(name):
        if "$rewindTo" in record:
            ids = list(kept)
            for key in ids[ids.index(record["$rewindTo"]):]:
                del kept[key]
        elif "id" in record and "type" in record:
            kept[record["id"]] = record
    return list(kept.values())


def _gemini(name: str) -> Raw:
    raw = Raw()
    for message in _gemini_messages(name):
        if message["type"] != "gemini":
            continue
        if message["content"]:
            raw.texts.append(message["content"])
        raw.reasoning += [t["description"] for t in message.get("thoughts") or ()]
        for call in message.get("toolCalls") or ():
            raw.calls.append(call["id"])
            raw.results += [part["functionResponse"]["id"] for part in call.get("result") or ()]
    return raw


def _copilot(name: str) -> Raw:
    raw = Raw()
    for event in _jsonl(name):
        data = event["data"]
        if event["type"] == "assistant.message":
            raw.calls += [r["toolCallId"] for r in data.get("toolRequests") or ()]
            if data["content"]:
                raw.texts.append(data["content"])
        elif event["type"] == "tool.execution_complete":
            raw.results.append(data["toolCallId"])
        elif event["type"] == "assistant.reasoning":
            raw.reasoning.append(data["content"])
    return raw


def _hermes(name: str) -> Raw:
    raw = Raw()
    for session in _jsonl(name):
        for message in session["messages"]:
            raw.calls += [c["id"] for c in message.get("tool_calls") or ()]
            if message["role"] == "tool":
                raw.results.append(message["tool_call_id"])
            elif message["role"] == "assistant":
                raw.texts += [message["content"]] if message["content"] else []
                raw.reasoning += [message["reasoning"]] if message.get("reasoning") else []
    return raw


def _aider(name: str) -> Raw:
    raw = Raw()
    # the model's replies: the runs of lines between a user's '#### ' lines and aider's '> ' output
    for session in re.split(r"^# aider chat started at .*$", (DATA / name).read_text(), flags=re.MULTILINE)[1:]:
        for block in re.split(r"^(?:#### .*|>.*)$", session, flags=re.MULTILINE):
            if block.strip():
                raw.texts.append(block.strip("\n"))
    return raw


FIXTURES = {
    "claude_code.jsonl": ("claude_code", _claude_code),
    "codex.jsonl": ("codex", _codex),
    "codex_legacy.jsonl": ("codex", _codex),
    "gemini.jsonl": ("gemini", _gemini),
    "gemini_legacy.json": ("gemini", _gemini),
    "copilot.jsonl": ("copilot", _copilot),
    "hermes.jsonl": ("hermes", _hermes),
    "aider.chat.history.md": ("aider", _aider),
}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import datasets

    cache = str(tmp_path_factory.mktemp("cache"))
    return {name: datasets.load_dataset("whileai/export", data_files=str(DATA / name), split="train",
                                        cache_dir=cache) for name in FIXTURES}


def _messages(ds: Any) -> list[dict[str, Any]]:
    return [m for row in ds for m in row["messages"]]


@pytest.mark.parametrize("name", FIXTURES)
def test_every_call_result_text_and_reasoning_block_of_the_file_is_in_the_rows(name: str, loaded: dict[str, Any]) -> None:
    agent, count = FIXTURES[name]
    raw, ds = count(name), loaded[name]
    messages = _messages(ds)
    assert set(ds["agent"]) == {agent}
    assert set(ds["source_file"]) == {name}
    calls = [c["id"] for m in messages for c in m["tool_calls"] or ()]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert Counter(calls) == Counter(raw.calls)
    assert Counter(results) == Counter(raw.results)
    said = "\n".join(m["content"] or "" for m in messages if m["role"] == "assistant")
    thought = "\n".join(m["reasoning_content"] or "" for m in messages)
    assert raw.texts and all(text in said for text in raw.texts)
    assert all(text in thought for text in raw.reasoning)
    assert sum(said.count(text) for text in set(raw.texts)) >= len(raw.texts)  # none merged away


@pytest.mark.parametrize("name", FIXTURES)
def test_results_follow_their_calls_and_every_row_trains_an_assistant_turn(name: str, loaded: dict[str, Any]) -> None:
    for row in loaded[name]:
        open_calls: set[str] = set()
        for message in row["messages"]:
            if message["role"] == "tool":
                assert message["tool_call_id"] in open_calls
                open_calls.discard(message["tool_call_id"])
            else:
                assert not open_calls, "a call left unanswered inside a row"
                open_calls.update(c["id"] for c in message["tool_calls"] or ())
        assert row["messages"][-1]["role"] == "assistant" and any(row["loss_mask"])


def test_claude_code_subagent_is_a_row_of_its_own_and_the_parent_keeps_its_call_and_result(
        loaded: dict[str, Any]) -> None:
    rows = {row["conversation"]: row for row in loaded["claude_code.jsonl"]}
    assert set(rows) == {"main", "pre-compaction:0", "sidechain:b3f1c2d4", "branch:a9x"}
    side = rows["sidechain:b3f1c2d4"]["messages"]
    assert side[0] == {**side[0], "role": "user", "content": "Find where sales tax is configured in this repo."}
    parent = rows["pre-compaction:0"]["messages"]
    task = [c for m in parent for c in m["tool_calls"] or () if c["function"]["name"] == "Task"]
    assert len(task) == 1 and any(m["tool_call_id"] == task[0]["id"] for m in parent)
    assert not any(c["id"] == "toolu_s1" for m in parent for c in m["tool_calls"] or ())


def test_claude_code_compaction_summary_is_context_and_what_came_before_is_a_row(loaded: dict[str, Any]) -> None:
    rows = {row["conversation"]: row for row in loaded["claude_code.jsonl"]}
    main = rows["main"]
    assert main["messages"][0]["content"].startswith("This session is being continued")
    assert main["loss_mask"][0] == 0
    assert rows["pre-compaction:0"]["messages"][0]["content"].startswith("The cart total test fails")
    assert main["session_notes"]["compaction_summaries"] == 1


def test_claude_code_split_message_merges_and_signed_thinking_is_named(loaded: dict[str, Any]) -> None:
    rows = {row["conversation"]: row for row in loaded["claude_code.jsonl"]}
    first = rows["pre-compaction:0"]["messages"][1]
    assert first["reasoning_content"] == "I should run the tests first to see the failure."
    assert [c["id"] for c in first["tool_calls"]] == ["toolu_01A", "toolu_01B"]
    notes = [row["session_notes"] for row in rows.values()]
    assert sum(n.get("redacted_thinking", 0) for n in notes) == 2
    assert rows["pre-compaction:0"]["session_notes"]["synthetic_messages"] == 1


def test_claude_code_an_edited_turn_leaves_a_branch_of_its_own_never_interleaved(loaded: dict[str, Any]) -> None:
    rows = {row["conversation"]: row for row in loaded["claude_code.jsonl"]}
    branch = [m["content"] for m in rows["branch:a9x"]["messages"]]
    main = [m["content"] for m in rows["main"]["messages"] if isinstance(m["content"], str)]
    assert branch[1:] == ["Is the total on the checkout page right?",
                          "I cannot see the page from here; can you send a screenshot?"]
    assert branch[0] == main[0] and rows["branch:a9x"]["loss_mask"][0] == 0  # the summary both start from
    assert "Is the total on the checkout page right?" not in main


def test_images_in_user_turns_and_tool_results_stay_content_parts(loaded: dict[str, Any]) -> None:
    rows = {row["conversation"]: row for row in loaded["claude_code.jsonl"]}
    parts = [(m["role"], p["type"]) for m in rows["main"]["messages"] for p in m["parts"] or ()]
    assert ("user", "image") in parts and ("tool", "image") in parts


def test_codex_custom_tool_call_is_a_call_and_developer_text_joins_the_system_message(loaded: dict[str, Any]) -> None:
    rows = {row["conversation"]: row for row in loaded["codex.jsonl"]}
    before = rows["pre-compaction:0"]["messages"]
    assert before[0]["role"] == "system" and "Sandbox: workspace-write" in before[0]["content"]
    patch = [c for m in before for c in m["tool_calls"] or () if c["function"]["name"] == "apply_patch"]
    assert json.loads(patch[0]["function"]["arguments"])["input"].startswith("*** Begin Patch")
    assert rows["main"]["session_notes"]["encrypted_reasoning"] == 1
    assert rows["main"]["loss_mask"][1] == 0 and rows["main"]["messages"][1]["content"].startswith("The user asked")


def test_hermes_system_prompt_is_the_system_message_and_a_delegated_session_a_sidechain(loaded: dict[str, Any]) -> None:
    rows = {row["conversation"]: row for row in loaded["hermes.jsonl"]}
    assert rows["main"]["messages"][0] == {**rows["main"]["messages"][0], "role": "system",
                                           "content": "You are Hermes Agent, an AI assistant with tools."}
    assert "sidechain:20261106_103000_ef34gh" in rows


def test_gemini_rewind_drops_the_replaced_answer(loaded: dict[str, Any]) -> None:
    said = [m["content"] for m in _messages(loaded["gemini.jsonl"]) if m["role"] == "assistant"]
    assert "It has 41 lines." not in said and "README.md has 42 lines." in said


def test_tools_are_inferred_from_the_calls_and_say_so(loaded: dict[str, Any]) -> None:
    row = next(r for r in loaded["copilot.jsonl"])
    assert row["tools_source"] == "inferred"
    names = {tool["function"]["name"] for tool in row["tools"]}
    assert names == {"view", "bash"}


def test_the_audit_counts_what_the_readers_cut_and_left_untrained(tmp_path: Path) -> None:
    from whileai_datasets import audit

    lines = (DATA / "copilot.jsonl").read_text().splitlines(keepends=True)
    stopped = tmp_path / "events.jsonl"  # the session stops on a call with no result, after a complete turn
    stopped.write_text("".join(lines) + lines[5].replace('"am1"', '"am4"').replace("toolu_vrtx_01", "toolu_vrtx_09"))
    found = audit(str(stopped))
    assert found.count("session_turns_cut") == 1 and found.findings["session_turns_cut"].amount == 1
    notes = found.to_dict()["findings"]
    assert notes["session_not_trained"]["amount"] == 4  # turn start/end, tool start, session info events
    assert notes["session_tools_inferred"]["rows"] == 1
    assert "session-turns-cut" in found.format()
    row = next(iter(__import__("datasets").load_dataset("whileai/export", data_files=str(stopped), split="train",
                                                        cache_dir=str(tmp_path / "cache"))))
    assert row["session_notes"]["unanswered_calls"] == 1 and row["messages"][-1]["content"].startswith("It needs")


@pytest.mark.parametrize("name", ["claude_code.jsonl", "codex.jsonl", "codex_legacy.jsonl"])
def test_claude_code_and_codex_tools_come_from_the_agent_table_and_fit_every_call(
        name: str, loaded: dict[str, Any]) -> None:
    for row in loaded[name]:
        called = {c["function"]["name"]: json.loads(c["function"]["arguments"])
                  for m in row["messages"] for c in m.get("tool_calls") or ()}
        if not called:
            continue
        assert row["tools_source"] == "agent_table"
        schemas = {tool["function"]["name"]: tool["function"] for tool in row["tools"]}
        assert set(schemas) == set(called)  # only the tools called, each with the table's description
        for tool, arguments in called.items():
            parameters = schemas[tool]["parameters"]
            assert schemas[tool]["description"]
            assert set(parameters["required"]) <= set(arguments) <= set(parameters["properties"]), tool


def test_a_tool_outside_the_agent_table_is_inferred_and_the_audit_says_so(tmp_path: Path) -> None:
    import datasets

    from whileai_datasets import audit

    text = (DATA / "claude_code.jsonl").read_text()
    assert text.count('"name": "Edit"') == 1  # beside Bash calls, before the compaction
    path = tmp_path / "session.jsonl"
    path.write_text(text.replace('"name": "Edit"', '"name": "mcp__repo__search"'))
    rows = datasets.load_dataset("whileai/export", data_files=str(path), split="train",
                                 cache_dir=str(tmp_path / "cache"))
    mixed = [row for row in rows if row["tools_source"] == "agent_table+inferred"]
    assert len(mixed) == 1
    tools = {tool["function"]["name"]: tool["function"] for tool in mixed[0]["tools"]}
    assert "description" not in tools["mcp__repo__search"] and tools["Bash"]["description"]
    inferred = [row["conversation"] for row in rows if "inferred" in (row["tools_source"] or "")]
    assert inferred == [mixed[0]["conversation"]]  # the other rows' calls are all in the table
    found = audit(str(path))
    assert found.to_dict()["findings"]["session_tools_inferred"]["rows"] == len(inferred)
