"""A stand-in for ``whileai_datasets.sessions.common.SessionFormatError`` until the session room's own
module is merged in (same signature); each reader of this branch imports it in one place."""

from __future__ import annotations

from whileai_datasets.errors import ExportFormatError


class SessionFormatError(ExportFormatError):
    """An agent session log that cannot be read: ``problem`` in ``path`` at ``line``; ``hint`` says what to do."""

    def __init__(self, problem: str, *, path: str, line: int | None = None, hint: str | None = None) -> None:
        self.path = path
        self.line = line
        super().__init__(problem, location=f"{path}, line {line}" if line is not None else path, hint=hint)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_rebuild, (self.problem, self.path, self.line, self.hint))


def _rebuild(problem: str, path: str, line: int | None, hint: str | None) -> SessionFormatError:
    return SessionFormatError(problem, path=path, line=line, hint=hint)
