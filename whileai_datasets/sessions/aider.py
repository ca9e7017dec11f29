"""Aider's chat history (``.aider.chat.history.md`` in the repository it ran in).

Markdown: each session starts with a line ``# aider chat started at <time>``; a user's message is written as
lines starting ``#### ``; aider's own output (commands, confirmations, applied edits, commits) as lines starting
``> ``; everything else is the model's reply. Each session is a conversation (its session id is the start
time); aider's own output lines are counted in ``session_notes``, not trained (the model did not write them).
Aider edits files by replying with edit blocks, so a session has no tool calls.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from whileai_datasets.sessions import common

AGENT = "aider"
LAYOUT = "text"

_START = re.compile(r"^# aider chat started at (.*)$")


def sniff(head: str) -> bool:
    """The file opens with aider's session header."""
    return _START.match(head.lstrip("\ufeff \t\r\n").split("\n", 1)[0].rstrip("\r")) is not None


def read(text: str, path: str) -> Iterator[dict[str, Any]]:
    session: list[tuple[str, str]] | None = None
    started = ""
    for line in text.splitlines():
        header = _START.match(line)
        if header:
            if session is not None:
                yield from _conversation(session, started, path)
            session, started = [], header.group(1).strip()
            continue
        if session is None:
            raise common.SessionFormatError("text before the first '# aider chat started at' line", path=path,
                                            line=1, hint="Pass the .aider.chat.history.md file as aider wrote it.")
        if line.startswith("#### "):
            session.append(("user", line[5:]))
        elif line.startswith(">") and (line == ">" or line.startswith("> ")):
            session.append(("aider", line[2:]))
        else:
            session.append(("assistant", line))
    if session is not None:
        yield from _conversation(session, started, path)


def _conversation(lines: list[tuple[str, str]], started: str, path: str) -> Iterator[dict[str, Any]]:
    notes: dict[str, int] = {}
    messages: list[dict[str, Any]] = []
    for kind, text in lines:
        if kind == "aider":
            common.add_note(notes, "aider_output_lines")
            continue
        role = "user" if kind == "user" else "assistant"
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"] += "\n" + text
        elif role == "user" or text.strip():
            messages.append({"role": role, "content": text})
    for message in messages:
        message["content"] = message["content"].strip("\n")
    messages = [m for m in messages if m["content"].strip()]
    kept = common.complete_turns(messages, notes)
    if common.trainable(kept):
        yield common.conversation_row(kept, notes, agent=AGENT, session_id=started, path=path, conversation="main")
