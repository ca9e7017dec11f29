"""The one exception route handlers raise to answer with an HTTP error."""

from __future__ import annotations


class HubError(Exception):
    """An error answer: status, `X-Error-Code` (always sent), message (header and JSON body).

    `headers` adds response headers, e.g. `X-Repo-Commit` on a missing file; `body` adds JSON fields,
    e.g. `url` on the 409 of an existing repo.
    """

    def __init__(self, status: int, code: str, message: str, *, headers: dict[str, str] | None = None,
                 body: dict[str, object] | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}
        self.body = body or {}
