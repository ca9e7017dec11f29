"""Factory Droid sessions: ``~/.factory/sessions/<project>/<session id>.jsonl``.

The first line is ``{"type": "session_start", "id", "title", "sessionTitle", "owner", "version", "cwd"}``; then
``{"type": "message", "id", "timestamp", "message": {"role", "content": [blocks]}}`` lines whose blocks are
Anthropic's (``text``, ``thinking``, ``tool_use``; ``tool_result`` and ``image`` in user messages). A message
marked ``"visibility": "user_only"`` was a local note the model never saw (left out, counted); ``"llm_only"``
is context the model saw but the user did not (kept, as the user turn it was). Other line types (``todo_state``
and the like) hold no conversation and are counted. The tool schemas live in no session file: they are inferred
from the calls. The ``<id>.settings.json`` beside the file (model, token usage) is not read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from whileai_datasets.sessions.common import SessionFormatError, file_stem
from whileai_datasets.sessions.assembly import CallBook, anthropic_assistant, anthropic_user, complete_row

AGENT = "droid"
LAYOUT = "jsonl"
#: Keys and ``type`` values typical of Droid sessions (to name the closest layout of an unknown log).
MARKERS = frozenset(("type", "session_start", "message", "id", "cwd", "title", "sessionTitle", "owner", "version",
                     "todo_state", "visibility", "parentId"))


def sniff(head: list[Any]) -> bool:
    """The first record is Droid's ``session_start`` header: a string ``id`` and the session's ``cwd`` or
    title."""
    first = head[0] if head else None
    return (isinstance(first, dict) and first.get("type") == "session_start" and isinstance(first.get("id"), str)
            and any(isinstance(first.get(key), str) for key in ("cwd", "title", "sessionTitle")))


def read(source: Iterator[tuple[int, Any]], path: str) -> Iterator[dict[str, Any]]:
    """The session's conversation, one row (``conversation`` ``"main"``)."""
    notes: Counter[str] = Counter()
    book = CallBook(path)
    messages: list[dict[str, Any]] = []
    session_id = file_stem(path)
    for line, record in source:
        kind = record.get("type") if isinstance(record, dict) else None
        if kind == "session_start":
            session_id = str(record.get("id") or session_id)
        elif kind == "message":
            messages += _message(record, line, notes, book)
        elif isinstance(kind, str):
            notes[f"{kind}_records"] += 1
        else:
            raise SessionFormatError(f"a record without a string 'type' ({type(record).__name__})", path=path,
                                     line=line, hint="Droid writes one typed JSON object per line; the line is "
                                                     "damaged: fix or remove it")
    yield complete_row(messages, notes, agent=AGENT, session_id=session_id, path=path, conversation="main")


def _message(record: dict[str, Any], line: int, notes: Counter[str], book: CallBook) -> list[dict[str, Any]]:
    payload: dict[str, Any] = record["message"] if isinstance(record.get("message"), dict) else {}
    role = payload.get("role")
    if role not in ("user", "assistant"):
        raise SessionFormatError(f"a message record whose 'message' has role {role!r}, expected 'user' or "
                                 "'assistant'", path=book.path, line=line,
                                 hint="The line is damaged: fix or remove it")
    if payload.get("visibility") == "user_only":
        notes["user_only_messages"] += 1
        return []
    if role == "user":
        return anthropic_user(payload.get("content"), notes, book, line)
    assistant = anthropic_assistant(payload.get("content"), notes, book, line)
    return [assistant] if assistant else []
