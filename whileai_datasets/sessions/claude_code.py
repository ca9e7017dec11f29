"""Claude Code sessions (``~/.claude/projects/<project>/<session>.jsonl``, subagents under ``<session>/subagents/``).

One JSON object per line: ``type`` ``user`` / ``assistant`` records carry an Anthropic ``message``; ``summary``,
``system``, ``file-history-snapshot`` and the like are bookkeeping. One API response is written as several
``assistant`` records with the same ``message.id`` (one per content block): they are merged back into one turn.
A subagent's records (``isSidechain``) are a conversation of their own (``sidechain:<agentId>``); the parent keeps
the call that started it and its result. A compaction summary (``isCompactSummary``) starts a new conversation
in which it is context (``weight`` 0); what came before it is a row of its own (``pre-compaction:<n>``).
Records form a tree by ``parentUuid`` (a rewound or edited turn starts a branch): each leaf's path is a
conversation, the last ``main`` and the others ``branch:<leaf uuid>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from whileai_datasets.sessions import common

AGENT = "claude_code"
LAYOUT = "jsonl"

_STRING, _NUMBER, _FLAG = "string", "number", "boolean"
_TODOS = {"type": "array", "items": {"type": "object", "properties": {
    "content": {"type": "string"}, "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
    "activeForm": {"type": "string"}}, "required": ["content", "status"]}}
_EDITS = {"type": "array", "items": {"type": "object", "properties": {
    "old_string": {"type": "string"}, "new_string": {"type": "string"}, "replace_all": {"type": "boolean"}},
    "required": ["old_string", "new_string"]}}
#: Claude Code's built-in tools and their parameters, as its tools reference documents them: the schemas of a
#: session's calls (``tools_source="agent_table"``; the logs record none). Calls to other tools (MCP servers,
#: newer tools) get schemas inferred from the calls.
AGENT_TOOLS = {tool["function"]["name"]: tool for tool in (
    common.function("Bash", "Run a shell command", {"command": _STRING},
                    {"description": _STRING, "timeout": _NUMBER, "run_in_background": _FLAG}),
    common.function("BashOutput", "Read the new output of a background shell", {"bash_id": _STRING},
                    {"filter": _STRING}),
    common.function("KillShell", "Stop a background shell", {"shell_id": _STRING}),
    common.function("Read", "Read a file (text, image, PDF or notebook)", {"file_path": _STRING},
                    {"offset": _NUMBER, "limit": _NUMBER}),
    common.function("Write", "Write a file", {"file_path": _STRING, "content": _STRING}),
    common.function("Edit", "Replace a string in a file", {"file_path": _STRING, "old_string": _STRING,
                                                          "new_string": _STRING}, {"replace_all": _FLAG}),
    common.function("MultiEdit", "Make several replacements in one file", {"file_path": _STRING, "edits": _EDITS}),
    common.function("NotebookEdit", "Replace, insert or delete a notebook cell",
                    {"notebook_path": _STRING, "new_source": _STRING},
                    {"cell_id": _STRING, "cell_type": {"type": "string", "enum": ["code", "markdown"]},
                     "edit_mode": {"type": "string", "enum": ["replace", "insert", "delete"]}}),
    common.function("Glob", "Find files whose paths match a glob pattern", {"pattern": _STRING}, {"path": _STRING}),
    common.function("Grep", "Search file contents with ripgrep", {"pattern": _STRING}, {
        "path": _STRING, "glob": _STRING, "type": _STRING,
        "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"]},
        "-i": _FLAG, "-n": _FLAG, "-A": _NUMBER, "-B": _NUMBER, "-C": _NUMBER, "multiline": _FLAG,
        "head_limit": _NUMBER}),
    common.function("LS", "List a directory", {"path": _STRING}, {"ignore": {"type": "array", "items": _STRING}}),
    common.function("Task", "Start a subagent on a task", {"description": _STRING, "prompt": _STRING,
                                                          "subagent_type": _STRING}),
    common.function("TodoWrite", "Write the session's task list", {"todos": _TODOS}),
    common.function("WebFetch", "Fetch a URL and answer a prompt about its content", {"url": _STRING,
                                                                                     "prompt": _STRING}),
    common.function("WebSearch", "Search the web", {"query": _STRING},
                    {"allowed_domains": {"type": "array", "items": _STRING},
                     "blocked_domains": {"type": "array", "items": _STRING}}),
    common.function("ExitPlanMode", "Present the plan and leave plan mode", {"plan": _STRING}),
)}
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
        self.notes: dict[str, int] = {}


def read(source: Iterator[tuple[int, Any]], path: str) -> Iterator[dict[str, Any]]:
    notes: dict[str, int] = {}
    session_id = ""
    messages: list[dict[str, Any]] = []  # the user / assistant records, in file order
    parents: dict[str, str | None] = {}  # every record's uuid -> its parent's
    compacted: set[str] = set()  # the records a compaction summarised (``logicalParentUuid``)
    for line, record in source:
        if not isinstance(record, dict):
            raise common.SessionFormatError(f"expected a JSON object, got {type(record).__name__}", path=path,
                                            line=line, hint="Each line of a Claude Code session is one record.")
        kind = record.get("type")
        session_id = session_id or str(record.get("sessionId") or "")
        if isinstance(record.get("uuid"), str):
            parents[record["uuid"]] = record.get("parentUuid")
        if isinstance(record.get("logicalParentUuid"), str):
            compacted.add(record["logicalParentUuid"])
        if kind not in ("user", "assistant"):
            common.add_note(notes, f"{kind}_records" if kind in _RECORD_TYPES else "other_records")
            continue
        if not isinstance(record.get("message"), dict):
            raise common.SessionFormatError(f"a {kind} record without a message object", path=path, line=line,
                                            hint="Claude Code writes the turn under 'message'.")
        messages.append(record)
    if all(isinstance(record.get("uuid"), str) for record in messages):
        conversations = _tree(messages, parents, compacted)
    else:  # records without uuids: one conversation per sidechain and the main one, in file order
        conversations = _in_file_order(messages)
    yield from _rows(conversations, path, session_id, notes)


def _in_file_order(records: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    keyed: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        keyed.setdefault(_side(record) or "main", []).append(record)
    return list(keyed.items())


def _side(record: dict[str, Any]) -> str | None:
    return f"sidechain:{record.get('agentId') or 'task'}" if record.get("isSidechain") else None


def _tree(records: list[dict[str, Any]], parents: dict[str, str | None],
          compacted: set[str]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each leaf's path from its root (a session tree: a rewound or edited turn starts a branch), named: a
    subagent's ``sidechain:<id>``, the part a compaction summarised ``pre-compaction:<n>``, the last leaf of
    the rest ``main``; any other leaf of the same kind ``branch:<leaf uuid>``."""
    by_uuid = {record["uuid"]: record for record in records}
    above: set[str] = set()  # records with a user / assistant record below them
    for uuid in by_uuid:
        parent, seen = parents.get(uuid), set()
        while parent is not None and parent not in above and parent not in seen:
            seen.add(parent)
            above.add(parent)
            parent = parents.get(parent)
    paths: list[tuple[str, list[dict[str, Any]]]] = []
    for record in records:
        if record["uuid"] in above:
            continue
        chain, uuid, seen = [], record["uuid"], set()
        while uuid is not None and uuid not in seen:
            seen.add(uuid)
            if uuid in by_uuid:
                chain.append(by_uuid[uuid])
            uuid = parents.get(uuid)
        chain.reverse()
        kind = _side(record) or ("pre-compaction" if any(r["uuid"] in compacted for r in chain) else "main")
        paths.append((kind, chain))
    named: list[tuple[str, list[dict[str, Any]]]] = []
    last = {kind: index for index, (kind, _) in enumerate(paths)}
    compactions = 0
    for index, (kind, chain) in enumerate(paths):
        if last[kind] != index:
            kind = f"branch:{chain[-1]['uuid']}"
        elif kind == "pre-compaction":
            kind, compactions = f"pre-compaction:{compactions}", compactions + 1
        named.append((kind, chain))
    return named


def _rows(conversations: list[tuple[str, list[dict[str, Any]]]], path: str, session_id: str,
          notes: dict[str, int]) -> Iterator[dict[str, Any]]:
    built = []
    for name, records in conversations:
        stream = _Stream(name)
        for record in records:
            if record["type"] == "assistant":
                _assistant(stream, record["message"], stream.notes)
            else:
                _user(stream, record, record["message"], stream.notes)
        for n, before in enumerate(stream.before):  # a compaction summary met in file order (no uuids)
            built.append((f"pre-compaction:{n}", before, {}))
        own = {**stream.notes, **notes} if name == "main" else stream.notes
        built.append((name, stream.messages, own))
    kept = [(name, common.complete_turns(messages, own), own) for name, messages, own in built]
    kept = [item for item in kept if common.trainable(item[1])]
    for name, messages, own in kept:
        if name.startswith("branch:") and any(other is not messages and other[: len(messages)] == messages
                                              for _, other, _ in kept):
            continue  # a dead end whose every turn another conversation holds (a retried request)
        yield common.conversation_row(messages, own, agent=AGENT, session_id=session_id, path=path, conversation=name,
                                      table=AGENT_TOOLS)


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
    return common.anthropic_image(block.get("source")) or common.image_part("")
