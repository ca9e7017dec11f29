"""Headless Chromium for tests that open a page as a reader's browser would (the docs site, the audit's report).

Debian's ``chromium`` is driven over the DevTools protocol with websocket-client (Playwright cannot
fetch a browser here). ``Browser.open`` returns what went wrong on a page: console errors, uncaught
exceptions, failed requests. Tests skip with the reason where Chromium is missing, or fail where CI
requires the check (``WAI_REQUIRE_DOCS_SITE=1``).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import stop

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--no-default-browser-check",
                  "--disable-extensions", "--remote-debugging-port=0", "--window-size=1280,900"]
SETTLE = 0.15  # seconds after the load event, for the theme's scripts and the search worker to run


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def skip_or_fail(reason: str) -> None:
    """Skip, or fail where CI's docs stage requires the check (WAI_REQUIRE_DOCS_SITE=1)."""
    if os.environ.get("WAI_REQUIRE_DOCS_SITE"):
        pytest.fail(f"WAI_REQUIRE_DOCS_SITE is set, but {reason}")
    pytest.skip(reason)


class Browser:
    """One headless Chromium and one tab, spoken to over the DevTools protocol."""

    def __init__(self, executable: str, profile: Path) -> None:
        import websocket

        self.process = subprocess.Popen([executable, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"chromium did not start (exit code {self.process.poll()})")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as response:
            tabs = [tab for tab in json.load(response) if tab.get("type") == "page"]
        self.socket = websocket.create_connection(tabs[0]["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.socket.settimeout(30)
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self.events.append(message)

    def wait_for(self, event: str, timeout: float = 20) -> None:
        if any(e.get("method") == event for e in self.events):
            return
        deadline = time.monotonic() + timeout
        self.socket.settimeout(timeout)
        while time.monotonic() < deadline:
            message = json.loads(self.socket.recv())
            self.events.append(message)
            if message.get("method") == event:
                return
        raise TimeoutError(event)

    def drain(self, seconds: float) -> None:
        import websocket

        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.socket.settimeout(left)
            try:
                self.events.append(json.loads(self.socket.recv()))
            except websocket.WebSocketTimeoutException:  # nothing more arrived
                return

    def open(self, url: str) -> list[str]:
        """Load ``url``; return what went wrong on it (console errors, exceptions, failed requests)."""
        self.events = []
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")
        self.drain(SETTLE)
        return [problem for event in self.events if (problem := page_problem(event))]

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        if getattr(self, "socket", None) is not None:
            self.socket.close()
        stop(self.process)


def page_problem(event: dict[str, Any]) -> str | None:
    method, params = event.get("method"), event.get("params", {})
    if method == "Runtime.exceptionThrown":
        details = params["exceptionDetails"]
        return f"uncaught exception: {details.get('exception', {}).get('description') or details.get('text')}"
    if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        return "console." + params["type"] + ": " + " ".join(str(a.get("value", a.get("description"))) for a in
                                                            params.get("args", []))
    if method == "Log.entryAdded" and params["entry"].get("level") == "error":
        return f"log error: {params['entry'].get('text')} {params['entry'].get('url', '')}".strip()
    if method == "Network.loadingFailed" and not params.get("canceled"):
        return f"request failed: {params.get('errorText')} ({params.get('type')})"
    return None


