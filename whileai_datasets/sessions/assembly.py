"""What the OpenHands, Cline, Droid and pi/OpenClaw readers share: OpenAI chat messages built from an agent's
records, Anthropic-style content blocks (Cline and Droid store them), calls paired with their results by id, and
the refusal of a conversation with no complete turn. The helpers every reader shares (calls, images, the policy for
an unfinished tail, inferred tool schemas, the row itself) are in ``common``.

A conversation row is ``{"messages", "tools", "tools_source", "agent", "session_id", "source_file",
"conversation", "session_notes"}``; ``session_notes`` counts what was read but not trained.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from whileai_datasets.sessions.common import (
    SessionFormatError,
    anthropic_image,
    complete_turns,
    conversation_row,
    data_uri,
    image_part,
    tool_call,
)


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
    return anthropic_image(block.get("source")) if block.get("type") == "image" else None


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


def image_of(media_type: str, data: str) -> dict[str, Any]:
    """An image content part from base64 data and its media type."""
    return image_part(data_uri(media_type, data))


def complete_row(messages: list[dict[str, Any]], notes: Counter[str], *, agent: str, session_id: str, path: str,
                 conversation: str, tools: list[dict[str, Any]] | None = None,
                 terminal_tools: frozenset[str] = frozenset(), cut_by_agent: bool = False) -> dict[str, Any]:
    """One conversation, its tail cut to the last complete assistant turn (``common.complete_turns``) and built
    by ``common.conversation_row``. Refused when no complete assistant turn is left."""
    kept = complete_turns(messages, notes, terminal_tools, cut_by_agent=cut_by_agent)
    if not any(msg["role"] == "assistant" for msg in kept):
        where = "" if conversation == "main" else f" ({conversation})"
        raise SessionFormatError(f"the session{where} holds no complete assistant turn: nothing the agent said "
                                 "ends a turn, so there is nothing to train on", path=path,
                                 hint="Leave this file out of data_files (a session stopped before the agent "
                                      "answered)")
    return conversation_row(kept, notes, agent=agent, session_id=session_id, path=path, conversation=conversation,
                            tools=tools)
