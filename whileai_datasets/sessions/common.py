"""What every session reader shares: its error, and the small helpers that build OpenAI chat messages.

A reader yields one dict per conversation (see ``whileai_datasets.sessions.detect`` for the interface);
what it read but did not train (redacted thinking, calls left unanswered, compaction summaries) is counted
in the conversation's ``session_notes``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping
from typing import Any

import orjson

from whileai_datasets.errors import ExportFormatError


class SessionFormatError(ExportFormatError):
    """An agent session log that cannot be read: ``problem`` in ``path`` at ``line``; ``hint`` says what to do."""

    def __init__(self, problem: str, *, path: str | None = None, line: int | None = None,
                 hint: str | None = None, location: str | None = None) -> None:
        self.path = path
        self.line = line
        if location is None and path is not None:
            location = f"{path} line {line}" if line is not None else path
        super().__init__(problem, location=location, hint=hint)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_rebuild, (self.problem, self.path, self.line, self.hint, self.location))


def _rebuild(problem: str, path: str | None, line: int | None, hint: str | None,
             location: str | None) -> SessionFormatError:
    return SessionFormatError(problem, path=path, line=line, hint=hint, location=location)


def file_stem(path: str) -> str:
    """A session file's name without its directory, its compression suffix (``.gz``, ``.zst``, ...) and its
    extension: the session's id where the file records none."""
    name = os.path.basename(path)
    stem, suffix = os.path.splitext(name)
    return os.path.splitext(stem)[0] if suffix.lower() in (".gz", ".bz2", ".xz", ".zst", ".lz4") else stem


def arguments_text(arguments: Any) -> str:
    """A tool call's arguments as the JSON text OpenAI messages carry (text that is not JSON stays as it is)."""
    if isinstance(arguments, str):
        return arguments
    try:
        return orjson.dumps(arguments if arguments is not None else {}).decode()
    except TypeError:  # what orjson does not write (integers past 64 bits): the standard library does
        return json.dumps(arguments, ensure_ascii=False)


def tool_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """One OpenAI function call."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments_text(arguments)}}


def text_of(value: Any) -> str:
    """Text of a tool result or a content value: strings as they are, text parts joined, anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in value):
        return "\n".join(p["text"] for p in value)
    return json.dumps(value, ensure_ascii=False)


#: What a reader does with a conversation that ends inside a turn (a call with no result, or a tool result the
#: agent never answered): it keeps the conversation up to the last complete assistant turn (an assistant message
#: with no calls, every call before it answered), and counts what it cut in ``session_notes``.
INCOMPLETE_TURNS = "cut_to_last_complete_turn"
#: The ``session_notes`` that say what ``complete_turns`` cut (every other note counts what was read, not trained).
CUT_NOTES = frozenset(("unanswered_calls", "unmatched_results", "ends_inside_turn", "messages_cut"))


def image_part(url: str) -> dict[str, Any]:
    """An image content part (a URL or a data URI)."""
    return {"type": "image", "image": url}


def data_uri(media_type: str, data: str) -> str:
    return f"data:{media_type};base64,{data}"


def anthropic_image(source: Any) -> dict[str, Any] | None:
    """An Anthropic image block's ``source`` (base64 data and its media type, or a URL) as an image part; None
    for a source that is neither."""
    if not isinstance(source, dict):
        return None
    if source.get("type") == "base64":
        return image_part(data_uri(str(source.get("media_type")), str(source.get("data"))))
    return image_part(source["url"]) if isinstance(source.get("url"), str) else None


def add_note(notes: dict[str, int], key: str, count: int = 1) -> None:
    if count:
        notes[key] = notes.get(key, 0) + count


