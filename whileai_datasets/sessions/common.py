"""What every session reader shares: its error, and the small helpers that build OpenAI chat messages.

A reader yields one dict per conversation (see ``whileai_datasets.sessions.detect`` for the interface);
what it read but did not train (redacted thinking, calls left unanswered, compaction summaries) is counted
in the conversation's ``session_notes``.
"""

from __future__ import annotations

import json
from typing import Any

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


def arguments_text(arguments: Any) -> str:
    """A tool call's arguments as the JSON text OpenAI messages carry (text that is not JSON stays as it is)."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)


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
