"""OpenHands event streams: a trajectory, the JSON array of events OpenHands saves (``save_trajectory_path``, the
UI's trajectory download, the ``history`` of its evaluation outputs).

Each event has an ``id``, a ``source`` (``user``/``agent``/``environment``) and either an ``action`` with
``args`` or an ``observation`` with ``content``, ``extras`` and the ``cause`` it answers. The agent's actions in
function-calling mode carry ``tool_call_metadata``: the call's id and name and the whole LLM response
(``model_response.choices[0].message``: its text, every call it made, its reasoning), shared by the actions of
one response; the observation answering a call carries the same ``tool_call_id``. Read here:

- ``system`` (the system prompt and the ``tools`` the agent offered: the row's tools, ``tools_source``
  ``"session"``), ``message`` (the user's, with ``image_urls``; the agent's own replies), each response's
  assistant message once, its results as tool messages (paired by id; ``image_urls`` kept as parts);
- ``finish`` is a call that ends the session and awaits no result;
- ``condensation``: what the agent saw before it is a row of its own (``"pre-compaction:<n>"``), the events it
  forgets leave the main row, and its ``summary`` is context (``weight`` 0) at its ``summary_offset``;
- ``recall`` events (workspace and microagent context OpenHands renders with its own prompt templates),
  agent-state changes, null observations and the user's own commands are counted, not read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from whileai_datasets.sessions.common import SessionFormatError, complete_turns, file_stem, tool_call
from whileai_datasets.sessions.assembly import (
    CallBook,
    complete_row,
    content_of,
    message,
    said,
)

AGENT = "openhands"
LAYOUT = "json"
#: Keys typical of OpenHands events (to name the closest layout of an unknown log).
MARKERS = frozenset(("id", "timestamp", "source", "message", "action", "observation", "args", "content", "extras",
                     "cause", "tool_call_metadata", "llm_metrics"))
#: Calls that end the session: no observation answers them.
_TERMINAL = frozenset({"finish"})
#: Events that hold no conversation.
_SKIPPED = frozenset({"agent_state_changed", "change_agent_state", "null", "recall", "condensation_request"})


def sniff(head: Any) -> bool:
    """A JSON array of events: objects with an ``action`` or an ``observation`` and a ``source``."""
    return (isinstance(head, list) and bool(head) and all(isinstance(event, dict) for event in head)
            and all(("action" in event or "observation" in event) and "source" in event for event in head[:16]))


class _Stream:
    """The conversation so far, each message with the event it came from."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.book = CallBook(path)
        self.notes: Counter[str] = Counter()
        self.messages: list[dict[str, Any]] = []
        self.origins: list[int] = []
        self.responses: set[str] = set()
        self.tools: list[dict[str, Any]] | None = None

    def add(self, msg: dict[str, Any] | None, event: dict[str, Any]) -> None:
        if msg is not None:
            self.messages.append(msg)
            self.origins.append(event.get("id", -1))

    def where(self, event: dict[str, Any]) -> str:
        return f" (event id {event.get('id')})"


def read(source: list[Any], path: str) -> Iterator[dict[str, Any]]:
    """The main conversation, and one row per condensation before it."""
    stream = _Stream(path)
    session_id = file_stem(path)
    pre: list[dict[str, Any]] = []
    condensations = 0
    for event in source:
        if event.get("action") == "condensation":
            condensations += 1
            pre += _condense(stream, event, session_id, condensations)
        elif event.get("action", event.get("observation")) in _SKIPPED:
            stream.notes[f"{event.get('action', event.get('observation'))}_events"] += 1
        elif "action" in event:
            _action(stream, event)
        else:
            _observation(stream, event)
    yield from pre
    yield complete_row(stream.messages, stream.notes, agent=AGENT, session_id=session_id, path=path,
                           conversation="main", tools=stream.tools, terminal_tools=_TERMINAL)


def _action(stream: _Stream, event: dict[str, Any]) -> None:
    args = _mapping(event.get("args"))
    kind, metadata = event["action"], event.get("tool_call_metadata")
    if kind == "system":
        stream.tools = args.get("tools") if isinstance(args.get("tools"), list) else stream.tools
        stream.add(message("system", str(args.get("content", ""))), event)
    elif isinstance(metadata, dict):
        _response(stream, event, metadata)
    elif kind == "message":
        parts = [{"type": "text", "text": str(args.get("content", ""))}]
        parts += [{"type": "image", "image": url} for url in args.get("image_urls") or () if url]
        said_ = message("user" if event.get("source") == "user" else "assistant", content_of(parts))
        stream.add(said_ if said_["role"] == "user" else said(said_, stream.notes), event)
    elif event.get("source") == "agent" and kind != "finish":
        raise SessionFormatError(f"the agent's {kind!r} action{stream.where(event)} carries no tool_call_metadata",
                                 path=stream.path, hint="Only trajectories written in function-calling mode "
                                                        "can be read: the call and its LLM response are missing")
    else:
        stream.notes[f"{event.get('source')}_{kind}_actions"] += 1