def assistant(content: Any = "", *, calls: list[dict[str, Any]] | None = None,
              reasoning: str | None = None) -> dict[str, Any]:
    """An assistant message with only the keys that have values."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    if reasoning:
        message["reasoning_content"] = reasoning
    return message


def tool_result(call_id: str, content: Any, name: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "content": content}
    if name:
        message["name"] = name
    return message


def complete_turns(messages: list[dict[str, Any]], notes: dict[str, int],
                   terminal_tools: frozenset[str] = frozenset(), *, cut_by_agent: bool = False
                   ) -> list[dict[str, Any]]:
    """``messages`` cut to the last complete assistant turn (``INCOMPLETE_TURNS``, the session room's one policy
    for a conversation that ends inside a turn): the longest prefix that ends on an assistant message asking for
    no result (no calls, or only `terminal_tools`, such as a finish call, which no result answers), every call
    before it answered by id. A call with no result, or a result for no call, ends the conversation at the last
    complete turn before it. What was cut is counted in ``notes``: ``unanswered_calls``, ``unmatched_results``,
    ``ends_inside_turn`` (a session that stops on a call or a tool result), ``messages_cut``.

    A part the agent cut itself (the history before a condensation) may also end on the last result of an
    assistant message whose calls all have theirs (`cut_by_agent`): the agent went on after it."""
    open_calls: set[str] = set()
    last_complete, broken = -1, False
    for index, message in enumerate(messages):
        if message["role"] == "tool" and message.get("tool_call_id") in open_calls:
            open_calls.discard(message["tool_call_id"])
            last_complete = index if cut_by_agent and not open_calls else last_complete
            continue
        if message["role"] == "tool":
            add_note(notes, "unmatched_results")
            broken = True
            break
        if open_calls:
            add_note(notes, "unanswered_calls", len(open_calls))
            broken = True
            break
        if message["role"] == "assistant":
            open_calls = {call["id"] for call in message.get("tool_calls") or ()
                          if call["function"]["name"] not in terminal_tools}
            last_complete = index if not open_calls else last_complete
    if not broken and open_calls:
        add_note(notes, "unanswered_calls", len(open_calls))
    keep = last_complete + 1
    if keep < len(messages):
        if not broken and not open_calls:
            add_note(notes, "ends_inside_turn")
        add_note(notes, "messages_cut", len(messages) - keep)
    return messages[:keep]


#: Types of the values a tool's arguments held, as JSON Schema names them (bool before int: a bool is an int).
_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"),
               (dict, "object"))


def _json_type(value: Any) -> str:
    return next((label for kind, label in _JSON_TYPES if isinstance(value, kind)), "null")


def inferred_tools(conversations: list[list[dict[str, Any]]], known: Collection[str] = ()
                   ) -> list[dict[str, Any]] | None:
    """OpenAI function schemas inferred from the calls made (to tools not in `known`): each tool's argument
    keys, typed by the values seen (a key missing from some call is not required). None when no call was
    made."""
    seen: dict[str, dict[str, set[str]]] = {}
    calls_of: dict[str, int] = {}
    present: dict[str, dict[str, int]] = {}
    for messages in conversations:
        for message in messages:
            for call in message.get("tool_calls") or ():
                name = call["function"]["name"]
                if name in known:
                    continue
                try:
                    arguments = orjson.loads(call["function"]["arguments"])
                except orjson.JSONDecodeError:
                    arguments = None
                keys = seen.setdefault(name, {})
                calls_of[name] = calls_of.get(name, 0) + 1
                counts = present.setdefault(name, {})
                if isinstance(arguments, dict):
                    for key, value in arguments.items():
                        keys.setdefault(key, set()).add(_json_type(value))
                        counts[key] = counts.get(key, 0) + 1
    if not seen:
        return None
    tools = []
    for name in sorted(seen):
        properties = {key: {"type": sorted(types)[0] if len(types) == 1 else sorted(types)}
                      for key, types in seen[name].items()}
        required = sorted(key for key, n in present[name].items() if n == calls_of[name])
        tools.append({"type": "function", "function": {
            "name": name, "parameters": {"type": "object", "properties": properties, "required": required}}})
    return tools


def function(name: str, description: str, required: Mapping[str, Any],
             optional: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An OpenAI function schema for an agent's table of its tools (``AGENT_TOOLS``): its ``required`` and
    ``optional`` parameters, each a JSON Schema (a bare type name stands for ``{"type": name}``)."""
    properties = {key: {"type": value} if isinstance(value, str) else value
                  for key, value in {**required, **(optional or {})}.items()}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": list(required)}}}


def called_tools(messages: list[dict[str, Any]], table: Mapping[str, dict[str, Any]]
                 ) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The schemas of the tools a conversation calls, and where they came from: the agent's table for the
    tools it lists (``"agent_table"``), inferred from the calls for the others (``"inferred"``; both:
    ``"agent_table+inferred"``). Only the tools called are listed: a table cannot know which others the
    agent had (settings, MCP servers). (None, None) when no call was made."""
    names = sorted({call["function"]["name"] for message in messages for call in message.get("tool_calls") or ()})
    listed = [table[name] for name in names if name in table]
    inferred = inferred_tools([messages], known=table) or []
    if not listed:
        return (inferred, "inferred") if inferred else (None, None)
    tools = sorted(listed + inferred, key=lambda tool: tool["function"]["name"])
    return tools, "agent_table+inferred" if inferred else "agent_table"


def conversation_row(messages: list[dict[str, Any]], notes: dict[str, int], *, agent: str, session_id: str,
                     path: str, conversation: str, tools: list[dict[str, Any]] | None = None,
                     tools_source: str = "session", table: Mapping[str, dict[str, Any]] | None = None
                     ) -> dict[str, Any]:
    """One conversation as a reader yields it (the interface in ``detect``): tools from the session when given
    (`tools_source` names where they came from), else from the agent's `table` of its tools and inferred from
    the calls for the others (``called_tools``; None without calls)."""
    if tools is None:
        tools, tools_source = called_tools(messages, table or {})  # type: ignore[assignment]
    return {"messages": messages, "tools": tools, "tools_source": tools_source if tools is not None else None,
            "agent": agent, "session_id": session_id, "source_file": path, "conversation": conversation,
            "session_notes": dict(sorted(notes.items()))}


def trainable(messages: list[dict[str, Any]]) -> bool:
    """Whether a conversation holds an assistant turn (a reader never yields an empty row)."""
    return any(message["role"] == "assistant" for message in messages)
