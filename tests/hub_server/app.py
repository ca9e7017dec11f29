"""The HTTP layer: parse a request, find its route, apply faults, answer, log.

Route handlers are plain functions `(Request, State) -> Response` that raise `HubError` for error
answers; they never touch the socket. This module is the only one that does.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import socket
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .auth import ANONYMOUS, Auth, Identity
from .errors import HubError
from .faults import FaultPlan, FaultRule
from .requestlog import RequestLog
from .store import Store


@dataclass
class LfsTicket:
    """A one-off upload URL: it authorises its PUT by itself, like a presigned S3 URL."""

    sha256: str
    size: int
    expires: float


@dataclass
class State:
    store: Store
    auth: Auth
    faults: FaultPlan
    log: RequestLog
    tickets: dict[str, LfsTicket] = field(default_factory=dict)


@dataclass
class Request:
    method: str
    path: str  # raw: still percent-encoded, because routes split it before unquoting
    query: dict[str, list[str]]
    headers: Message
    params: dict[str, str]
    who: Identity
    base_url: str
    read_body: Callable[[], bytes]
    _body: bytes | None = None

    def body(self) -> bytes:
        if self._body is None:
            self._body = self.read_body()
        return self._body

    def json(self) -> Any:
        try:
            return json.loads(self.body() or b"{}")
        except ValueError as err:
            raise HubError(400, "BadRequest", f"request body is not JSON: {err}") from None

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        return cls(status, json.dumps(data).encode(), {"Content-Type": "application/json", **(headers or {})})


@dataclass(frozen=True)
class Route:
    name: str
    methods: tuple[str, ...]
    pattern: re.Pattern[str]
    handler: Callable[[Request, State], Response]


def error_response(err: HubError) -> Response:
    body = {"error": err.message, **err.body}
    headers = {"X-Error-Code": err.code, "X-Error-Message": err.message, **err.headers}
    return Response.json(body, err.status, headers)


class HubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "LocalHub/1"
    timeout = 60  # a stuck client cannot hold a worker thread forever
    routes: tuple[Route, ...] = ()
    state: State
    verbose = False

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def log_message(self, format: str, *args: Any) -> None:  # the stdlib's signature
        if self.verbose:
            sys.stderr.write("hub: " + format % args + "\n")

    # --- dispatch ------------------------------------------------------------------------------
    def _dispatch(self, method: str) -> None:
        started = time.monotonic()
        split = urlsplit(self.path)
        route, params = self._match(method, split.path)
        self._bytes_read = 0
        self._body_consumed = False
        entry: dict[str, Any] = {
            "method": method, "path": split.path, "query": split.query, "route": route.name if route else None,
            "handled": route is not None, "content_type": self.headers.get("Content-Type"),
            "range": self.headers.get("Range"), "authorization": bool(self.headers.get("Authorization")),
            "user": None, "fault": None, "error_code": None,
        }
        rule = self.state.faults.take(route.name) if route else None
        response = None
        if rule is not None and rule.mode == "drop":
            entry.update(fault="drop", status=None)
            self._drop_connection()
        else:
            response = self._answer(method, split, route, params, rule, entry)
            entry.update(status=response.status, error_code=response.headers.get("X-Error-Code"))
        entry.update(body_bytes=self._bytes_read, ms=round((time.monotonic() - started) * 1000, 1))
        if route is None or route.name != "control":
            self.state.log.write(entry)  # before answering: a client that got its answer finds it logged
        if response is not None:
            self._send(method, response)

    def _match(self, method: str, path: str) -> tuple[Route | None, dict[str, str]]:
        for route in self.routes:
            found = route.pattern.match(path)
            if found and method in route.methods:
                return route, {k: v for k, v in found.groupdict().items() if v is not None}
        return None, {}

    def _answer(self, method: str, split: Any, route: Route | None, params: dict[str, str],
                rule: FaultRule | None, entry: dict[str, Any]) -> Response:
        try:
            if route is None:
                self._read_body()
                raise HubError(404, "RouteNotFound", f"the local hub does not implement {method} {split.path}")
            # the LFS PUT authorises itself through its URL; it carries no credentials
            auth = self.headers.get("Authorization")
            who = ANONYMOUS if route.name == "lfs-upload" else self.state.auth.identify(auth)
            entry["user"] = who.name
            if rule is not None:  # mode "500": read the body so the client sees the answer, not a reset
                self._read_body()
                entry["fault"] = "500"
                headers = {} if rule.retry_after is None else {"Retry-After": str(rule.retry_after)}
                raise HubError(500, "InjectedFault", f"injected fault on route {route.name}", headers=headers)
            request = Request(method, split.path, parse_qs(split.query, keep_blank_values=True), self.headers,
                              params, who, f"http://{self.headers.get('Host', 'localhost')}", self._read_body)
            response = route.handler(request, self.state)
            self._read_body()  # a handler that ignored the body must still consume it (keep-alive)
            return response
        except HubError as err:
            self._read_body()
            return error_response(err)
        except Exception:  # a server bug must reach the client as a 500, and the test log as a traceback
            traceback.print_exc()
            return error_response(HubError(500, "InternalError", "the local hub crashed; see its stderr"))

    # --- socket I/O ----------------------------------------------------------------------------
    def _read_body(self) -> bytes:
        if self._body_consumed:
            return b""
        self._body_consumed = True
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = self._read_chunked()
        else:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._bytes_read = len(data)
        return data

    def _read_chunked(self) -> bytes:
        chunks: list[bytes] = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            chunks.append(self.rfile.read(size))
            self.rfile.readline()

    def _drop_connection(self) -> None:
        """Read part of the body, then close the socket without an answer (a connection lost mid-upload)."""
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self._bytes_read = len(self.rfile.read(min(length, max(1, length // 2))))
        self.close_connection = True
        with contextlib.suppress(OSError):  # the client may have gone already
            self.connection.shutdown(socket.SHUT_RDWR)

    def _send(self, method: str, response: Response) -> None:
        self.send_response(response.status)
        headers = {"X-Request-Id": f"Root={secrets.token_hex(8)}", **response.headers}
        headers.setdefault("Content-Length", str(len(response.body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(response.body)


def make_server(host: str, port: int, state: State, routes: tuple[Route, ...], *,
                verbose: bool = False) -> ThreadingHTTPServer:
    handler = type("BoundHubHandler", (HubHandler,), {"routes": routes, "state": state, "verbose": verbose})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server
