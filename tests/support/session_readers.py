"""Helpers for the tests of the OpenHands, Cline, Droid and pi/OpenClaw session readers: a file handed to a reader
the way its layout says, what the yielded rows hold (calls, results, texts, reasoning), and a render of each row
through a real chat template."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

from whileai_datasets.chat_template import ChatTemplate

DATA = Path(__file__).resolve().parents[1] / "data" / "sessions"
#: Every session fixture of these readers.
FIXTURES = {name: DATA / f"{name}{suffix}" for name, suffix in (
    ("openhands", ".json"), ("cline", ".json"), ("cline_xml", ".json"), ("droid", ".jsonl"), ("pi", ".jsonl"),
    ("openclaw", ".jsonl"))}
#: Plain OpenAI chat, as a bare array of messages and as ``messages`` rows: no session reader may claim it.
PLAIN_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": [{"type": "text", "text": "What's the weather in Oslo?"}]},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "4°C, rain"},
    {"role": "assistant", "content": "It's 4°C and raining in Oslo."}]


#: The first records of the session logs the room's other readers take (Claude Code, Codex CLI, Copilot CLI,
#: Gemini CLI's older JSON, a Hermes export), in their own layouts: no reader here may claim them.
OTHER_AGENTS = [
    [{"type": "user", "sessionId": "5b1f", "uuid": "u1", "parentUuid": None, "isSidechain": False,
      "message": {"role": "user", "content": "fix the build"}}],
    [{"timestamp": "2026-11-01T10:00:00Z", "type": "session_meta", "payload": {"id": "0199", "cwd": "/w"}},
     {"type": "response_item", "payload": {"type": "message", "role": "user", "content": []}}],
    [{"type": "session.start", "id": "e1", "timestamp": "2026-11-01T10:00:00Z", "parentId": None,
      "data": {"sessionId": "c0p1", "cwd": "/w"}}],
    {"sessionId": "g1", "projectHash": "ab12", "startTime": "2026-11-01T10:00:00Z",
     "messages": [{"id": "m1", "type": "user", "content": "hi"}]},
    [{"id": "h1", "source": "cli", "model": "hermes-4", "system_prompt": "You are Hermes.",
      "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}],
]


def others(module: ModuleType, *own: str) -> list[Any]:
    """What `module`'s sniff is handed for every fixture but its `own`, for the other agents' first records and for
    plain OpenAI chat in its layout."""
    plain = PLAIN_MESSAGES if module.LAYOUT == "json" else [{"messages": PLAIN_MESSAGES}, {"messages": PLAIN_MESSAGES[:2]}]
    agents = [value if module.LAYOUT == "json" or isinstance(value, list) else [value] for value in OTHER_AGENTS]
    return [*(head(module, path) for name, path in FIXTURES.items() if name not in own), *agents, plain,
            PLAIN_MESSAGES[1:]]


def records(path: Path) -> list[tuple[int, Any]]:
    """A JSONL file's (line number, value) pairs."""
    with open(path, encoding="utf-8") as handle:
        return [(number, json.loads(line)) for number, line in enumerate(handle, 1) if line.strip()]


def head(module: ModuleType, path: Path) -> Any:
    """What `module`'s sniff is handed for `path`: the first 16 values of a JSONL file, a JSON file's value, or the
    text; None when the file is not in the module's layout at all."""
    text = path.read_text(encoding="utf-8")
    try:
        if module.LAYOUT == "json":
            return json.loads(text)
        if module.LAYOUT == "jsonl":
            return [value for _, value in records(path)][:16]
    except ValueError:
        return None
    return text[:65536]


def read(module: ModuleType, path: Path, **options: Any) -> list[dict[str, Any]]:
    """Every row `module` yields for `path`, its source handed over as the layout says."""
    if module.LAYOUT == "jsonl":
        return list(module.read(iter(records(path)), str(path), **options))
    return list(module.read(json.loads(path.read_text(encoding="utf-8")), str(path), **options))


def calls(rows: list[dict[str, Any]]) -> dict[str, tuple[str, Any]]:
    """Every call of the rows by id: its name and parsed arguments."""
    return {call["id"]: (call["function"]["name"], json.loads(call["function"]["arguments"]))
            for row in rows for msg in row["messages"] for call in msg.get("tool_calls") or ()}


def results(rows: list[dict[str, Any]]) -> set[str]:
    """The call ids the rows' tool messages answer."""
    return {msg["tool_call_id"] for row in rows for msg in row["messages"] if msg["role"] == "tool"}


def said(rows: list[dict[str, Any]], key: str = "content") -> str:
    """All the assistants' `key` (content or reasoning_content) of the rows, one text."""
    return "\n".join(msg.get(key) or "" for row in rows for msg in row["messages"] if msg["role"] == "assistant")


def images(rows: list[dict[str, Any]], role: str) -> int:
    """Image parts in the rows' messages of `role`."""
    return sum(1 for row in rows for msg in row["messages"] if msg["role"] == role and isinstance(msg["content"], list)
               for part in msg["content"] if part["type"] == "image")


def assert_paired(row: dict[str, Any]) -> None:
    """Each tool message of the row answers a call an earlier assistant message of the same row made, once."""
    made: set[str] = set()
    answered: set[str] = set()
    for msg in row["messages"]:
        made |= {call["id"] for call in msg.get("tool_calls") or ()}
        if msg["role"] == "tool":
            assert msg["tool_call_id"] in made and msg["tool_call_id"] not in answered, msg
            answered.add(msg["tool_call_id"])


def assert_row_shape(row: dict[str, Any], agent: str) -> None:
    """The interface every reader keeps: its keys, no None values in messages, something an assistant said."""
    assert set(row) == {"messages", "tools", "tools_source", "agent", "session_id", "source_file", "conversation",
                        "session_notes"}
    assert row["agent"] == agent and row["session_id"] and row["source_file"]
    assert row["tools_source"] in ("session", "agent_table", "inferred", "session+inferred", None)
    assert (row["tools"] is None) == (row["tools_source"] is None)
    assert all(value is not None for msg in row["messages"] for value in msg.values())
    assert any(msg["role"] == "assistant" for msg in row["messages"])
    assert all(isinstance(count, int) and count > 0 for count in row["session_notes"].values())
    assert_paired(row)


def assert_renders(row: dict[str, Any]) -> None:
    """The row renders through the shipped Qwen3 template (reasoning, tool calls, tools), every assistant's text
    and every call's name in the text."""
    text = ChatTemplate.shipped("qwen3").render(row["messages"], tools=row["tools"]).text
    assert all(msg["content"] in text for msg in row["messages"] if msg["role"] == "assistant")
    assert all(f'"name": "{name}"' in text for name, _ in calls([row]).values())
