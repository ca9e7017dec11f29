"""GitHub Copilot CLI sessions (``~/.copilot/session-state/<session id>/events.jsonl``).

One event per line: ``{"type", "data", "id", "timestamp", "parentId"}``. ``session.start`` names the session;
``user.message`` is a user turn; ``assistant.message`` is an assistant turn with its ``toolRequests`` (the calls)
and any ``reasoningText``; ``assistant.reasoning`` events hold reasoning for the next turn;
``tool.execution_complete`` holds a call's result (``result.content``, or ``error.message`` when it failed).
Events of a subagent carry ``parentToolCallId``: its turns are a conversation of their own
(``sidechain:<parentToolCallId>``), and the parent keeps the call and its result. Every other event (turn
starts and ends, tool starts, session info, usage) is counted in ``session_notes``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from whileai_datasets.sessions import common

AGENT = "copilot"
LAYOUT = "jsonl"


def sniff(head: list[Any]) -> bool:
    """Events whose ``type`` is a dotted name (``session.start``, ``user.message``) over a ``data`` object."""
    events = [v for v in head if isinstance(v, dict) and isinstance(v.get("data"), dict)]
    return any(v.get("type") in ("session.start", "user.message", "assistant.message") for v in events)


class _Stream:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.reasoning: list[str] = []


def read(source: Iterator[tuple[int, Any]], path: str) -> Iterator[dict[str, Any]]:
    streams: dict[str, _Stream] = {}
    notes: dict[str, int] = {}
    session_id = ""
    for line, event in source:
        data = event.get("data") if isinstance(event, dict) else None
        if not isinstance(data, dict):
            raise common.SessionFormatError("expected an event object with a data object", path=path, line=line,
                                            hint="Each line of a Copilot CLI events.jsonl is one event.")
        kind = event.get("type")
        key = f"sidechain:{data['parentToolCallId']}" if data.get("parentToolCallId") else "main"
        stream = streams.setdefault(key, _Stream())
        if kind == "session.start":
            session_id = str(data.get("sessionId") or "")
        elif kind == "user.message":
            stream.messages.append({"role": "user", "content": str(data.get("content") or "")})
        elif kind == "assistant.reasoning":
            stream.reasoning.append(str(data.get("content") or ""))
        elif kind == "assistant.message":
            _assistant(stream, data)
        elif kind == "tool.execution_complete":
            stream.messages.append(common.tool_result(str(data.get("toolCallId")), _result(data)))
        else:
            common.add_note(notes, f"{kind}_events")
    for key, stream in streams.items():
        own = dict(notes) if key == "main" else {}
        kept = common.complete_turns(stream.messages, own)
        if common.trainable(kept):
            yield common.conversation_row(kept, own, agent=AGENT, session_id=session_id, path=path, conversation=key)


def _assistant(stream: _Stream, data: dict[str, Any]) -> None:
    reasoning = [*stream.reasoning, str(data.get("reasoningText") or "")]
    stream.reasoning = []
    calls = [common.tool_call(str(r.get("toolCallId")), str(r.get("name")), r.get("arguments"))
             for r in data.get("toolRequests") or () if isinstance(r, dict)]
    text = "\n\n".join(r for r in reasoning if r.strip()) or None
    stream.messages.append(common.assistant(str(data.get("content") or ""), calls=calls, reasoning=text))


def _result(data: dict[str, Any]) -> str:
    result = data.get("result")
    if isinstance(result, dict) and "content" in result:
        return common.text_of(result["content"])
    error = data.get("error")
    if isinstance(error, dict):
        return common.text_of(error.get("message", error))
    return common.text_of(result)
