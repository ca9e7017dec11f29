"""Claude Code sessions (``~/.claude/projects/<project>/<session>.jsonl``, subagents under ``<session>/subagents/``).

One JSON object per line: ``type`` ``user`` / ``assistant`` records carry an Anthropic ``message``; ``summary``,
``system``, ``file-history-snapshot`` and the like are bookkeeping. One API response is written as several
``assistant`` records with the same ``message.id`` (one per content block): they are merged back into one turn.
A subagent's records (``isSidechain``) are a conversation of their own (``sidechain:<agentId>``); the parent keeps
the call that started it and its result. A compaction summary (``isCompactSummary``) starts a new conversation
in which it is context (``weight`` 0); what came before it is a row of its own (``pre-compaction:<n>``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from whileai_datasets.sessions import common

AGENT = "claude_code"
LAYOUT = "jsonl"

_RECORD_TYPES = frozenset(("user", "assistant", "system", "summary", "file-history-snapshot", "queue-operation",
                           "progress"))


def sniff(head: list[Any]) -> bool:
    """Records of Claude Code: ``type`` user/assistant with an Anthropic ``message`` beside ``sessionId``/``uuid``."""
    for value in head:
        if (isinstance(value, dict) and value.get("type") in ("user", "assistant")
                and isinstance(value.get("message"), dict) and ("sessionId" in value or "uuid" in value)):
            return True
    return False


class _Stream:
    """One conversation being rebuilt: its messages, and the ones it had before each compaction."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.messages: list[dict[str, Any]] = []
        self.before: list[list[dict[str, Any]]] = []
        self.last_id: str | None = None


def read(source: Iterator[tuple[int, Any]], path: str) -> Iterator[dict[str, Any]]:
    streams: dict[str, _Stream] = {}
    notes: dict[str, int] = {}
    session_id = ""
    for line, record in source:
        if not isinstance(record, dict):
            raise common.SessionFormatError(f"expected a JSON object, got {type(record).__name__}", path=path,
                                            line=line, hint="Each line of a Claude Code session is one record.")
        kind = record.get("type")
        session_id = session_id or str(record.get("sessionId") or "")
        if kind not in ("user", "assistant"):
            common.add_note(notes, f"{kind}_records" if kind in _RECORD_TYPES else "other_records")
            continue
        message = record.get("message")
        if not isinstance(message, dict):
            raise common.SessionFormatError(f"a {kind} record without a message object", path=path, line=line,
                                            hint="Claude Code writes the turn under 'message'.")
        key = f"sidechain:{record.get('agentId') or 'task'}" if record.get("isSidechain") else "main"
        stream = streams.setdefault(key, _Stream(key))
        if kind == "assistant":
            _assistant(stream, message, notes)
        else:
            _user(stream, record, message, notes)
    for stream in streams.values():
        yield from _rows(stream, path, session_id, notes)


def _rows(stream: _Stream, path: str, session_id: str, notes: dict[str, int]) -> Iterator[dict[str, Any]]:
    parts = [(f"pre-compaction:{n}", messages) for n, messages in enumerate(stream.before)]
    for name, messages in [*parts, (stream.key, stream.messages)]:
        own = dict(notes) if name == "main" else {}
        kept = common.complete_turns(messages, own)
        if common.trainable(kept):
            yield common.conversation_row(AGENT, path, session_id, name, kept, own)


def _assistant(stream: _Stream, message: dict[str, Any], notes: dict[str, int]) -> None:
    if message.get("model") == "<synthetic>":  # an error or notice Claude Code wrote, not the model
        common.add_note(notes, "synthetic_messages")
        return
    content = message.get("content")
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
    turn = _merge_target(stream, message.get("id"))
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            turn["content"] = _join(turn.get("content") or "", block.get("text") or "")
        elif kind == "thinking":
            if (block.get("thinking") or "").strip():
                turn["reasoning_content"] = _join(turn.get("reasoning_content") or "", block["thinking"])
            else:
                common.add_note(notes, "redacted_thinking")  # signed, with no readable text
        elif kind == "redacted_thinking":
            common.add_note(notes, "redacted_thinking")
        elif kind == "tool_use":
            turn.setdefault("tool_calls", []).append(
                common.tool_call(str(block.get("id")), str(block.get("name")), block.get("input")))
        else:
            common.add_note(notes, f"{kind}_blocks")


def _merge_target(stream: _Stream, message_id: Any) -> dict[str, Any]:
    """The assistant turn a record belongs to: the last one when it has the same message id (only tool results
    between them), else a new one."""
    if message_id is not None and message_id == stream.last_id:
        for message in reversed(stream.messages):
            if message["role"] == "assistant":
                return message
            if message["role"] != "tool":
                break
    stream.last_id = message_id
    turn = common.assistant("")
    stream.messages.append(turn)
    return turn


def _join(before: str, more: str) -> str:
    return f"{before}\n\n{more}" if before and more else before or more


def _user(stream: _Stream, record: dict[str, Any], message: dict[str, Any], notes: dict[str, int]) -> None:
    content = message.get("content")
    if record.get("isCompactSummary"):
        stream.before.append(stream.messages)
        common.add_note(notes, "compaction_summaries")
        stream.messages = [{"role": "user", "content": common.text_of(content), "weight": 0}]
        stream.last_id = None
        return
    if isinstance(content, str):
        stream.messages.append({"role": "user", "content": content})
        return
    parts: list[dict[str, Any]] = []
    for block in content or ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result":
            stream.messages.append(common.tool_result(str(block.get("tool_use_id")), _result(block.get("content"))))
        elif kind == "text":
            parts.append({"type": "text", "text": block.get("text") or ""})
        elif kind == "image":
            parts.append(_image(block))
        else:
            common.add_note(notes, f"{kind}_blocks")
    if parts:
        only_text = all(part["type"] == "text" for part in parts)
        stream.messages.append({"role": "user", "content": "\n\n".join(p["text"] for p in parts) if only_text
                                else parts})


def _result(content: Any) -> Any:
    """A tool result's content: text, or parts when it holds an image."""
    if not isinstance(content, list) or not any(isinstance(b, dict) and b.get("type") == "image" for b in content):
        return common.text_of(content)
    return [_image(b) if b.get("type") == "image" else {"type": "text", "text": common.text_of(b.get("text"))}
            for b in content if isinstance(b, dict)]


def _image(block: dict[str, Any]) -> dict[str, Any]:
    source = block.get("source") or {}
    if source.get("type") == "base64":
        return common.image_part(common.data_uri(str(source.get("media_type")), str(source.get("data"))))
    return common.image_part(str(source.get("url") or ""))
