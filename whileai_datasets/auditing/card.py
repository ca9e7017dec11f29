"""The audit's summary for a dataset card: what each split trains, with the plots as files in the repo.

A reader of a Hub repo sees, before downloading it, how many rows and tokens each split has, how
many of those tokens the mask trains (and what training every token would train instead), which
rows train nothing and why, and the plots of the HTML report, committed as SVG files under
``card/audit/`` and linked from the card. Built from ``Audit.to_dict()`` alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from whileai_datasets.auditing import plots
from whileai_datasets.hub.card_sections import CardSection

__all__ = ["card_section"]

FOLDER = "card/audit"
TITLE = "What each split trains (whileai-datasets audit)"


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _figures(name: str, data: dict[str, Any]) -> str:
    tokens = data["tokens"]
    zero = data["findings"]["zero_loss"]["rows"]
    if tokens is None:
        return f"| {_cell(name)} | {data['rows']:,} | - | - | - | {zero:,} |"
    ratio = "-" if tokens["naive_ratio"] is None else f"{tokens['naive_ratio']:.2f}x"
    return (f"| {_cell(name)} | {data['rows']:,} | {tokens['total']:,} | {tokens['supervised']:,} | {ratio} "
            f"| {zero:,} |")


def _options(audits: Mapping[str, dict[str, Any]]) -> list[str]:
    """The options each split was audited with (``max_length`` included: train with the same one)."""
    lines = ["Audited with:", ""]
    for name, data in audits.items():
        said = ", ".join(f"`{key}={value!r}`" for key, value in data["options"].items() if key != "system_prompt")
        lines.append(f"- {_cell(name)}: {said}")
    limits = {data["options"].get("max_length") for data in audits.values()} - {None}
    if limits:
        lines += ["", f"The counts hold for a trainer that keeps `max_length={max(limits)}` tokens per row: train "
                      f"with `SFTConfig(max_length={max(limits)})` (TRL's default, 1024, cuts again)."]
    return lines


def _problems(name: str, data: dict[str, Any]) -> list[str]:
    lines = []
    for finding in data["problems"]:
        found = data["findings"][finding]
        lines.append(f"- `{_cell(name)}`: **{finding.replace('_', '-')}**, {found['rows']:,} rows "
                     f"({found['share']:.1%}): {_cell(found['description'])}")
    return lines


def _plots(name: str, data: dict[str, Any]) -> tuple[list[str], dict[str, bytes]]:
    histograms = data["histograms"]
    drawn: dict[str, tuple[str, str]] = {}
    if histograms["supervised_share_per_row"]["n"]:
        drawn["supervised_share"] = ("supervised share per row", plots.histogram(
            histograms["supervised_share_per_row"], title=f"{name}: supervised share per row",
            xlabel="share of the row's tokens that are trained", share=True))
    if histograms["tokens_before_cut_per_row"]["n"]:
        drawn["lengths"] = ("tokens per row before max_length", plots.histogram(
            histograms["tokens_before_cut_per_row"], title=f"{name}: tokens per row before the cut",
            xlabel="tokens (bins from the value shown to the next)", limit=data["options"].get("max_length")))
    files = {f"{FOLDER}/{name}-{key}.svg": svg.encode("utf-8") for key, (_, svg) in drawn.items()}
    links = [f"![{_cell(name)}: {alt}]({FOLDER}/{name}-{key}.svg)" for key, (alt, _) in drawn.items()]
    return links, files


def card_section(audits: Mapping[str, dict[str, Any]], *, with_plots: bool = True) -> CardSection:
    """The card section for ``audits`` (split name -> ``Audit.to_dict()``).

    Raises:
        SchemaError: ``with_plots`` and matplotlib is not installed (the ``report`` extra).
    """
    head = ["| split | rows | tokens | supervised tokens | every token / supervised | rows that train nothing |",
            "| --- | ---: | ---: | ---: | ---: | ---: |"]
    rows = [_figures(name, data) for name, data in audits.items()]
    problems = [line for name, data in audits.items() for line in _problems(name, data)]
    text = ["Counted over every row by `whileai-datasets audit`, with the options the rows were exported with; "
            "\"every token / supervised\" is what a trainer that trains every token (TRL on plain `messages` "
            "rows) trains against the mask.", "", *head, *rows, "", *_options(audits), ""]
    text += ["Problems found:", "", *problems, ""] if problems else ["No problem found.", ""]
    files: dict[str, bytes] = {}
    if with_plots:
        for name, data in audits.items():
            links, drawn = _plots(name, data)
            text += [" ".join(links), ""] if links else []
            files.update(drawn)
    return CardSection(TITLE, "\n".join(text), files)
