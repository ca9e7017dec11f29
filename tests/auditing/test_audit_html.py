"""The audit's HTML page: self-contained, every number equal to the audit's, the plots and worst rows there.

The rows are whileai's seeded demo agent's, tokenized with a tokenizer trained on them and Qwen2.5's
template (tests/support/tiny_lm.py); ``max_length`` is set so that some rows are cut. The page is checked
here as HTML; tests/test_browser_pages.py opens it in headless Chromium.
"""

from __future__ import annotations

import json
import os
import re
import sys
from html.parser import HTMLParser
from typing import Any

import pytest

from tests.conftest import SYSTEM_PROMPT, TOOLS, seeded_rows, write_jsonl
from tests.support.tiny_lm import train_tokenizer, trl_template
from whileai_datasets import SchemaError, audit, cli
from whileai_datasets.auditing.examples import worst_examples
from whileai_datasets.auditing.html import audit_html

MAX_LENGTH = 560


class _Page(HTMLParser):
    """The attributes of every element, in order, and the tags seen."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def having(self, name: str) -> list[dict[str, str | None]]:
        return [attrs for _, attrs in self.elements if name in attrs]


def _parse(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("audit-html")
    rows = seeded_rows(0)
    source = write_jsonl(folder / "run.jsonl", rows)
    tokenizer = train_tokenizer([json.dumps(r) for r in rows], chat_template=trl_template("qwen2_5"), vocab_size=800)
    found = audit(str(source), tokenizer=tokenizer, max_length=MAX_LENGTH, system_prompt=SYSTEM_PROMPT, tools=TOOLS,
                  trl_default=True)  # every trainer's figure measured
    examples = worst_examples(str(source), found, tokenizer=tokenizer, tools=TOOLS)
    tokenizer.save_pretrained(str(folder / "tok"))
    return {"folder": folder, "source": source, "audit": found, "data": found.to_dict(), "examples": examples,
            "page": audit_html(found.to_dict(), examples=examples)}


def test_the_page_loads_nothing_and_runs_no_script(demo: dict[str, Any]) -> None:
    page = _parse(demo["page"])
    tags = {tag for tag, _ in page.elements}
    assert "script" not in tags and "link" not in tags and "img" not in tags and "iframe" not in tags
    referenced = [attrs for _, attrs in page.elements for key in ("src", "href") if attrs.get(key)]
    assert referenced == []
    assert not re.search(r"url\((?!#)|@import|https?://(?!www\.w3\.org/)", demo["page"])  # in-page ids, SVG namespaces


def test_every_figure_on_the_page_equals_the_audits(demo: dict[str, Any]) -> None:
    data = demo["data"]
    expected = {"rows": data["rows"], "training_rows": data["training_rows"], "tokens": data["tokens"]["total"],
                "supervised_tokens": data["tokens"]["supervised"], "naive_ratio": data["tokens"]["naive_ratio"],
                "zero_loss": data["findings"]["zero_loss"]["rows"]}
    shown = {attrs["data-figure"]: json.loads(attrs["data-value"] or "null")
             for attrs in _parse(demo["page"]).having("data-figure")}
    assert shown == expected
    assert data["tokens"]["supervised"] > 0 and data["findings"]["truncated"]["rows"] > 0  # the data can fail


def test_every_finding_with_rows_is_on_the_page_with_its_count(demo: dict[str, Any]) -> None:
    data = demo["data"]
    shown = {attrs["data-finding"]: int(attrs["data-rows"] or -1) for attrs in _parse(demo["page"]).having("data-finding")}
    assert shown == {name: f["rows"] for name, f in data["findings"].items() if f["rows"]}
    assert "truncated" in shown


def test_the_plots_are_svg_drawings(demo: dict[str, Any]) -> None:
    plots = re.findall(r'<figure class="plot" data-plot="(\w+)">(<svg.*?</svg>)</figure>', demo["page"], re.S)
    # every trainer trains the mask here: one figure, said by the table, so no trainer plot of equal bars
    assert {entry["trains_tokens"] for entry in demo["data"]["trainers"].values()} == {demo["audit"].supervised_tokens}
    assert [name for name, _ in plots] == ["supervised_share", "lengths", "roles"]
    for name, svg in plots:
        assert svg.count("<path") > 3, name
    lengths = dict(plots)["lengths"]
    assert f"max_length {MAX_LENGTH:,}" in lengths


def test_the_worst_rows_are_rendered_with_their_trained_text(demo: dict[str, Any]) -> None:
    found = demo["audit"]
    least = found.worst["least_supervised"].rows[:3].tolist()
    rows = [int(attrs["data-row"] or -1) for attrs in _parse(demo["page"]).having("data-row")]
    assert rows[: len(least)] == least
    for example in demo["examples"]:
        assert example.view.supervised > 0 and any(sup for _, sup in example.view.runs)
    cut = [e for e in demo["examples"] if e.view.cut is not None]
    assert cut and all(e.view.tokens == MAX_LENGTH for e in cut)
    assert '<span class="cutmark">' in demo["page"] and '<span class="sup">' in demo["page"]


def test_audit_html_writes_the_page_and_says_where(demo: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    out = demo["folder"] / "report.html"
    tools = demo["folder"] / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    args = ["audit", str(demo["source"]), "--tokenizer", str(demo["folder"] / "tok"), "--max-length",
            str(MAX_LENGTH), "--system-prompt", SYSTEM_PROMPT, "--tools", str(tools), "--html", str(out)]
    assert cli.main(args) == 0
    assert f"HTML report: {out}" in capsys.readouterr().out
    shown = {attrs["data-figure"]: json.loads(attrs["data-value"] or "null")
             for attrs in _parse(out.read_text()).having("data-figure")}
    assert shown["rows"] == demo["data"]["rows"] and shown["tokens"] == demo["data"]["tokens"]["total"]


def test_audit_html_refuses_to_write_over_the_source(demo: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    before = demo["source"].read_bytes()
    assert cli.main(["audit", str(demo["source"]), "--html", str(demo["source"])]) == 1
    assert "output" in capsys.readouterr().err
    assert demo["source"].read_bytes() == before


def test_without_matplotlib_the_report_says_which_extra(demo: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # what an environment without it imports
    with pytest.raises(SchemaError, match=r"needs matplotlib .* pip install 'whileai-datasets\[report\]'"):
        audit_html(demo["data"], examples=demo["examples"])


def test_the_trainer_plot_has_one_bar_per_figure_red_where_it_is_not_the_mask(demo: dict[str, Any]) -> None:
    data = json.loads(json.dumps(demo["data"]))
    data["trainers"]["trl"].update(exact=False, trains_tokens=data["tokens"]["total"])  # TRL's naive route
    page = audit_html(data)
    svg = re.search(r'data-plot="trainers">(<svg.*?</svg>)', page, re.S)
    assert svg is not None and "llama-factory, ms-swift, axolotl" in svg.group(1) and ">trl<" in svg.group(1)
    assert svg.group(1).count("#c0392b") == 1  # the one bar that is not the mask


def test_locations_name_the_file_not_its_whole_path(demo: dict[str, Any]) -> None:
    found = next(f for f in demo["data"]["findings"].values() if f["rows"] and f["first"] and f["first"][0]["file"])
    entry = found["first"][0]
    assert os.path.isabs(entry["file"])
    assert f'title="{entry["file"]}">{os.path.basename(entry["file"])} line {entry["line"]}' in demo["page"]
    assert f">{entry['file']} line" not in demo["page"]
