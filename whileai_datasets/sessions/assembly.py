"""What the OpenHands, Cline, Droid and pi/OpenClaw readers share: OpenAI chat messages built from an agent's
records, Anthropic-style content blocks (Cline and Droid store them), calls paired with their results by id, the
policy for a session's unfinished tail, tool schemas inferred from the calls, and the finished conversation row.

A conversation row is ``{"messages", "tools", "tools_source", "agent", "session_id", "source_file",
"conversation", "session_notes"}``; ``session_notes`` counts what was read but not trained.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from whileai_datasets.sessions.common import SessionFormatError

#: One encoder for every call's arguments (``json.dumps`` with options builds a new one per call).
_ENCODER = json.JSONEncoder(ensure_ascii=False)
#: Types of the values a tool's arguments held, as JSON Schema names them.
_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"),
               (dict, "object"))


def arguments_text(arguments: Any) -> str:
    """A call's arguments as the JSON text OpenAI messages carry (text stays as it is)."""
    if isinstance(arguments, str):
        return arguments
    return _ENCODER.encode({} if arguments is None else arguments)


def tool_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """One OpenAI function call."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments_text(arguments)}}


def image_part(media_type: str, data: str) -> dict[str, Any]:
    """An image content part from base64 data and its media type (a data URI)."""
    return {"type": "image", "image": f"data:{media_type};base64,{data}"}


def content_of(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Text parts alone become one string (joined by a newline, as one message's text blocks read);
    with an image among them the parts stay a list."""
    if all(part["type"] == "text" for part in parts):
        return "\n".join(part["text"] for part in parts)
    return parts


def message(role: str, content: str | list[dict[str, Any]] = "", **fields: Any) -> dict[str, Any]:
    """An OpenAI chat message: its content (text, or parts), and only those other keys that hold a value."""
    return {"role": role, "content": content, **{key: value for key, value in fields.items()
                                                  if value not in (None, [], "")}}


class CallBook:
    """The calls a conversation made so far, by id: a result pairs with one of them or the file is refused."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.names: dict[str, str] = {}

    def add(self, call_id: Any, name: Any, line: int | None) -> None:
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
            raise SessionFormatError(f"a tool call without a string id and name (id {call_id!r}, name {name!r})",
                                     path=self.path, line=line,
                                     hint="The record is damaged; fix or remove it and load again")
        self.names[call_id] = name

    def name_of(self, call_id: Any, line: int | None, where: str = "") -> str:
        if call_id not in self.names:
            raise SessionFormatError(f"a tool result{where} answers call {call_id!r}, which no earlier assistant "
                                     "message made", path=self.path, line=line,
                                     hint="A result must follow the call it answers; the file is cut or its "
                                          "records are out of order")
        return self.names[call_id]


def anthropic_blocks(content: Any, path: str, line: int | None, where: str = "") -> list[dict[str, Any]]:
    """A message's content as a list of blocks (a plain string is one text block; a bare string in the list
    too)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise SessionFormatError(f"message content{where} is {type(content).__name__}, expected a string or a "
                                 "list of content blocks", path=path, line=line,
                                 hint="The record is damaged; fix or remove it and load again")
    return [{"type": "text", "text": block} if isinstance(block, str) else block for block in content]


def anthropic_part(block: dict[str, Any]) -> dict[str, Any] | None:
    """A text or image block as a content part; None for any other block."""
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        return {"type": "text", "text": block["text"]}
    source = block.get("source")
    if block.get("type") == "image" and isinstance(source, dict):
        if source.get("type") == "base64":
            return image_part(str(source.get("media_type")), str(source.get("data")))
        if isinstance(source.get("url"), str):
            return {"type": "image", "image": source["url"]}
    return None


def anthropic_assistant(content: Any, notes: Counter[str], book: CallBook, line: int | None,
                        where: str = "") -> dict[str, Any] | None:
    """An Anthropic-style assistant message (text, thinking, redacted thinking, tool_use blocks) as one OpenAI
    message; None when it holds nothing (counted)."""
    return assistant_blocks(anthropic_blocks(content, book.path, line, where), notes, book, line)