def _response(stream: _Stream, event: dict[str, Any], metadata: dict[str, Any]) -> None:
    """The assistant message of the LLM response behind an action, once per response."""
    response = _mapping(metadata.get("model_response"))
    key = str(response.get("id") or metadata.get("tool_call_id"))
    if key in stream.responses:
        return
    stream.responses.add(key)
    choices = response.get("choices") or [{}]
    said_ = choices[0].get("message") if isinstance(choices[0], dict) else None
    if not isinstance(said_, dict):
        raise SessionFormatError(f"the action{stream.where(event)} has no model_response.choices[0].message",
                                 path=stream.path, hint="The event is damaged: fix or remove it")
    calls = []
    for call in said_.get("tool_calls") or ():
        function = call.get("function") or {}
        stream.book.add(call.get("id"), function.get("name"), None)
        calls.append(tool_call(call["id"], function["name"], function.get("arguments")))
    stream.add(said(message("assistant", _text(said_.get("content")), reasoning_content=_reasoning(said_, stream),
                            tool_calls=calls), stream.notes), event)


def _mapping(value: Any) -> dict[str, Any]:
    """`value` when it is an object, else an empty one (a key it lacks reads as absent)."""
    return value if isinstance(value, dict) else {}


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content
                         if isinstance(part, dict) and part.get("type") == "text")
    return str(content or "")


def _reasoning(said_: dict[str, Any], stream: _Stream) -> str:
    if isinstance(said_.get("reasoning_content"), str) and said_["reasoning_content"].strip():
        stream.notes["redacted_thinking"] += sum(1 for block in said_.get("thinking_blocks") or ()
                                                 if isinstance(block, dict) and not block.get("thinking"))
        return str(said_["reasoning_content"])
    thoughts = []
    for block in said_.get("thinking_blocks") or ():
        if isinstance(block, dict) and str(block.get("thinking", "")).strip():
            thoughts.append(block["thinking"])
        else:
            stream.notes["redacted_thinking"] += 1
    return "\n\n".join(thoughts)


def _observation(stream: _Stream, event: dict[str, Any]) -> None:
    metadata = event.get("tool_call_metadata")
    extras = _mapping(event.get("extras"))
    parts = [{"type": "text", "text": str(event.get("content", ""))}]
    parts += [{"type": "image", "image": url} for url in extras.get("image_urls") or () if url]
    if isinstance(metadata, dict):
        call_id = metadata.get("tool_call_id")
        name = stream.book.name_of(call_id, None, stream.where(event))
        stream.add(message("tool", content_of(parts), tool_call_id=call_id, name=name), event)
    elif event.get("observation") == "agent_condensation":
        stream.notes["compaction_summaries"] += 1
        stream.add(message("user", content_of(parts), weight=0), event)
    elif event.get("observation") == "error":
        stream.add(message("user", content_of(parts)), event)
    else:
        stream.notes[f"{event.get('observation')}_observations"] += 1


def _condense(stream: _Stream, event: dict[str, Any], session_id: str, number: int) -> list[dict[str, Any]]:
    """The row the agent saw before a condensation; then the stream forgets what it names and takes its
    summary as context."""
    args = _mapping(event.get("args"))
    before = [dict(msg) for msg in stream.messages]
    rows = []
    if complete_turns(before, Counter(), _TERMINAL, cut_by_agent=True):
        rows.append(complete_row(before, Counter(), agent=AGENT, session_id=session_id,
                                     path=stream.path, conversation=f"pre-compaction:{number}", tools=stream.tools,
                                     terminal_tools=_TERMINAL, cut_by_agent=True))
    forgotten = set(args.get("forgotten_event_ids") or ())
    if isinstance(args.get("forgotten_events_start_id"), int) and isinstance(args.get("forgotten_events_end_id"), int):
        forgotten |= set(range(args["forgotten_events_start_id"], args["forgotten_events_end_id"] + 1))
    kept = [(msg, origin) for msg, origin in zip(stream.messages, stream.origins) if origin not in forgotten]
    calls = {call["id"] for msg, _ in kept for call in msg.get("tool_calls") or ()}
    kept = [(msg, origin) for msg, origin in kept if msg["role"] != "tool" or msg["tool_call_id"] in calls]
    stream.messages, stream.origins = [msg for msg, _ in kept], [origin for _, origin in kept]
    if args.get("summary"):
        at = min(int(args.get("summary_offset") or 0), len(stream.messages))
        stream.messages.insert(at, message("user", str(args["summary"]), weight=0))
        stream.origins.insert(at, event.get("id", -1))
        stream.notes["compaction_summaries"] += 1
    return rows
