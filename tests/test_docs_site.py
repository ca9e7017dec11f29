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

import functools
import http.server
import importlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import Browser, chromium, skip_or_fail

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS = ROOT / "build" / "docs-screenshots"
PUBLIC_MODULES = ("whileai_datasets", "whileai_datasets.transforms", "whileai_datasets.chat_template",
                  "whileai_datasets.tokenize")
def _require_docs_extra() -> None:
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python", "websocket"):
        try:
            importlib.import_module(module)
        except ImportError:
            skip_or_fail(f"{module} is not installed: pip install -e '.[docs,test]' (the docs extra builds the site)")


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


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory, site: Path) -> Iterator[Browser]:
    executable = chromium()
    if executable is None:
        skip_or_fail("no Chromium installed (apt-get install chromium); .ci/run installs it for this test")
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
            # a hidden flag (kept only so an older command line still works) is not documented
            elif not isinstance(action, argparse._HelpAction) and action.help != argparse.SUPPRESS:
                for flag in action.option_strings:
                    assert f"`{flag}`" in text, f"{' '.join(words)} {flag} is missing from the CLI reference"
    assert "<!-- cli-reference -->" in (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