def assistant_blocks(blocks: list[Any], notes: Counter[str], book: CallBook, line: int | None, *,
                     call_type: str = "tool_use", arguments_key: str = "input") -> dict[str, Any] | None:
    """An assistant's content blocks as one OpenAI message: ``text`` blocks (and the readable
    ``reasoning_details`` some providers hang on them), readable ``thinking`` (a thinking block with no text, or
    marked ``redacted``, and a ``redacted_thinking`` block are counted), and calls (blocks of `call_type`, their
    arguments under `arguments_key`: Anthropic's ``tool_use``/``input``, pi's ``toolCall``/``arguments``)."""
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(str(block.get("text", "")))
            thoughts += [detail["text"] for detail in block.get("reasoning_details") or ()
                         if isinstance(detail, dict) and isinstance(detail.get("text"), str) and detail["text"]]
        elif kind == "thinking" and not block.get("redacted") and str(block.get("thinking", "")).strip():
            thoughts.append(block["thinking"])
        elif kind in ("thinking", "redacted_thinking"):
            notes["redacted_thinking"] += 1
        elif kind == call_type:
            book.add(block.get("id"), block.get("name"), line)
            calls.append(tool_call(block["id"], block["name"], block.get(arguments_key)))
        else:
            notes[f"{kind}_blocks"] += 1
    return assistant_of(texts, thoughts, calls, notes)


def anthropic_user(content: Any, notes: Counter[str], book: CallBook, line: int | None,
                   where: str = "") -> list[dict[str, Any]]:
    """An Anthropic-style user message as OpenAI messages: one tool message per tool_result block (paired by
    id), then the user's own text and images, if any."""
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in anthropic_blocks(content, book.path, line, where):
        if block.get("type") == "tool_result":
            call_id = block.get("tool_use_id")
            name = book.name_of(call_id, line, where)
            out.append(message("tool", content=result_content(block.get("content"), notes), tool_call_id=call_id,
                               name=name))
            continue
        part = anthropic_part(block)
        if part is None:
            notes[f"{block.get('type')}_blocks"] += 1
        else:
            parts.append(part)
    if parts:
        out.append(message("user", content=content_of(parts)))
    return out


def result_content(value: Any, notes: Counter[str]) -> str | list[dict[str, Any]]:
    """A tool result's content: text as it is, text and image blocks as parts."""
    if value is None or isinstance(value, str):
        return value or ""
    parts = []
    for block in value if isinstance(value, list) else [value]:
        part = anthropic_part(block) if isinstance(block, dict) else None
        if part is None:
            notes[f"{block.get('type') if isinstance(block, dict) else 'other'}_blocks"] += 1
        else:
            parts.append(part)
    return content_of(parts)


def assistant_of(texts: list[str], thoughts: list[str], calls: list[dict[str, Any]],
                 notes: Counter[str]) -> dict[str, Any] | None:
    """One assistant message from its text blocks (joined by a newline), readable thoughts (by a blank line) and
    calls; None (counted) when it holds none of them."""
    return said(message("assistant", "\n".join(texts), reasoning_content="\n\n".join(thoughts), tool_calls=calls),
                notes)


def said(assistant: dict[str, Any], notes: Counter[str]) -> dict[str, Any] | None:
    """`assistant` when it holds text, reasoning or calls; None (counted) when it is empty."""
    if assistant["content"] or len(assistant) > 2:
        return assistant
    notes["empty_assistant_messages"] += 1
    return None


