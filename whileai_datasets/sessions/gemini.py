"""Gemini CLI sessions (``~/.gemini/tmp/<project hash>/chats/session-*.jsonl``, older ones ``session-*.json``).

JSONL: a first line of session metadata (``sessionId``, ``projectHash``, ``startTime``), then one message record
per line (``id``, ``type`` ``user`` / ``gemini`` / ``info`` / ``error`` / ``warning``, ``content``); a record with
an ``id`` seen before replaces it, ``{"$rewindTo": id}`` drops that message and every later one, and
``{"$set": {...}}`` updates the metadata. The older JSON file is one object with the same metadata and a
``messages`` list. A ``gemini`` message holds its text, its ``thoughts`` (subject and description: the
reasoning) and its ``toolCalls``, each with its ``result`` (``functionResponse`` parts). A subagent's file
(``kind: "subagent"``) is a conversation ``sidechain:<sessionId>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from whileai_datasets.sessions import common

AGENT = "gemini"
LAYOUT = "jsonl"


def _is_header(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("sessionId"), str) and "projectHash" in value


def sniff(head: list[Any]) -> bool:
    """A session's metadata line (``sessionId`` + ``projectHash``), or the older whole-file object with its
    ``messages`` (the same sniff serves the one-document layout: ``sniff_document``)."""
    return bool(head) and _is_header(head[0])


def sniff_document(value: Any) -> bool:
    return _is_header(value) and isinstance(value.get("messages"), list)


def read(source: Iterator[tuple[int, Any]], path: str) -> Iterator[dict[str, Any]]:
    meta: dict[str, Any] = {}
    records: dict[str, tuple[int, dict[str, Any]]] = {}
    for line, record in source:
        if not isinstance(record, dict):
            raise common.SessionFormatError(f"expected a JSON object, got {type(record).__name__}", path=path,
                                            line=line, hint="Each line of a Gemini CLI session is one record.")
        if isinstance(record.get("$rewindTo"), str):
            ids = list(records)
            cut = ids.index(record["$rewindTo"]) if record["$rewindTo"] in ids else 0
            for key in ids[cut:]:
                del records[key]
        elif isinstance(record.get("$set"), dict):
            meta.update(record["$set"])
        elif isinstance(record.get("id"), str) and "type" in record:
            records[record["id"]] = (line, record)
        elif _is_header(record):
            meta.update(record)
        else:
            raise common.SessionFormatError("expected a message record (id, type), a $set or a $rewindTo",
                                            path=path, line=line, hint="Is this a Gemini CLI session file?")
    messages = [record for _, record in records.values()] or list(meta.get("messages") or ())
    yield from _conversation(meta, messages, path)


def read_document(value: dict[str, Any], path: str) -> Iterator[dict[str, Any]]:
    """The older one-object JSON session."""
    yield from _conversation(value, list(value.get("messages") or ()), path)


def _conversation(meta: dict[str, Any], records: list[Any], path: str) -> Iterator[dict[str, Any]]:
    notes: dict[str, int] = {}
    messages: list[dict[str, Any]] = []
    for record in records:
        if not isinstance(record, dict):
            continue
        kind = record.get("type")
        if kind == "user":
            messages.append({"role": "user", "content": _content(record.get("content"))})
        elif kind == "gemini":
            _gemini(messages, record)
        else:
            common.add_note(notes, f"{kind}_messages")
    session_id = str(meta.get("sessionId") or "")
    name = f"sidechain:{session_id}" if meta.get("kind") == "subagent" else "main"
    kept = common.complete_turns(messages, notes)
    if common.trainable(kept):
        yield common.conversation_row(kept, notes, agent=AGENT, session_id=session_id, path=path, conversation=name)


def _gemini(messages: list[dict[str, Any]], record: dict[str, Any]) -> None:
    thoughts = [t for t in record.get("thoughts") or () if isinstance(t, dict)]
    reasoning = "\n\n".join("\n".join(x for x in (t.get("subject"), t.get("description")) if x) for t in thoughts)
    calls = [c for c in record.get("toolCalls") or () if isinstance(c, dict)]
    turn = common.assistant(_content(record.get("content")), reasoning=reasoning or None,
                            calls=[common.tool_call(str(c.get("id")), str(c.get("name")), c.get("args")) for c in calls])
    messages.append(turn)
    for call in calls:
        if call.get("result") is not None:
            messages.append(common.tool_result(str(call.get("id")), _result(call["result"]), str(call.get("name"))))


def _content(content: Any) -> Any:
    """Text, or parts when the content holds inline images (``inlineData``)."""
    if not isinstance(content, list):
        return common.text_of(content)
    parts = []
    for part in content:
        if isinstance(part, dict) and isinstance(part.get("inlineData"), dict):
            data = part["inlineData"]
            parts.append(common.image_part(common.data_uri(str(data.get("mimeType")), str(data.get("data")))))
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
    if all(part["type"] == "text" for part in parts):
        return "".join(part["text"] for part in parts)
    return parts


def _result(result: Any) -> str:
    """A tool's result as the model read it: each ``functionResponse``'s ``response.output`` (or the response)."""
    texts = []
    for part in result if isinstance(result, list) else [result]:
        response = part.get("functionResponse", {}).get("response") if isinstance(part, dict) else None
        if isinstance(response, dict):
            output = response.get("output", response.get("error", response))
            texts.append(common.text_of(output))
        else:
            texts.append(common.text_of(part))
    return "\n".join(texts)
