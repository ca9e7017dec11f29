"""Hermes agent session exports (``hermes sessions export``: JSONL, one session object per line).

Each line: ``id``, ``source``, ``model``, ``system_prompt`` (the system message the model was given),
``started_at``, and ``messages`` in OpenAI chat form (``tool_calls`` on assistant turns, tool results with
``tool_call_id``, reasoning as ``reasoning`` or ``reasoning_content``); ``tools`` when the export holds the
schemas. A session with a ``parent_session_id`` (a delegated task) is a conversation ``sidechain:<id>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from whileai_datasets.sessions import common

AGENT = "hermes"
LAYOUT = "jsonl"


def _is_session(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("messages"), list) and "system_prompt" in value
            and ("source" in value or "started_at" in value or "parent_session_id" in value))


def sniff(head: list[Any]) -> bool:
    """Session objects: ``messages`` beside ``system_prompt`` and ``source`` / ``started_at``."""
    return bool(head) and all(_is_session(value) for value in head)


def read(source: Iterator[tuple[int, Any]], path: str) -> Iterator[dict[str, Any]]:
    for line, session in source:
        if not _is_session(session):
            raise common.SessionFormatError("expected a Hermes session object (messages, system_prompt)",
                                            path=path, line=line, hint="Each line of the export is one session.")
        yield from _session(session, path, line)


def _session(session: dict[str, Any], path: str, line: int) -> Iterator[dict[str, Any]]:
    notes: dict[str, int] = {}
    messages: list[dict[str, Any]] = []
    system = session.get("system_prompt")
    if isinstance(system, str) and system.strip():
        messages.append({"role": "system", "content": system})
    for index, message in enumerate(session["messages"]):
        if not isinstance(message, dict) or message.get("role") not in ("system", "user", "assistant", "tool"):
            raise common.SessionFormatError(f"messages[{index}] is not a chat message with a role", path=path,
                                            line=line, hint="Roles are system, user, assistant or tool.")
        if message["role"] == "system" and messages and messages[0]["role"] == "system":
            common.add_note(notes, "system_messages_after_system_prompt")
        messages.append(_message(message))
    tools = session.get("tools")
    kept = common.complete_turns(messages, notes)
    if not common.trainable(kept):
        return
    session_id = str(session.get("id") or "")
    name = f"sidechain:{session_id}" if session.get("parent_session_id") else "main"
    yield common.conversation_row(kept, notes, agent=AGENT, session_id=session_id, path=path, conversation=name,
                                  tools=tools if isinstance(tools, list) and tools else None)


def _message(message: dict[str, Any]) -> dict[str, Any]:
    role = message["role"]
    out: dict[str, Any] = {"role": role, "content": message.get("content") or ""}
    if role == "assistant":
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if isinstance(reasoning, str) and reasoning.strip():
            out["reasoning_content"] = reasoning
        calls = [common.tool_call(str(c.get("id")), str(c["function"].get("name")), c["function"].get("arguments"))
                 for c in message.get("tool_calls") or () if isinstance(c, dict) and isinstance(c.get("function"), dict)]
        if calls:
            out["tool_calls"] = calls
    elif role == "tool":
        out["tool_call_id"] = str(message.get("tool_call_id") or "")
        name = message.get("name") or message.get("tool_name")
        if name:
            out["name"] = str(name)
    return out
