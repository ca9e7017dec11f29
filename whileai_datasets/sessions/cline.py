"""Cline task folders: ``tasks/<task id>/api_conversation_history.json``, the conversation as the model saw it.

The file is one JSON array of Anthropic-format messages (``{"role": "user" | "assistant", "content": str |
[blocks]}``, an optional ``modelInfo``): assistant blocks are ``text``, ``thinking`` (``signature``),
``redacted_thinking`` and ``tool_use`` (Cline's native tool calls); user blocks are ``text`` (the task, the
``<environment_details>`` Cline appends), ``image`` and ``tool_result``. In Cline's older XML tool mode the calls
are text in the assistant's message and the results text in the user's: they are read as the text they are.
The folder's ``ui_messages.json`` (what the panel showed: ``say``/``ask`` records) is refused with a pointer to
the history file beside it, so a folder is never read twice. Cline records neither the system prompt nor the tool
schemas: tools are inferred from the calls.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

from whileai_datasets.sessions.common import SessionFormatError, file_stem
from whileai_datasets.sessions.assembly import CallBook, anthropic_assistant, anthropic_user, complete_row

AGENT = "cline"
LAYOUT = "json"
#: Keys typical of Cline's task files (to name the closest layout of an unknown log).
MARKERS = frozenset(("role", "content", "modelInfo", "ts", "type", "say", "ask"))
#: The call that ends a task: a result follows only when the user answers it with feedback.
_TERMINAL = frozenset({"attempt_completion"})

#: Content blocks only Anthropic's format has (an OpenAI-format array never holds them).
_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})
#: Text Cline itself writes into the user's turns.
_CLINE_MARKERS = ("<environment_details>", "<task>")


def sniff(head: Any) -> bool:
    """A bare array of Anthropic-format messages, told from an OpenAI-format messages array by what only
    Anthropic's format holds: a ``tool_use``/``tool_result``/``thinking`` block, an ``image`` block with a
    ``source``, or Cline's own ``modelInfo`` key or ``<task>``/``<environment_details>`` text; every element has
    role ``user`` or ``assistant`` and none has OpenAI's ``tool_calls``/``tool_call_id``. Cline's
    ``ui_messages.json`` (``ts`` + ``type`` say/ask records) is claimed too, to be refused for what it is."""
    if not isinstance(head, list) or not head or not all(isinstance(item, dict) for item in head):
        return False
    if all(item.get("type") in ("say", "ask") and "ts" in item for item in head):
        return True
    if any(item.get("role") not in ("user", "assistant") or "tool_calls" in item or "tool_call_id" in item
           for item in head):
        return False
    return any(_anthropic_only(item) for item in head)


def _anthropic_only(item: dict[str, Any]) -> bool:
    content = item.get("content")
    if "modelInfo" in item or (isinstance(content, str) and content.lstrip().startswith(_CLINE_MARKERS)):
        return True
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        if block.get("type") in _ANTHROPIC_BLOCKS or (block.get("type") == "image" and "source" in block):
            return True
        if block.get("type") == "text" and any(marker in str(block.get("text")) for marker in _CLINE_MARKERS):
            return True
    return False


def read(source: Any, path: str) -> Iterator[dict[str, Any]]:
    """The task's conversation, one row (``conversation`` ``"main"``)."""
    if all(item.get("type") in ("say", "ask") for item in source):
        raise SessionFormatError("this is Cline's ui_messages.json, what the panel showed, not the conversation "
                                 "the model saw", path=path,
                                 hint="Load api_conversation_history.json from the same task folder instead "
                                      "(data_files='.../tasks/*/api_conversation_history.json')")
    notes: Counter[str] = Counter()
    book = CallBook(path)
    messages: list[dict[str, Any]] = []
    for index, item in enumerate(source):
        where = f" (messages[{index}])"
        if item.get("role") == "assistant":
            assistant = anthropic_assistant(item.get("content"), notes, book, None, where)
            messages += [assistant] if assistant else []
        elif item.get("role") == "user":
            messages += anthropic_user(item.get("content"), notes, book, None, where)
        else:
            raise SessionFormatError(f"messages[{index}] has role {item.get('role')!r}, expected 'user' or "
                                     "'assistant'", path=path, hint="The file is damaged; fix that message")
    yield complete_row(messages, notes, agent=AGENT, session_id=_task_id(path), path=path, conversation="main",
                           terminal_tools=_TERMINAL)


def _task_id(path: str) -> str:
    """The task's id: its folder's name for the file Cline writes there, else the file's own name."""
    folder = os.path.dirname(os.path.abspath(path))
    return os.path.basename(folder) if file_stem(path) == "api_conversation_history" else file_stem(path)
