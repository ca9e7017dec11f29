"""The audit as text for a terminal: the figures, then each problem with its count and first locations.

Built from ``Audit.to_dict()`` only, so the text and the JSON can never disagree.
"""

from __future__ import annotations

import os
from typing import Any

from whileai_datasets import option_names
from whileai_datasets.tokenize.row_failures import CAUSES, dashed

#: Locations shown per finding in the text report (``to_dict()`` keeps up to five).
SHOWN = 3


def _where(entry: dict[str, Any]) -> str:
    """A location by its file's name (the report's first line names the source whole)."""
    if entry.get("file"):
        line = f" line {entry['line']}" if entry.get("line") else ""
        return f"{os.path.basename(entry['file'])}{line} (row {entry['row']})"
    return f"row {entry['row']}"


def _finding_line(name: str, finding: dict[str, Any], width: int, bases_differ: bool = False) -> str:
    amount = f", {finding['amount']:,} {finding['unit']}" if finding["unit"] and finding["amount"] else ""
    base = f" of {finding['share_of'].replace('_', ' ')}" if bases_differ else ""
    first = "; ".join(_where(e) for e in finding["first"][:SHOWN])
    more = ", ..." if len(finding["first"]) > SHOWN else ""
    line = f"  {name.replace('_', '-').ljust(width)}  {finding['rows']:,} rows ({finding['share']:.1%}{base}){amount}"
    error = f"\n  {''.ljust(width)}  first error: {finding['first_error']}" if finding.get("first_error") else ""
    return f"{line}\n  {''.ljust(width)}  {finding['description']}" + (
        f"\n  {''.ljust(width)}  first: {first}{more}" if first else "") + error


def _tokens(data: dict[str, Any]) -> list[str]:
    tokens = data["tokens"]
    if tokens is None:
        return ["tokens               - (no tokenizer given: message-level figures only)"]
    ratio = tokens["naive_ratio"]
    share = tokens["supervised_share"]
    lines = [f"tokens               {tokens['total']:,}"
             + (f" ({tokens['before_cut']:,} before max_length)" if tokens["before_cut"] != tokens["total"] else ""),
             f"supervised tokens    {tokens['supervised']:,}" + (f" ({share:.1%} of tokens)" if share is not None else "")]
    if ratio is not None:
        lines.append(f"naive ratio          {ratio:.1f}x: training every token (TRL on format='trl' messages rows) "
                     "trains that many times the tokens the mask marks")
    per_row = data["histograms"]["supervised_tokens_per_row"]
    if per_row["n"]:
        lines.append(f"supervised per row   min {per_row['min']:.0f}, mean {per_row['mean']:.1f}, max {per_row['max']:.0f}")
    methods = ", ".join(f"{k} {v:,}" for k, v in data["mask_methods"].items())
    if methods:
        lines.append(f"mask method          {methods}")
    return lines


def _template(data: dict[str, Any]) -> list[str]:
    facts = data["template"]
    if facts is None:
        return []
    said = [f"system message {'rendered' if facts['renders_system'] else 'DROPPED'}"
            if facts["renders_system"] is not None else "system message: unknown",
            f"tool schemas {'rendered' if facts['renders_tools'] else 'DROPPED'}"
            if facts["renders_tools"] is not None else "tool schemas: unknown",
            f"reasoning in earlier turns {facts['think_in_history']}"]
    if data["findings"]["template_drops_content_parts"]["rows"]:
        said.append("text parts DROPPED (or written as data)")  # said where rows have parts
    if data["findings"]["template_drops_images"]["rows"]:
        said.append("images DROPPED (nothing marks them in the render)")
    if facts.get("joins_text_parts") and data["findings"]["text_parts_joined"]["rows"]:
        said.append("text parts joined into one string (it concatenates strings)")
    if facts["default_system_prompt"]:
        said.append(f"adds a default system prompt {facts['default_system_prompt'][:60]!r}")
    return [f"template             {facts['name']} (mask method {facts['mask_method']}): " + "; ".join(said)]


def trainer_state(entry: dict[str, Any]) -> str:
    """A trainer entry's verdict: "exact", "inexact", or "not measured" (``exact`` None: ``trl-default`` not asked
    for; its ``how`` then says so and how to measure it)."""
    return "not measured" if entry["exact"] is None else "exact" if entry["exact"] else "inexact"


