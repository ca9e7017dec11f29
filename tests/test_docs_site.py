"""The docs site, built and opened in headless Chromium as a reader's browser would open it.

`mkdocs build --strict` into a temporary folder (no broken link, no missing anchor or reference),
served on 127.0.0.1; Chromium (Debian's `chromium`) is driven over the DevTools protocol
(websocket-client): every page loads with no console error, no uncaught exception and no failed
request. The search index holds every public name. Screenshots of the start page and of "Which
trainer?" are written to build/docs-screenshots/ (git-ignored; the path is printed), to be looked at.

Skips, with the reason, where the docs extra (`pip install -e ".[docs]"`) or Chromium
(`apt-get install chromium`) is missing; .ci/run installs both in its docs stage.
"""

from __future__ import annotations

import base64
import functools
import http.server
import importlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.processes import stop

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS = ROOT / "build" / "docs-screenshots"
PUBLIC_MODULES = ("whileai_datasets", "whileai_datasets.transforms", "whileai_datasets.chat_template",
                  "whileai_datasets.tokenize")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--no-default-browser-check",
                  "--disable-extensions", "--remote-debugging-port=0", "--window-size=1280,900"]
SETTLE = 0.15  # seconds after the load event, for the theme's scripts and the search worker to run


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _skip(reason: str) -> None:
    """Skip, or fail where CI's docs stage requires the check (WAI_REQUIRE_DOCS_SITE=1)."""
    if os.environ.get("WAI_REQUIRE_DOCS_SITE"):
        pytest.fail(f"WAI_REQUIRE_DOCS_SITE is set, but {reason}")
    pytest.skip(reason)


def _require_docs_extra() -> None:
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python", "websocket"):
        try:
            importlib.import_module(module)
        except ImportError:
            _skip(f"{module} is not installed: pip install -e '.[docs,test]' (the docs extra builds the site)")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _require_docs_extra()
    out = tmp_path_factory.mktemp("docs-site") / "site"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


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
        return [problem for event in self.events if (problem := _problem(event))]

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        if getattr(self, "socket", None) is not None:
            self.socket.close()
        stop(self.process)


def _problem(event: dict[str, Any]) -> str | None:
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


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory, site: Path) -> Iterator[Browser]:
    executable = _chromium()
    if executable is None:
        _skip("no Chromium installed (apt-get install chromium); .ci/run installs it for this test")
    opened = Browser(executable, tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield opened
    finally:
        opened.close()


def _pages(site: Path) -> list[str]:
    return sorted(path.parent.relative_to(site).as_posix() + "/" if path.parent != site else ""
                  for path in site.rglob("index.html") if "assets" not in path.parts)


def test_every_page_loads_without_console_errors(site: Path, served: str, browser: Browser) -> None:
    pages = _pages(site)
    assert {"", "getting-started/", "trainers/", "reference/api/", "reference/cli/"} <= set(pages), pages
    problems = {page or "/": found for page in pages if (found := browser.open(served + page))}
    assert problems == {}, json.dumps(problems, indent=1)


def test_start_page_and_which_trainer_render_and_are_kept_as_screenshots(site: Path, served: str,
                                                                         browser: Browser) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shots = []
    for page, name, heading in (("", "start-page.png", "whileai-datasets"),
                                ("trainers/", "which-trainer.png", "Which trainer?")):
        assert browser.open(served + page) == []
        title = browser.call("Runtime.evaluate", expression="document.querySelector('article h1').textContent",
                             returnByValue=True)["result"]["value"]
        assert title.strip().rstrip("¶").strip() == heading
        shot = browser.screenshot(SCREENSHOTS / name)
        assert shot.stat().st_size > 10_000  # a rendered page, not a blank one
        shots.append(shot)
    print("docs screenshots:", *shots)


def test_search_finds_every_public_name(site: Path, served: str, browser: Browser) -> None:
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    anchors = {doc["location"].split("#", 1)[1] for doc in index["docs"] if "#" in doc["location"]}
    missing = [f"{module}.{name}" for module in PUBLIC_MODULES for name in importlib.import_module(module).__all__
               if f"{module}.{name}" not in anchors]
    assert missing == [], f"public names missing from the search index: {missing}"
    # the page's own search: the theme's worker loads the index and answers a query
    assert browser.open(served + "reference/api/") == []
    browser.call("Runtime.evaluate", expression="document.querySelector('input[data-md-component=search-query]')"
                                                ".focus()")
    browser.call("Input.insertText", text="mask_report")  # typed as a reader types: input events from the page
    found = browser.call("Runtime.evaluate", awaitPromise=True, returnByValue=True, expression="""
        new Promise((resolve) => {
            const deadline = Date.now() + 10000;
            (function poll() {
                const items = document.querySelectorAll('.md-search-result__item');
                if (items.length || Date.now() > deadline) resolve(items.length ? items[0].textContent : '');
                else setTimeout(poll, 100);
            })();
        })""")["result"]["value"]
    assert "mask_report" in found


def test_cli_reference_lists_every_command_and_flag_of_the_real_parser() -> None:
    """The hook that writes docs/reference/cli.md walks the parser itself, so a new flag cannot be missing."""
    import argparse

    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        cli_reference = importlib.import_module("cli_reference")
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    from whileai_datasets.cli import build_parser

    text = cli_reference.cli_reference()
    pending = [(["whileai-datasets"], build_parser())]
    while pending:
        words, parser = pending.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                pending += [([*words, name], sub) for name, sub in action.choices.items()]
                for name in action.choices:
                    assert f"`{' '.join([*words, name])}`" in text
            elif not isinstance(action, argparse._HelpAction):
                for flag in action.option_strings:
                    assert f"`{flag}`" in text, f"{' '.join(words)} {flag} is missing from the CLI reference"
    assert "<!-- cli-reference -->" in (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
