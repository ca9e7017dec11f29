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

OpenHands V1 (the software-agent-sdk and the CLI built on it) keeps a conversation as a folder
(``~/.openhands/conversations/<id>/``): ``base_state.json`` (the conversation's id, its agent and settings) and
``events/event-<index, 5 or more digits>-<event id>.json``, one event per file, in the order of their index. An
event names its ``kind``: ``SystemPromptEvent`` (the system prompt; its ``tools`` name and describe each tool but
record no parameters, which are inferred from the calls: ``tools_source`` ``"session+inferred"``),
``MessageEvent`` (the user's or the agent's ``llm_message``, and the ``extended_content`` the agent's context added
to it), ``ActionEvent`` (one call: the consecutive actions of one ``llm_response_id`` are one assistant message, the
first carrying its ``thought``, ``reasoning_content`` and ``thinking_blocks``), ``ObservationEvent``,
``UserRejectObservation`` and ``AgentErrorEvent`` (a call's result, paired by ``tool_call_id``; ``finish``'s result
echoes the call's own message and is counted, so the call still ends the session), ``Condensation``
(read as a trajectory's condensation is) and ``CondensationSummaryEvent`` (context, ``weight`` 0); the state
changes, pauses, token counts and errors of the conversation are counted, not read. The builder reads the files
of one folder as one conversation (``conversation_folder``, ``folder_document``): a glob that takes any of its
files reads the folder whole, in the order OpenHands replays it.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import orjson

from whileai_datasets.sessions.common import (
    SessionFormatError,
    complete_turns,
    file_stem,
    inferred_tools,
    tool_call,
)
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


#: The folder of a V1 conversation that holds its event files, and the file beside it that holds its state.
EVENTS_DIR = "events"
BASE_STATE = "base_state.json"
#: A V1 event file's name: its index (5 digits or more) and the event's id.
_EVENT_FILE = re.compile(r"^event-(?P<index>\d{5,})-(?P<event_id>[0-9A-Za-z-]{8,})\.json$")
#: The key of the document ``folder_document`` makes of a V1 conversation folder.
FOLDER_KEY = "openhands_conversation_folder"
#: The kinds of V1 event: those that hold the conversation, and those that are counted, not read.
V1_KINDS = frozenset(("SystemPromptEvent", "MessageEvent", "ActionEvent", "ObservationEvent", "UserRejectObservation",
                      "AgentErrorEvent", "Condensation", "CondensationSummaryEvent", "CondensationRequest",
                      "ConversationStateUpdateEvent", "ConversationErrorEvent", "PauseEvent", "TokenEvent",
                      "HookExecutionEvent", "InterruptEvent", "StreamingDeltaEvent"))


def sniff(head: Any) -> bool:
    """A JSON array of events: objects with an ``action`` or an ``observation`` and a ``source``; or one file of a
    V1 conversation folder: an event (its ``kind``, ``id`` and ``source``), the folder's ``base_state.json`` (an
    ``id``, the ``agent`` with its ``llm``, the ``execution_status``), or the document of a whole folder."""
    if isinstance(head, dict):
        return (FOLDER_KEY in head or _is_v1_event(head)
                or ({"id", "agent", "execution_status"} <= head.keys() and isinstance(head["agent"], dict)
                    and "llm" in head["agent"]))
    return (isinstance(head, list) and bool(head) and all(isinstance(event, dict) for event in head)
            and all(("action" in event or "observation" in event) and "source" in event for event in head[:16]))


def _is_v1_event(value: Any) -> bool:
    return isinstance(value, dict) and value.get("kind") in V1_KINDS and "id" in value and "source" in value


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
        #: the file of each event of a V1 conversation folder, by the event's id
        self.files: dict[Any, str] = {}

    def add(self, msg: dict[str, Any] | None, event: dict[str, Any]) -> None:
        if msg is not None:
            self.messages.append(msg)
            self.origins.append(event.get("id", -1))

    def where(self, event: dict[str, Any]) -> str:
        file = self.files.get(event.get("id"))
        return f" (event id {event.get('id')})" if file is None else f" (in {file})"


def read(source: list[Any] | dict[str, Any], path: str) -> Iterator[dict[str, Any]]:
    """The main conversation, and one row per condensation before it: of a trajectory, or of the document of a V1
    conversation folder. One file of a folder, read alone, is refused."""
    if isinstance(source, dict):
        if FOLDER_KEY not in source:
            raise SessionFormatError("this is one file of an OpenHands conversation folder (an event, or its "
                                     "base_state.json), read alone: the conversation is the folder", path=path,
                                     hint="Pass the folder's files to load_dataset (data_files='<folder>/**', or "
                                          "data_dir='<folder>'): it reads each conversation folder as one row set")
        yield from _read_folder(source[FOLDER_KEY], path)
        return
    stream = _Stream(path)
    session_id = file_stem(path)
    pre: list[dict[str, Any]] = []
    condensations = 0
    for event in source:
        if event.get("action") == "condensation":
            condensations += 1
            pre += _condense(stream, _mapping(event.get("args")), event.get("id", -1), session_id, condensations)
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


def _condense(stream: _Stream, args: dict[str, Any], event_id: Any, session_id: str, number: int
              ) -> list[dict[str, Any]]:
    """The row the agent saw before a condensation (its fields: `args`); then the stream forgets what it names and
    takes its summary as context."""
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
        stream.origins.insert(at, event_id)
        stream.notes["compaction_summaries"] += 1
    return rows


# ------------------------------------------------------------------ V1: a conversation folder, one file per event


def conversation_folder(path: str) -> str | None:
    """The V1 conversation folder a local file belongs to: the folder above the ``events/`` folder of an event file
    (``event-00003-<id>.json``), or the folder holding ``base_state.json`` and ``events/`` that a file is in, or
    is in a folder of (``observations/<id>.txt``, the whole outputs OpenHands cut in its events); None for any
    other file."""
    if "://" in path or "::" in path:
        return None
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    if _EVENT_FILE.match(os.path.basename(path)) and os.path.basename(parent) == EVENTS_DIR:
        return os.path.dirname(parent)
    for folder in (parent, os.path.dirname(parent)):
        if os.path.isfile(os.path.join(folder, BASE_STATE)) and os.path.isdir(os.path.join(folder, EVENTS_DIR)):
            return folder
    return None


def folder_document(folder: str) -> dict[str, Any]:
    """A V1 conversation folder as the document ``read`` takes: its name, its ``base_state.json`` (None when it
    has none) and its events, each with its file's name, in the order of their index. An event file that is not
    one JSON event, and a gap in the indexes (an event file missing), are refused naming the file."""
    name = os.path.basename(os.path.normpath(folder))
    events_dir = os.path.join(folder, EVENTS_DIR)
    numbered = sorted((int(match["index"]), entry) for entry in os.listdir(events_dir)
                      if (match := _EVENT_FILE.match(entry)))
    events = []
    for expected, (index, entry) in enumerate(numbered):
        where = f"{name}/{EVENTS_DIR}/{entry}"
        if index != expected:
            raise SessionFormatError(f"the event file of index {expected} is missing (the indexes jump from "
                                     f"{expected - 1} to {index})", path=where,
                                     hint="Copy the conversation folder whole (OpenHands replays its events by index "
                                          "and stops at a gap)")
        with open(os.path.join(events_dir, entry), "rb") as handle:
            event = _event_file(handle.read(), where)
        events.append((entry, event))
    base = os.path.join(folder, BASE_STATE)
    state = None
    if os.path.isfile(base):
        with open(base, "rb") as handle:
            state = _event_file(handle.read(), f"{name}/{BASE_STATE}", event=False)
    return {FOLDER_KEY: {"name": name, "base_state": state, "events": events}}


def _event_file(data: bytes, where: str, *, event: bool = True) -> dict[str, Any]:
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as err:
        raise SessionFormatError(f"not one whole JSON value ({err})", path=where, line=1,
                                 hint="The file was cut while OpenHands wrote it, or damaged: copy the folder again "
                                      "once the agent has stopped, or remove the file") from err
    if event and not _is_v1_event(value):
        kind = value.get("kind") if isinstance(value, dict) else type(value).__name__
        raise SessionFormatError(f"not an OpenHands event (kind {kind!r}; known: {', '.join(sorted(V1_KINDS))})",
                                 path=where, line=1, hint="Leave files other than OpenHands' own out of the events "
                                                          "folder, or report this kind of event")
    if not isinstance(value, dict):
        raise SessionFormatError("not a JSON object", path=where, line=1, hint="Remove the file or restore it")
    return value


def _read_folder(folder: dict[str, Any], path: str) -> Iterator[dict[str, Any]]:
    """A V1 conversation's rows: what came before each condensation, then the main conversation."""
    stream = _Stream(path)
    state = folder["base_state"] or {}
    session_id = str(state.get("id") or folder["name"])
    described: dict[str, str] = {}
    pre: list[dict[str, Any]] = []
    condensations = 0
    response: str | None = None  # the LLM response the last assistant message holds the calls of
    for entry, event in folder["events"]:
        stream.files[event["id"]] = f"{folder['name']}/{EVENTS_DIR}/{entry}"
        kind = event["kind"]
        if kind == "ActionEvent":
            response = _v1_action(stream, event, response)
            continue
        response = None
        if kind == "SystemPromptEvent":
            described.update(_v1_system(stream, event))
        elif kind == "MessageEvent":
            _v1_message(stream, event)
        elif kind in ("ObservationEvent", "UserRejectObservation", "AgentErrorEvent"):
            _v1_result(stream, event)
        elif kind == "Condensation":
            condensations += 1
            pre += _condense(stream, event, event["id"], session_id, condensations)
        elif kind == "CondensationSummaryEvent":
            stream.notes["compaction_summaries"] += 1
            stream.add(message("user", str(event.get("summary", "")), weight=0), event)
        else:
            stream.notes[re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower() + "s"] += 1  # conversation_state_update_events
    rows = [*pre, complete_row(stream.messages, stream.notes, agent=AGENT, session_id=session_id, path=path,
                               conversation="main", terminal_tools=_TERMINAL)]
    for row in rows:
        row["tools"], row["tools_source"] = _v1_tools(row["messages"], described)
    yield from rows


def _v1_system(stream: _Stream, event: dict[str, Any]) -> dict[str, str]:
    """The system message (its prompt, and the dynamic context OpenHands sends in the same message); the tools it
    offered, name to description."""
    parts = [_mapping(event.get("system_prompt")), _mapping(event.get("dynamic_context"))]
    stream.add(message("system", "\n".join(str(part["text"]) for part in parts if part.get("text"))), event)
    return {str(tool.get("title")): str(tool.get("description", "")) for tool in event.get("tools") or ()
            if isinstance(tool, dict) and tool.get("title")}


def _v1_parts(content: Any) -> list[dict[str, Any]]:
    """V1 content (a string, or text and image parts, an image part holding ``image_urls``) as content parts."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    parts: list[dict[str, Any]] = []
    for part in content or ():
        if isinstance(part, dict) and part.get("type") == "text":
            parts.append({"type": "text", "text": str(part.get("text", ""))})
        elif isinstance(part, dict) and part.get("type") == "image":
            parts += [{"type": "image", "image": url} for url in part.get("image_urls") or () if url]
    return parts


def _v1_message(stream: _Stream, event: dict[str, Any]) -> None:
    said_ = _mapping(event.get("llm_message"))
    parts = _v1_parts(said_.get("content")) + _v1_parts(event.get("extended_content"))
    if said_.get("role", "user" if event.get("source") == "user" else "assistant") != "assistant":
        stream.add(message("user", content_of(parts)), event)
        return
    stream.add(said(message("assistant", content_of(parts), reasoning_content=_v1_reasoning(said_, stream)),
                    stream.notes), event)


def _v1_reasoning(holder: dict[str, Any], stream: _Stream) -> str:
    """A response's readable reasoning: its ``reasoning_content`` or thinking blocks (``_reasoning``), and the
    readable summary and text of an OpenAI Responses reasoning item (its encrypted content counted)."""
    thoughts = [_reasoning(holder, stream)]
    item = _mapping(holder.get("responses_reasoning_item"))
    thoughts += [str(text) for text in [*(item.get("summary") or ()), *(item.get("content") or ())] if text]
    if item.get("encrypted_content"):
        stream.notes["encrypted_reasoning"] += 1
    return "\n\n".join(thought for thought in thoughts if thought)


def _v1_action(stream: _Stream, event: dict[str, Any], response: str | None) -> str | None:
    """One call; the actions of one LLM response that follow each other are one assistant message."""
    call = _mapping(event.get("tool_call"))
    call_id, name = call.get("id", event.get("tool_call_id")), call.get("name", event.get("tool_name"))
    stream.book.add(call_id, name, None)
    made = tool_call(call_id, name, call.get("arguments"))
    key = event.get("llm_response_id")
    if key is not None and key == response and stream.messages and stream.messages[-1]["role"] == "assistant":
        stream.messages[-1]["tool_calls"].append(made)
        return response
    thought = content_of(_v1_parts(event.get("thought")))
    stream.add(message("assistant", thought, reasoning_content=_v1_reasoning(event, stream), tool_calls=[made]), event)
    return key


def _v1_result(stream: _Stream, event: dict[str, Any]) -> None:
    """A call's result: a tool's observation (its content, and the context the agent added), a rejected action
    (as OpenHands tells the model), or the agent's error running the call."""
    kind, call_id = event["kind"], event.get("tool_call_id")
    name = stream.book.name_of(call_id, None, stream.where(event))
    if name in _TERMINAL:  # finish echoes its own message: the call, which ends the session, holds it
        stream.notes[f"{name}_observations"] += 1
        return
    if kind == "ObservationEvent":
        observation = _mapping(event.get("observation"))
        parts = _v1_parts(observation.get("content")) + _v1_parts(event.get("extended_content"))
        if observation.get("is_error"):
            stream.notes["error_observations"] += 1
    elif kind == "UserRejectObservation":
        parts = [{"type": "text", "text": f"Action rejected: {event.get('rejection_reason', '')}"}]
    else:
        parts = [{"type": "text", "text": str(event.get("error", ""))}]
    stream.add(message("tool", content_of(parts), tool_call_id=call_id, name=name), event)


def _v1_tools(messages: list[dict[str, Any]], described: dict[str, str]
              ) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The tools a conversation calls: their parameters inferred from the calls, their descriptions from the
    system prompt event where it names them (``"session+inferred"``; ``"inferred"`` when it names none)."""
    tools = inferred_tools([messages])
    if tools is None:
        return None, None
    named = False
    for tool in tools:
        description = described.get(tool["function"]["name"])
        if description:
            tool["function"] = {"name": tool["function"]["name"], "description": description,
                                "parameters": tool["function"]["parameters"]}
            named = True
    return tools, "session+inferred" if named else "inferred"