def _trainers(data: dict[str, Any]) -> list[str]:
    lines = ["trainers"]
    for name, entry in data["trainers"].items():
        tokens = f", trains {entry['trains_tokens']:,} tokens" if entry.get("trains_tokens") is not None else ""
        said = entry["how"] if entry["exact"] is None else f"{trainer_state(entry)}{tokens} ({entry['how']})"
        lines.append(f"  {name.ljust(14)} {entry['config']}: {said}")
        for shape, hit in entry["inexact"].items():
            lines.append(f"  {''.ljust(14)} {hit['rows']:,} {entry['unit']}: {shape} (first: {hit['first']})")
    return lines


def _causes(findings: dict[str, Any]) -> str:
    return ", ".join(f"{findings[c]['rows']:,} {dashed(c)}" for c in CAUSES if findings[c]["rows"])


def headline(data: dict[str, Any]) -> list[str]:
    """What must be read first: nothing trains at all, or rows the template cannot render or mask."""
    findings = data["findings"]
    bad = findings["bad_rows"]["rows"]
    if data["trainers"] and all(e["how"].startswith("nothing trains") for e in data["trainers"].values()):
        why = _causes(findings) or next(iter(data["trainers"].values()))["how"].removeprefix("nothing trains: ")
        return [f"NOTHING TRAINS: none of the {data['training_rows']:,} training rows has a supervised token "
                f"({why}); every row is zero-loss", ""]
    if not bad:
        return []
    stops = option_names.spell("on_bad_row", "raise")
    return [f"{bad:,} of {data['training_rows']:,} training rows fail the template ({_causes(findings)}): tokenize "
            f"with {option_names.spell('on_bad_row', 'skip')} trains the other rows (the figures below), with "
            f"{stops} it stops at the first", ""]


def _privacy(found: dict[str, Any] | None) -> list[str]:
    """Secrets and personal data by kind, each with its first places and masked previews."""
    if not found or not (found["secrets"] or found["personal"]):
        return []
    lines = [""]
    for group, title in (("secrets", "secrets (publish refuses them)"), ("personal", "personal data")):
        if found[group]:
            lines.append(title)
        for kind, entry in found[group].items():
            first = "; ".join(f"{_where(p)} {p['field']} {p['preview']}" for p in entry["first"][:SHOWN])
            lines.append(f"  {kind}  {entry['rows']:,} rows, {entry['values']:,} values; first: {first}")
    return lines


def format_audit(data: dict[str, Any]) -> str:
    """The text report of ``Audit.to_dict()``."""
    options = data["options"]
    shown = ", ".join(f"{k}={v!r}" for k, v in options.items() if k not in ("system_prompt",))
    unit = " samples" if data["row_unit"] == "sample" else ""
    lines = [*headline(data), f"audit of {data['source']} ({shown})",
             f"rows                 {data['rows']:,} ({data['training_rows']:,} training rows{unit})",
             *_tokens(data)]
    roles = data["roles"]
    if roles:
        lines.append("role shares          " + ", ".join(f"{r} {v['share']:.0%}" for r, v in roles.items())
                     + f" ({data['role_measure']})")
    lines += _template(data)
    findings = data["findings"]
    width = max(len(n) for n in findings)
    problems = [n for n in data["problems"]]
    lines.append("")
    lines.append("problems" if problems else "problems: none found")
    differ = data["rows"] != data["training_rows"]  # then say which each share is of
    lines += [_finding_line(n, findings[n], width, differ) for n in problems]
    adapted = data.get("adaptations", [])
    if adapted:
        lines += ["", "adaptations (lossless: the rows' own text, in the form the template takes)"]
        lines += [_finding_line(n, findings[n], width, differ) for n in adapted]
    notes = [n for n, f in findings.items() if not f["problem"] and f["rows"] and n not in adapted]
    if notes:
        lines += ["", "notes"] + [_finding_line(n, findings[n], width, differ) for n in notes]
    lines += _privacy(data.get("privacy"))
    lines += ["", *_trainers(data)]
    if data["options"].get("max_length") is not None and data["tokenized"]:
        limit = data["options"]["max_length"]
        lines.append(f"  (these counts are at max_length={limit}: train with SFTConfig(max_length={limit}); a trainer "
                     "with a shorter one cuts again, which whileai_datasets.check_max_length catches)")
    return "\n".join(lines)
