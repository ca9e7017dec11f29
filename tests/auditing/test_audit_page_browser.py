"""The audit's HTML page in headless Chromium: it loads with no error, its plots are drawn, and the numbers
a reader sees are the ``Audit`` object's.

The page is the one tests/auditing/test_audit_html.py builds (whileai's seeded demo rows, a tokenizer trained on
them, ``max_length`` cutting some rows), opened from a file URL with the network unused. A screenshot is
written to build/audit-screenshots/ (git-ignored) to be looked at. Skips, with the reason, where Chromium
or websocket-client is missing; .ci/run installs both.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import Browser, chromium, skip_or_fail
from tests.auditing.test_audit_html import demo  # noqa: F401 (the fixture)

ROOT = Path(__file__).resolve().parent.parent.parent
SCREENSHOTS = ROOT / "build" / "audit-screenshots"


@pytest.fixture(scope="module")
def page(demo: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Browser, list[str]]]:  # noqa: F811
    executable = chromium()
    if executable is None:
        skip_or_fail("no Chromium installed (apt-get install chromium); .ci/run installs it for this test")
    try:
        import websocket  # noqa: F401
    except ImportError:
        skip_or_fail("websocket-client is not installed: pip install -e '.[test]'")
    path = demo["folder"] / "report.browser.html"
    path.write_text(demo["page"])
    browser = Browser(executable, tmp_path_factory.mktemp("chromium-profile"))  # type: ignore[arg-type]
    try:
        problems = browser.open(path.as_uri())
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        print(f"screenshot: {browser.screenshot(SCREENSHOTS / 'audit-report.png')}")
        yield browser, problems
    finally:
        browser.close()


def _evaluate(browser: Browser, expression: str) -> Any:
    result = browser.call("Runtime.evaluate", expression=expression, returnByValue=True)
    assert "exceptionDetails" not in result, result
    return result["result"]["value"]


def test_the_page_loads_with_no_console_error_and_no_request(page: tuple[Browser, list[str]]) -> None:
    browser, problems = page
    assert problems == []
    requests = [e for e in browser.events if e.get("method") == "Network.requestWillBeSent"
                and not e["params"]["request"]["url"].startswith("file:")]
    assert requests == []


def test_every_plot_is_drawn_with_marks_inside_its_box(page: tuple[Browser, list[str]]) -> None:
    browser, _ = page
    drawn = _evaluate(browser, """[...document.querySelectorAll('figure.plot')].map(f => {
        const svg = f.querySelector('svg'); const box = svg.getBoundingClientRect();
        const marks = [...svg.querySelectorAll('path')].filter(p => { const r = p.getBoundingClientRect();
            const fill = (p.getAttribute('style') || '');
            return r.width > 0 && r.height > 0 && (fill.includes('#2e9e50') || fill.includes('#c0392b')); }).length;
        return [f.dataset.plot, Math.round(box.width), Math.round(box.height), marks]; })""")
    assert [name for name, *_ in drawn] == ["supervised_share", "lengths", "roles"]  # the trainers agree: no plot
    for name, width, height, marks in drawn:  # marks: bars drawn in the plot's colours, with an area on screen
        assert width > 200 and height > 80 and marks >= 1, (name, width, height, marks)
    widths = [width for _, width, _, _ in drawn]  # a plot alone on its line is not stretched to the page's width
    assert max(widths) <= 1.05 * min(widths), drawn


def test_the_numbers_a_reader_sees_are_the_audits(page: tuple[Browser, list[str]], demo: dict[str, Any]) -> None:  # noqa: F811
    browser, _ = page
    data = demo["data"]
    shown = _evaluate(browser, """Object.fromEntries([...document.querySelectorAll('[data-figure]')].map(
        e => [e.dataset.figure, e.textContent]))""")
    tokens = data["tokens"]
    assert shown == {"rows": f"{data['rows']:,}", "training_rows": f"{data['training_rows']:,}",
                     "tokens": f"{tokens['total']:,}", "supervised_tokens": f"{tokens['supervised']:,}",
                     "naive_ratio": f"{tokens['naive_ratio']:.2f}x",
                     "zero_loss": f"{data['findings']['zero_loss']['rows']:,}"}
    rows = _evaluate(browser, """Object.fromEntries([...document.querySelectorAll('tr[data-finding]')].map(
        e => [e.dataset.finding, e.children[2].textContent]))""")
    assert rows == {name: f"{f['rows']:,} ({f['share']:.1%})" for name, f in data["findings"].items() if f["rows"]}
    trained = _evaluate(browser, """[...document.querySelectorAll('section.row span.sup')].length""")
    assert trained > 0
