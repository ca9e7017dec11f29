"""The audit as one self-contained HTML page: figures, plots, every problem with its rows, the worst rows.

A person deciding whether to spend GPU time would rather look than read: the supervised share per
row, the lengths against ``max_length``, the role shares and what each trainer trains are plots
(``plots.py``, inline SVG), and the rows with the least supervision or the most cut are shown as
``show-mask --html`` shows a row (trained text highlighted, the cut drawn). The page holds no
script and loads nothing: it opens offline. Every figure is written from ``Audit.to_dict()`` and
carries it in a ``data-`` attribute (``data-figure``, ``data-finding`` + ``data-rows``), so a test
reads the numbers off the page and compares them with the audit's.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from whileai_datasets.auditing import plots
from whileai_datasets.auditing.text import headline, trainer_state
from whileai_datasets.tokenize.views import VIEW_CSS, MaskView

__all__ = ["RowExample", "audit_html", "rows_page"]

CSS = VIEW_CSS + (
    "body{font-family:system-ui,sans-serif;max-width:72em;margin:1em auto;padding:0 1em;color:#222}"
    "h1{font-size:1.4em} h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}"
    "dl.figures{display:grid;grid-template-columns:max-content auto;gap:.2em 1.2em} dt{color:#555}"
    "dd{margin:0;font-weight:600} table{border-collapse:collapse;width:100%;font-size:.92em}"
    "td,th{border-bottom:1px solid #e4e4e4;padding:.3em .5em;text-align:left;vertical-align:top}"
    "tr.problem td:first-child{color:#b00;font-weight:600} p.problem{color:#b00;font-weight:600}"
    "p.headline{color:#fff;background:#b00;padding:.5em .8em;font-weight:600} .plots{display:flex;flex-wrap:wrap;gap:1em}"
    "figure.plot{margin:0;flex:0 1 30em;min-width:0} figure.plot svg{width:100%;height:auto}"
    "section.row pre{font-family:ui-monospace,monospace;font-size:.85em;background:#fafafa;padding:.6em;"
    "border:1px solid #eee;white-space:pre-wrap;overflow-wrap:anywhere} .ok{color:#2e7d32}"
    "td.where{white-space:nowrap;font-size:.9em}"
)


@dataclass(frozen=True)
class RowExample:
    """One row to show whole: a title (which list it is from and why), its row number, its view, where it
    is in its file, and notes on what the pipeline and the template do to it."""

    title: str
    row: int
    view: MaskView
    where: str = ""
    notes: tuple[str, ...] = ()


def _figure_row(name: str, label: str, value: Any, shown: str) -> str:
    data = html.escape(json.dumps(value))
    return f'<dt>{html.escape(label)}</dt><dd data-figure="{name}" data-value="{data}">{html.escape(shown)}</dd>'


def _figures(data: dict[str, Any]) -> str:
    rows = [_figure_row("rows", "rows", data["rows"], f"{data['rows']:,}"),
            _figure_row("training_rows", "training rows", data["training_rows"], f"{data['training_rows']:,}")]
    tokens = data["tokens"]
    if tokens is not None:
        ratio = tokens["naive_ratio"]
        rows += [_figure_row("tokens", "tokens", tokens["total"], f"{tokens['total']:,}"),
                 _figure_row("supervised_tokens", "supervised tokens", tokens["supervised"],
                             f"{tokens['supervised']:,}"),
                 _figure_row("naive_ratio", "naive ratio (every token / marked)", ratio,
                             "-" if ratio is None else f"{ratio:.2f}x")]
    zero = data["findings"]["zero_loss"]["rows"]
    rows.append(_figure_row("zero_loss", "rows that train nothing", zero, f"{zero:,}"))
    return f'<dl class="figures">{"".join(rows)}</dl>'


def _where(entry: dict[str, Any]) -> str:
    """A location as the page shows it: the file's name, not its whole path (the page's header names the
    source once), with the full path as the tooltip."""
    if not entry.get("file"):
        return html.escape(f"row {entry['row']}")
    line = f" line {entry['line']}" if entry.get("line") else ""
    shown = f"{os.path.basename(entry['file'])}{line} (row {entry['row']})"
    return f'<span title="{html.escape(entry["file"])}">{html.escape(shown)}</span>'


def _findings(data: dict[str, Any]) -> str:
    shown = [(n, f) for n, f in data["findings"].items() if f["rows"]]
    if not shown:
        return '<p class="ok">No problem found, and nothing to note.</p>'
    body = []
    for name, found in sorted(shown, key=lambda item: not item[1]["problem"]):
        amount = f"{found['amount']:,} {found['unit']}" if found["unit"] else ""
        first = "<br>".join(_where(e) for e in found["first"])
        kind = "problem" if found["problem"] else "note"
        body.append(f'<tr class="{kind}" data-finding="{name}" data-rows="{found["rows"]}"><td>'
                    f'{html.escape(name.replace("_", "-"))}</td><td>{html.escape(found["description"])}</td>'
                    f'<td>{found["rows"]:,} ({found["share"]:.1%})</td><td>{html.escape(amount)}</td>'
                    f'<td class="where">{first}</td></tr>')
    head = "<tr><th>finding</th><th>what it means</th><th>rows</th><th>amount</th><th>first locations</th></tr>"
    return f"<table>{head}{''.join(body)}</table>"


def _plot(name: str, svg: str) -> str:
    return f'<figure class="plot" data-plot="{name}">{svg}</figure>'


def _trained_groups(data: dict[str, Any]) -> dict[int, tuple[str, bool]]:
    """The trainers grouped by the tokens they train: tokens -> (their names, whether all train the mask)."""
    groups: dict[int, list[tuple[str, bool]]] = {}
    for name, entry in data["trainers"].items():
        if entry.get("trains_tokens") is not None:
            groups.setdefault(entry["trains_tokens"], []).append((name, entry["exact"]))
    return {tokens: (", ".join(n for n, _ in names), all(e for _, e in names)) for tokens, names in groups.items()}


def _plots(data: dict[str, Any]) -> str:
    drawn = []
    histograms = data["histograms"]
    if histograms["supervised_share_per_row"]["n"]:
        drawn.append(_plot("supervised_share", plots.histogram(
            histograms["supervised_share_per_row"], title="supervised share per row",
            xlabel="share of the row's tokens that are trained", share=True)))
    if histograms["tokens_before_cut_per_row"]["n"]:
        cut = data["findings"]["truncated"]["rows"]
        drawn.append(_plot("lengths", plots.histogram(
            histograms["tokens_before_cut_per_row"], title=f"tokens per row before the cut ({cut:,} rows cut by "
            "max_length)", xlabel="tokens (bins from the value shown to the next)",
            limit=data["options"].get("max_length"))))
    roles = {role: entry["share"] for role, entry in data["roles"].items()}
    if roles:
        drawn.append(_plot("roles", plots.bars(roles, title=f"role shares ({data['role_measure']})",
                                               xlabel="share", percent=True)))
    trained = _trained_groups(data)
    if len(trained) > 1:  # one bar per figure the trainers differ on; all equal: the table says so
        inexact = {label for label, exact in trained.values() if not exact}
        drawn.append(_plot("trainers", plots.bars({label: tokens for tokens, (label, _) in trained.items()},
                                                  title="tokens trained, by trainer (red: not the mask)",
                                                  xlabel="tokens", highlight=inexact)))
    return f'<div class="plots">{"".join(drawn)}</div>' if drawn else "<p>No tokens to plot (no tokenizer).</p>"


def _trainers(data: dict[str, Any]) -> str:
    body = []
    for name, entry in data["trainers"].items():
        gaps = "<br>".join(f"{hit['rows']:,} {html.escape(entry['unit'])}: {html.escape(shape)}"
                           for shape, hit in entry["inexact"].items())
        tokens = "-" if entry.get("trains_tokens") is None else f"{entry['trains_tokens']:,}"
        body.append(f'<tr data-trainer="{html.escape(name)}" data-exact="{str(entry["exact"]).lower()}"><td>'
                    f'{html.escape(name)}</td><td>{html.escape(str(entry["config"]))}</td><td>'
                    f'{trainer_state(entry)}</td><td>{tokens}</td>'
                    f'<td>{html.escape(entry["how"])}</td><td>{gaps}</td></tr>')
    head = ("<tr><th>trainer</th><th>config</th><th>mask</th><th>tokens trained</th><th>how</th>"
            "<th>rows it cannot train exactly</th></tr>")
    return f"<table>{head}{''.join(body)}</table>"


def _template(data: dict[str, Any]) -> str:
    facts = data["template"]
    if facts is None:
        return "<p>No template given.</p>"
    items = "".join(f"<dt>{html.escape(k.replace('_', ' '))}</dt><dd>{html.escape(str(v))}</dd>"
                    for k, v in facts.items())
    return f'<dl class="figures">{items}</dl>'


def _examples(examples: Sequence[RowExample]) -> str:
    if not examples:
        return "<p>No row to show (no tokenizer, or no row).</p>"
    return "".join(
        f'<section class="row" data-row="{e.row}"><h3>{html.escape(e.title)}: row {e.row}'
        f'{" (" + html.escape(e.where) + ")" if e.where else ""}</h3><p>{html.escape(e.view.summary())}</p>'
        + "".join(f'<p class="note">note: {html.escape(note)}</p>' for note in e.notes)
        + f"{e.view.html_fragment()}</section>" for e in examples)


def rows_page(title: str, examples: Sequence[RowExample]) -> str:
    """A page of rows alone (``show-mask --html``): each with its summary, notes and trained text."""
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{html.escape(title)}</h1>{_examples(examples)}</body></html>\n")


def audit_html(data: dict[str, Any], *, examples: Sequence[RowExample] = ()) -> str:
    """The page for ``Audit.to_dict()`` (``data``), with ``examples`` rendered as show-mask renders a row.

    Raises:
        SchemaError: matplotlib is not installed (the ``report`` extra).
    """
    title = f"audit of {data['source']}"
    options = ", ".join(f"{k}={v!r}" for k, v in data["options"].items())
    problems = data["problems"]
    verdict = (f'<p class="problem">{len(problems)} problem(s): {html.escape(", ".join(problems))}</p>' if problems
               else '<p class="ok">No problem found.</p>')
    first = "".join(f'<p class="headline">{html.escape(line)}</p>' for line in headline(data) if line)
    sections = [("Figures", _figures(data) + verdict), ("Plots", _plots(data)), ("Findings", _findings(data)),
                ("Trainers", _trainers(data)), ("Template", _template(data)),
                ("The rows with the least supervision or the most cut", _examples(examples))]
    body = "".join(f"<h2>{html.escape(head)}</h2>{content}" for head, content in sections)
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{html.escape(title)}</h1>{first}<p>{html.escape(options)}</p>{body}</body></html>\n")
