"""The audit's plots, drawn by matplotlib into inline SVG so the report opens offline with no script.

matplotlib is the optional ``report`` extra (``pip install 'whileai-datasets[report]'``): only the
HTML report needs it. Each plot is a function of ``Audit.to_dict()`` alone and returns the SVG
text; the figure is never shown or kept, and the SVG ids are salted with a fixed string so the
same audit always gives the same page.
"""

from __future__ import annotations

import io
from typing import Any

from whileai_datasets.errors import SchemaError

#: Colours: trained (green, as show-mask marks it), context (grey), cut or lost (red).
TRAINED, CONTEXT, LOST = "#2e9e50", "#9a9a9a", "#c0392b"
WIDTH, HEIGHT = 6.4, 2.8  # inches


def _figure() -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise SchemaError("the audit's HTML report needs matplotlib (its plots)",
                          hint="pip install 'whileai-datasets[report]'") from None
    figure = Figure(figsize=(WIDTH, HEIGHT), layout="constrained")
    return figure, figure.add_subplot()


def _svg(figure: Any) -> str:
    from matplotlib import rc_context

    out = io.StringIO()
    with rc_context({"svg.hashsalt": "whileai-audit", "svg.fonttype": "none"}):
        figure.savefig(out, format="svg", metadata={"Date": None})
    text = out.getvalue()
    text = text[text.index("<svg"):].strip()  # the XML prolog and doctype are not allowed inside HTML
    if "<metadata>" in text:  # matplotlib's RDF block: namespaces of other sites, nothing the page needs
        text = text[: text.index("<metadata>")] + text[text.index("</metadata>") + len("</metadata>"):]
    return text


def _bin_labels(edges: list[float], share: bool) -> list[str]:
    if share:
        return [f"{edges[i]:.0%}" for i in range(len(edges) - 1)]
    return [f"{int(edges[i]):,}" for i in range(len(edges) - 1)]


def _trimmed(counts: list[int]) -> tuple[int, int]:
    """The bins from one before the first holding rows to one after the last (all of them when none does)."""
    used = [i for i, c in enumerate(counts) if c]
    return (max(used[0] - 1, 0), min(used[-1] + 2, len(counts))) if used else (0, len(counts))


def _position(edges: list[float], low: int, high: int, limit: float) -> float | None:
    """Where ``limit`` falls on the bar axis (bar ``i`` spans ``i - 0.5 .. i + 0.5``), None past the bins."""
    for i in range(low, high):
        if edges[i] <= limit < edges[i + 1]:
            return i - low - 0.5 + (limit - edges[i]) / (edges[i + 1] - edges[i])
    return None


def histogram(hist: dict[str, Any], *, title: str, xlabel: str, share: bool = False,
              limit: float | None = None) -> str:
    """Rows per bin of a per-row figure; ``limit`` draws a line (``max_length``) where it falls, and the
    bins that start at or past it are red."""
    figure, axes = _figure()
    counts, edges = hist["counts"], hist["edges"]
    low, high = _trimmed(counts) if not share else (0, len(counts))
    labels = _bin_labels(edges, share)[low:high]
    colours = [LOST if limit is not None and edges[i] >= limit else TRAINED for i in range(low, high)]
    axes.bar(range(high - low), counts[low:high], color=colours, width=0.85)
    axes.set_xticks(range(high - low), labels, rotation=45 if len(labels) > 8 else 0, fontsize=7, ha="right")
    at = _position(edges, low, high, limit) if limit is not None else None
    if at is not None:
        axes.axvline(at, color=LOST, linestyle="--", linewidth=1)
        axes.text(at + 0.1, max(counts[low:high] or [0]) * 0.9, f"max_length {int(limit):,}",  # type: ignore[arg-type]
                  color=LOST, fontsize=8, bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85})
    axes.set_title(title, fontsize=10)
    axes.set_xlabel(xlabel, fontsize=8)
    axes.set_ylabel("rows", fontsize=8)
    return _svg(figure)


def bars(values: dict[str, float], *, title: str, xlabel: str, highlight: set[str] | None = None,
         percent: bool = False) -> str:
    """One horizontal bar per name (``highlight`` ones in red), labelled with its value."""
    figure, axes = _figure()
    names = list(values)
    numbers = [float(values[n]) for n in names]
    colours = [LOST if highlight and n in highlight else TRAINED for n in names]
    axes.barh(range(len(names)), numbers, color=colours, height=0.6)
    axes.set_yticks(range(len(names)), names, fontsize=8)
    axes.invert_yaxis()
    top = max(numbers or [0]) or 1.0
    for i, value in enumerate(numbers):
        axes.text(value + top * 0.01, i, f"{value:.0%}" if percent else f"{value:,.0f}", va="center", fontsize=8)
    axes.set_xlim(0, top * 1.18)
    axes.set_title(title, fontsize=10)
    axes.set_xlabel(xlabel, fontsize=8)
    return _svg(figure)
