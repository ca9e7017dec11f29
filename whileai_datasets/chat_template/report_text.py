"""The human-readable form of a ``TemplateReport`` (``whileai-datasets template inspect``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from whileai_datasets.chat_template.inspect import TemplateReport


def _yes_no(value: bool | None) -> str:
    return "unknown" if value is None else "yes" if value else "no"


def _block_lines(report: TemplateReport) -> list[str]:
    if not report.generation_blocks:
        return ["  generation blocks:        none (run `template patch` to add them)"]
    lines = [f"  generation blocks:        {len(report.generation_blocks)}"]
    for block in report.generation_blocks:
        where = " inside a macro" if block.in_macro else " inside a {% set %} capture" if block.in_capture else ""
        warn = " (transformers' tracker shifts these offsets)" if where else ""
        lines.append(f"    line {block.line}-{block.end_line}{where}{warn}")
    lines.append(f"  covers roles:             {', '.join(report.generation_roles) or 'none'}")
    lines.append(f"  covers assistant output:  {_yes_no(report.covers_assistant_output)}")
    lines += [f"    ! {problem}" for problem in report.coverage_problems[:3]]
    lines.append(f"  end-of-turn in span:      {_yes_no(report.end_of_turn_in_span)}")
    return lines


def format_report(report: TemplateReport) -> str:
    """Several lines a person can read; the same facts as ``to_dict()``."""
    if report.syntax_error:
        return (f"{report.name}: syntax error at line {report.syntax_error_line}: {report.syntax_error}\n"
                "  Fix the template at that line; nothing else can be inspected until it parses.")
    lines = [f"{report.name}", *_block_lines(report)]
    lines += [
        f"  prefix-preserving:        {_yes_no(report.prefix_preserving)}",
        *([f"    ! {report.prefix_break}"] if report.prefix_break else []),
        f"  tool definitions:         {_yes_no(report.supports_tools)}",
        f"  tool calls rendered:      {_yes_no(report.renders_tool_calls)}",
        f"  system message:           {_yes_no(report.supports_system)}",
        f"  <think> in history:       {report.think_in_history}",
        f"  add_generation_prompt:    {'used' if report.uses_add_generation_prompt else 'not used'}"
        + (f" (appends {report.generation_prompt!r})" if report.generation_prompt else ""),
        f"  content format:           {report.content_format}",
    ]
    failed = [p for p in report.probes if not p.ok]
    if failed:
        lines.append(f"  probes that fail:         {', '.join(p.name for p in failed)}")
    if report.span_tracking_exact is False:
        lines.append("  ! span markers change this template's output; spans from render() are unreliable")
    return "\n".join(lines)