def infer_tools(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Function schemas inferred from the calls: each argument a property typed by the values it held,
    required when every call gave it."""
    seen: dict[str, list[dict[str, Any]]] = {}
    for msg in messages:
        for call in msg.get("tool_calls") or ():
            try:
                arguments = json.loads(call["function"]["arguments"])
            except ValueError:
                arguments = {}
            seen.setdefault(call["function"]["name"], []).append(arguments if isinstance(arguments, dict) else {})
    tools = []
    for name, calls in seen.items():
        properties: dict[str, dict[str, Any]] = {}
        for arguments in calls:
            for key, value in arguments.items():
                kinds = properties.setdefault(key, {}).setdefault("type", [])
                kind = next((label for cls, label in _JSON_TYPES if isinstance(value, cls)), "null")
                if kind not in kinds:
                    kinds.append(kind)
        for schema in properties.values():
            schema["type"] = schema["type"][0] if len(schema["type"]) == 1 else schema["type"]
        required = [key for key in properties if all(key in arguments for arguments in calls)]
        tools.append({"type": "function", "function": {"name": name, "parameters": {
            "type": "object", "properties": properties, "required": required}}})
    return tools


def complete_prefix(messages: list[dict[str, Any]], notes: Counter[str],
                    terminal_tools: frozenset[str] = frozenset(), *, cut_by_agent: bool = False
                    ) -> list[dict[str, Any]]:
    """The messages cut to the last complete assistant turn (the session room's one policy for a conversation
    that ends inside a turn): the longest prefix that ends on an assistant message asking for no result (no
    calls, or only `terminal_tools`, such as a finish call, which no result answers), every call before it
    answered by id. A call left without a result ends the conversation at the last complete turn before it.
    Counted in `notes`: ``unanswered_calls``, ``unmatched_results``, ``ends_inside_turn`` (a session that stops on a tool result),
    ``messages_cut``.

    A part the agent cut itself (the history before a condensation) may also end on the last result of an
    assistant message whose calls all have theirs (`cut_by_agent`): the agent went on after it."""
    open_calls: set[str] = set()
    last_complete, broken = -1, False
    for index, msg in enumerate(messages):
        if msg["role"] == "tool" and msg.get("tool_call_id") in open_calls:
            open_calls.discard(msg["tool_call_id"])
            last_complete = index if cut_by_agent and not open_calls else last_complete
            continue
        if msg["role"] == "tool":
            notes["unmatched_results"] += 1
            broken = True
            break
        if open_calls:
            notes["unanswered_calls"] += len(open_calls)
            broken = True
            break
        if msg["role"] == "assistant":
            open_calls = {call["id"] for call in msg.get("tool_calls") or ()
                          if call["function"]["name"] not in terminal_tools}
            last_complete = index if not open_calls else last_complete
    if not broken and open_calls:
        notes["unanswered_calls"] += len(open_calls)
    keep = last_complete + 1
    if keep < len(messages):
        if not broken and not open_calls:
            notes["ends_inside_turn"] += 1
        notes["messages_cut"] += len(messages) - keep
    return messages[:keep]


def conversation_row(messages: list[dict[str, Any]], notes: Counter[str], *, agent: str, session_id: str,
                     path: str, conversation: str, tools: list[dict[str, Any]] | None = None,
                     terminal_tools: frozenset[str] = frozenset(), cut_by_agent: bool = False) -> dict[str, Any]:
    """One conversation, its tail cut to the last complete assistant turn; tools from the session when given,
    else inferred from the calls. Refused when no complete assistant turn is left."""
    kept = complete_prefix(messages, notes, terminal_tools, cut_by_agent=cut_by_agent)
    if not any(msg["role"] == "assistant" for msg in kept):
        where = "" if conversation == "main" else f" ({conversation})"
        raise SessionFormatError(f"the session{where} holds no complete assistant turn: nothing the agent said "
                                 "ends a turn, so there is nothing to train on", path=path,
                                 hint="Leave this file out of data_files (a session stopped before the agent "
                                      "answered)")
    source: str | None
    if tools is None and any(msg.get("tool_calls") for msg in kept):
        tools, source = infer_tools(kept), "inferred"
    else:
        source = "session" if tools is not None else None
    return {"messages": kept, "tools": tools, "tools_source": source, "agent": agent, "session_id": session_id,
            "source_file": path, "conversation": conversation, "session_notes": dict(sorted(notes.items()))}
