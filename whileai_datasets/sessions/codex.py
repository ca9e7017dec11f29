"""Codex CLI sessions (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

The current layout: one ``{"timestamp", "type", "payload"}`` object per line; ``session_meta`` names the session
(and may hold the base instructions: the system message), ``response_item`` payloads are the model's own items
(``message`` with role user / assistant / developer, ``reasoning``, ``function_call`` and its
``function_call_output``, ``custom_tool_call`` such as ``apply_patch`` and its output, ``local_shell_call``),
``event_msg`` and ``turn_context`` are what the UI showed (the same turns again: counted, not read twice), and
``compacted`` holds a compaction summary. The older layout: a first line ``{"id", "timestamp", "instructions"}``,
then the response items themselves, one per line, with ``{"record_type": "state"}`` lines between.

Developer messages before the first user turn join the system message; later ones become user turns (a chat
template takes a system message only first), counted in ``session_notes``. A custom tool call's free-form input
is the call's ``{"input": ...}`` argument.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from whileai_datasets.sessions import common

AGENT = "codex"
LAYOUT = "jsonl"

#: Codex CLI's own tools and their parameters (its tool specs in codex-rs): the schemas of a session's calls
#: (``tools_source="agent_table"``; a rollout records none). ``apply_patch`` is a freeform tool whose patch text
#: this reader keeps under ``input``. Calls to other tools (MCP servers, newer tools) get inferred schemas.
AGENT_TOOLS = {tool["function"]["name"]: tool for tool in (
    common.function("shell", "Run a command (argv) and return its output", {
        "command": {"type": "array", "items": {"type": "string"}}},
        {"workdir": "string", "timeout_ms": "number", "with_escalated_permissions": "boolean",
         "justification": "string"}),
    common.function("apply_patch", "Edit files with a patch in the apply_patch format", {"input": "string"}),
    common.function("update_plan", "Record the plan: its steps and their status", {"plan": {
        "type": "array", "items": {"type": "object", "properties": {
            "step": {"type": "string"},
            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}},
            "required": ["step", "status"]}}}, {"explanation": "string"}),
    common.function("view_image", "Attach a local image to the conversation", {"path": "string"}),
)}
_ITEMS = frozenset(("message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
                    "custom_tool_call_output", "local_shell_call", "web_search_call"))
_ENVELOPES = frozenset(("session_meta", "response_item", "event_msg", "turn_context", "compacted"))


def sniff(head: list[Any]) -> bool:
    """The current layout (``type`` an envelope with a ``payload``), or the older one (an ``id`` + ``timestamp``
    header, then response items or ``record_type`` lines)."""
    objects = [value for value in head if isinstance(value, dict)]
    if any(value.get("type") in _ENVELOPES and isinstance(value.get("payload"), dict) for value in objects):
        return True
    if not objects or not {"id", "timestamp"} <= objects[0].keys() or "type" in objects[0]:
        return False
    rest = objects[1:]
    return bool(rest) and all(v.get("type") in _ITEMS or "record_type" in v for v in rest)


class _Session:
    def __init__(self) -> None:
        self.session_id = ""
        self.system: list[str] = []
        self.messages: list[dict[str, Any]] = []
        self.before: list[list[dict[str, Any]]] = []
        self.notes: dict[str, int] = {}
        self.reasoning: list[str] = []


def read(source: Iterator[tuple[int, Any]], path: str) -> Iterator[dict[str, Any]]:
    session = _Session()
    for line, record in source:
        if not isinstance(record, dict):
            raise common.SessionFormatError(f"expected a JSON object, got {type(record).__name__}", path=path,
                                            line=line, hint="Each line of a Codex rollout is one object.")
        kind = record.get("type")
        payload = record.get("payload")
        if kind in _ENVELOPES:
            if not isinstance(payload, dict):
                raise common.SessionFormatError(f"a {kind} line without a payload object", path=path, line=line,
                                                hint="Codex writes each item under 'payload'.")
            _envelope(session, kind, payload)
        elif kind in _ITEMS:
            _item(session, record)
        elif "record_type" in record or (kind is None and "id" in record):
            session.session_id = session.session_id or str(record.get("id") or "")
            if isinstance(record.get("instructions"), str) and record["instructions"].strip():
                session.system.append(record["instructions"])
        else:
            common.add_note(session.notes, f"{kind}_items")
    yield from _rows(session, path)


def _envelope(session: _Session, kind: str, payload: dict[str, Any]) -> None:
    if kind == "session_meta":
        session.session_id = session.session_id or str(payload.get("id") or "")
        base = payload.get("base_instructions")
        text = base.get("text") if isinstance(base, dict) else payload.get("instructions")
        if isinstance(text, str) and text.strip():
            session.system.append(text)
    elif kind == "response_item":
        _item(session, payload)
    elif kind == "compacted":
        session.before.append(session.messages)
        common.add_note(session.notes, "compaction_summaries")
        session.messages = [{"role": "user", "content": str(payload.get("message") or ""), "weight": 0}]
    else:
        common.add_note(session.notes, f"{kind}_lines")


def _item(session: _Session, item: dict[str, Any]) -> None:
    kind = item.get("type")
    messages = session.messages
    if kind == "message":
        _message(session, item)
    elif kind == "reasoning":
        texts = [p.get("text") or "" for key in ("summary", "content") for p in item.get(key) or ()
                 if isinstance(p, dict)]
        texts = [text for text in texts if text.strip()]
        if texts:
            session.reasoning.extend(texts)
        elif item.get("encrypted_content"):
            common.add_note(session.notes, "encrypted_reasoning")
    elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
        if kind == "function_call":
            arguments: Any = item.get("arguments")
        elif kind == "custom_tool_call":
            arguments = {"input": item.get("input") or ""}
            common.add_note(session.notes, "custom_tool_calls")
        else:
            arguments = item.get("action") or {}
        name = str(item.get("name") or "local_shell")
        call = common.tool_call(str(item.get("call_id") or item.get("id")), name, arguments)
        turn = _open_turn(session)
        turn.setdefault("tool_calls", []).append(call)
    elif kind in ("function_call_output", "custom_tool_call_output"):
        messages.append(common.tool_result(str(item.get("call_id")), _output(item.get("output"))))
    else:
        common.add_note(session.notes, f"{kind}_items")


def _open_turn(session: _Session) -> dict[str, Any]:
    """The assistant turn a call joins: the last message when it is an assistant turn, else a new one."""
    messages = session.messages
    if messages and messages[-1]["role"] == "assistant" and not session.reasoning:
        return messages[-1]
    turn = common.assistant("", reasoning=_take_reasoning(session))
    messages.append(turn)
    return turn


def _take_reasoning(session: _Session) -> str | None:
    text = "\n\n".join(session.reasoning) or None
    session.reasoning = []
    return text


def _message(session: _Session, item: dict[str, Any]) -> None:
    role = item.get("role")
    parts = _parts(item.get("content"))
    text_only = all(part["type"] == "text" for part in parts)
    content: Any = "\n\n".join(p["text"] for p in parts) if text_only else parts
    if role == "assistant":
        session.messages.append(common.assistant(content, reasoning=_take_reasoning(session)))
    elif role in ("developer", "system"):
        if not any(m["role"] in ("user", "assistant") for m in session.messages) and text_only:
            session.system.append(content)
        else:
            common.add_note(session.notes, "developer_messages_as_user")
            session.messages.append({"role": "user", "content": content})
    else:
        session.messages.append({"role": "user", "content": content})


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    parts = []
    for part in content or ():
        if not isinstance(part, dict):
            continue
        if part.get("type") in ("input_image", "image"):
            parts.append(common.image_part(str(part.get("image_url") or "")))
        else:
            parts.append({"type": "text", "text": str(part.get("text") or "")})
    return parts


def _output(output: Any) -> str:
    """A call's output: the text Codex handed the model (older rollouts wrap it as JSON with ``output``)."""
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        return output["content"]
    return common.text_of(output)


def _rows(session: _Session, path: str) -> Iterator[dict[str, Any]]:
    system = [{"role": "system", "content": "\n\n".join(session.system)}] if session.system else []
    parts = [(f"pre-compaction:{n}", m) for n, m in enumerate(session.before)]
    for name, messages in [*parts, ("main", session.messages)]:
        notes = dict(session.notes) if name == "main" else {}
        kept = common.complete_turns(messages, notes)
        if common.trainable(kept):
            yield common.conversation_row(system + kept, notes, agent=AGENT, session_id=session.session_id, path=path,
                                          conversation=name, table=AGENT_TOOLS)


