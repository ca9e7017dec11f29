"""``ChatTemplate.inspect()``: what a chat template does, read from its AST and its renders.

Structural facts (generation blocks and where they are, use of
``add_generation_prompt``) come from jinja2's AST: a ``{% generation %}`` in a
comment, a ``{% raw %}`` block or a string literal is not a block, and
``{%+ generation %}`` or one inside a macro is. Behavioural facts (which roles
the blocks cover, prefix preservation, tools, system message, ``<think>`` in
history) come from rendering the probe conversations in the sandbox.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from jinja2 import nodes
from jinja2.exceptions import TemplateSyntaxError

from whileai_datasets.chat_template.analysis.analysis import Analysis, ProbeResult, analyse
from whileai_datasets.chat_template.analysis.classifier import analysis_renderer, classifier_evidence
from whileai_datasets.chat_template.analysis.probes import PINNED_NOW, common_prefix, probe_set
from whileai_datasets.chat_template.masks.dropped import REFUSED_KINDS, dropped_output
from whileai_datasets.chat_template.patching.patch import span_problems
from whileai_datasets.chat_template.rendering.render import render_plain
from whileai_datasets.chat_template.rendering.spans import RenderedChat
from whileai_datasets.chat_template.sandbox.environment import (
    chat_environment,
    generation_lines,
    is_generation_block,
    normalize_newlines,
)
from whileai_datasets.errors import TemplateError


@dataclass(frozen=True)
class GenerationBlockInfo:
    """Where a ``{% generation %}`` block is, and whether transformers measures it right."""

    line: int
    end_line: int
    in_macro: bool
    in_capture: bool

    @property
    def transformers_offsets_exact(self) -> bool:
        """False inside a macro or ``{% set %}`` capture, where transformers shifts offsets."""
        return not (self.in_macro or self.in_capture)


@dataclass(frozen=True)
class ProbeStatus:
    """Whether one probe conversation rendered."""

    name: str
    ok: bool
    error: str | None = None


@dataclass(frozen=True)
class TemplateReport:
    """Everything ``inspect()`` found; ``None`` means the probes could not tell."""

    name: str
    syntax_error: str | None = None
    syntax_error_line: int | None = None
    has_generation_block: bool = False
    generation_blocks: tuple[GenerationBlockInfo, ...] = ()
    generation_roles: tuple[str, ...] = ()
    covers_assistant_output: bool | None = None
    coverage_problems: tuple[str, ...] = ()
    end_of_turn_in_span: bool | None = None
    prefix_preserving: bool | None = None
    prefix_break: str | None = None
    supports_tools: bool | None = None
    renders_tool_calls: bool | None = None
    supports_system: bool | None = None
    think_in_history: str = "unknown"
    uses_add_generation_prompt: bool = False
    generation_prompt: str | None = None
    content_format: str = "string"
    span_tracking_exact: bool | None = None
    probes: tuple[ProbeStatus, ...] = field(default_factory=tuple)
    classifier: str | None = None  # why this is a guard/classifier template, when it is one
    mask_method: str | None = None
    mask_method_reason: str | None = None
    patch_refusal_class: str | None = None  # why ``with_generation()`` refuses, when it does
    turns_mask: bool | None = None  # then: whether tokenize masks it turn by turn instead
    tool_call_arguments: str | None = None
    #: "nine_characters": tokenize rewrites tool-call ids into the 9 characters the template requires
    tool_call_ids: str | None = None
    #: "joined": tokenize hands text-only content parts to the template as one string (it concatenates strings,
    #: or writes nothing or the list's own data for a list)
    content_parts: str | None = None
    #: what of the tool probes' assistant output the template does not render (tokenize refuses such rows)
    dropped_output: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        data = asdict(self)
        data["generation_blocks"] = [
            {**asdict(b), "transformers_offsets_exact": b.transformers_offsets_exact}
            for b in self.generation_blocks
        ]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def format(self) -> str:
        """A readable multi-line report."""
        return format_report(self)


# ---------------------------------------------------------------- structure


def _walk(node: nodes.Node, macro: bool, capture: bool) -> Iterator[GenerationBlockInfo]:
    for child in node.iter_child_nodes():
        if is_generation_block(child):
            start, end = generation_lines(child)  # type: ignore[arg-type]
            yield GenerationBlockInfo(start, end, macro, capture)
        yield from _walk(child, macro or isinstance(child, nodes.Macro),
                         capture or isinstance(child, nodes.AssignBlock))


def generation_blocks(ast: nodes.Template) -> tuple[GenerationBlockInfo, ...]:
    """Every generation block of a parsed template, in source order."""
    return tuple(sorted(_walk(ast, False, False), key=lambda b: b.line))


def _uses_name(ast: nodes.Template, name: str) -> bool:
    return any(n.name == name for n in ast.find_all(nodes.Name))


# ---------------------------------------------------------------- behaviour


def _result(analysis: Analysis, name: str) -> ProbeResult | None:
    return next((r for r in analysis.results if r.run.probe.name == name), None)


def _rendered(analysis: Analysis, name: str) -> RenderedChat | None:
    result = _result(analysis, name)
    return None if result is None else result.rendered


def _roles(analysis: Analysis) -> tuple[str, ...]:
    roles = set()
    for result in analysis.ok:
        assert result.rendered is not None
        for block in result.rendered.generation_blocks:
            if block.end > block.start and block.message is not None:
                roles.add(str(result.run.probe.messages[block.message].get("role")))
    return tuple(sorted(roles))


def _eot_in_span(analysis: Analysis) -> bool | None:
    verdicts = []
    for result in analysis.ok:
        assert result.rendered is not None
        covered: set[int] = set()
        for start, end in result.rendered.generation_spans:
            covered.update(range(start, end))
        for turn in result.run.turns:
            content = result.run.probe.messages[turn.message].get("content")
            if not isinstance(content, str) or not content.strip():
                continue
            text = result.run.text
            at = text.rfind(content.strip(), turn.must[0], turn.must[1])
            tail = range(at + len(content.strip()), turn.must[1]) if at >= 0 else range(0)
            if len(tail):
                verdicts.append(all(i in covered for i in tail))
    return all(verdicts) if verdicts else None


def _coverage(analysis: Analysis) -> tuple[bool | None, tuple[str, ...]]:
    problems = [p for r in analysis.ok for p in span_problems(r.run, r.rendered)]  # type: ignore[arg-type]
    return not problems, tuple(problems)


def _prefix_break(analysis: Analysis) -> tuple[bool | None, str | None]:
    checked = False
    for result in analysis.ok:
        probe = result.run.probe
        if probe.add_generation_prompt:
            continue
        previous = None
        for end in range(1, len(probe.messages) + 1):
            try:
                text = analysis.plain(probe, probe.messages[:end], False)
            except TemplateError:
                previous = None
                continue
            if previous is not None and not text.startswith(previous):
                at = common_prefix(previous, text)
                return False, (f"probe {probe.name!r}: adding message {end - 1} changes the rendering "
                               f"of earlier messages at character {at} ({previous[at:at + 30]!r})")
            previous, checked = text, True
    return (True, None) if checked else (None, None)


def _supports_tools(analysis: Analysis) -> bool | None:
    result = _result(analysis, "tools_no_call")
    if result is None or result.rendered is None:
        return None
    try:
        bare = render_plain(analysis.text, result.run.probe.messages, kwargs=analysis.kwargs, now=PINNED_NOW)
    except TemplateError:
        return None
    return "get_weather" in result.rendered.text and "get_weather" not in bare


def _renders_tool_calls(analysis: Analysis) -> bool | None:
    rendered = _rendered(analysis, "tool_call")
    if rendered is None:
        return None
    start, end = rendered.message_spans[1]
    region = rendered.text[start:end] if end > start else rendered.text
    return "get_weather" in region and "Paris" in region


_TOOL_PROBES = ("tool_call", "tool_call_with_content", "parallel_tool_calls")


def _dropped_output(analysis: Analysis) -> tuple[str, ...]:
    """Each tool probe's turn output (tool calls, content beside a call) that the rendering lacks."""
    out = []
    for name in _TOOL_PROBES:
        rendered = _rendered(analysis, name)
        if rendered is None:
            continue
        messages = next(r.run.probe.messages for r in analysis.ok if r.run.probe.name == name)
        flags = [int(m.get("role") == "assistant") for m in messages]
        out += [f"probe {name!r}, messages[{d.message}]: {d.describe()}"
                for d in dropped_output(rendered, messages, flags) if d.kind in REFUSED_KINDS]
    return tuple(out) + _string_content_dropped(analysis)


def _string_content_dropped(analysis: Analysis) -> tuple[str, ...]:
    """For a template that reads content as a list of parts: what it loses of content given as a string
    (idefics3 and SmolVLM render ``User: <end_of_utterance>``)."""
    if analysis.content_format != "parts":
        return ()
    probe = next(p for p in probe_set("string") if p.name == "multi_turn")
    try:
        rendered = analysis.tracked(probe)
    except TemplateError:
        return ()  # the template refuses string content itself, by name
    flags = [int(m.get("role") == "assistant") for m in probe.messages]
    return tuple(f"probe {probe.name!r} with string content, messages[{d.message}]: {d.describe()}"
                 for d in dropped_output(rendered, probe.messages, flags) if d.kind == "content")


def _supports_system(analysis: Analysis) -> bool | None:
    result = _result(analysis, "system")
    if result is None:
        return None
    return result.rendered is not None and "You are a terse assistant." in result.rendered.text


def _think_in_history(analysis: Analysis) -> str:
    rendered = _rendered(analysis, "think")
    if rendered is None:
        return "unknown"
    return "keeps" if "Add them." in rendered.text else "drops"


def _tracking_exact(analysis: Analysis) -> bool | None:
    for result in analysis.ok:
        probe = result.run.probe
        try:
            plain = render_plain(analysis.text, probe.messages, tools=probe.tools,
                                 add_generation_prompt=probe.add_generation_prompt, kwargs=analysis.kwargs,
                                 now=PINNED_NOW)
        except TemplateError:
            return None
        if result.rendered is not None and plain != result.rendered.text:
            return False
    return True if analysis.ok else None


def inspect_template(text: str, kwargs: Mapping[str, Any] | None = None, name: str = "<template>",
                     analysis: Analysis | None = None) -> TemplateReport:
    """Build the report for one template text (never raises for a broken template)."""
    try:
        ast = chat_environment().parse(normalize_newlines(text), name)
    except TemplateSyntaxError as err:
        # Jinja's own words: the messages built from the report say "syntax error" themselves
        return TemplateReport(name, syntax_error=err.message or str(err), syntax_error_line=err.lineno)
    blocks = generation_blocks(ast)
    analysis = analysis or analyse(text, kwargs, name)
    covers, problems = _coverage(analysis) if blocks else (None, ())
    preserving, prefix_break = _prefix_break(analysis)
    return TemplateReport(
        name=name,
        classifier=classifier_evidence(analysis_renderer(analysis)),
        has_generation_block=bool(blocks),
        generation_blocks=blocks,
        generation_roles=_roles(analysis),
        covers_assistant_output=covers,
        coverage_problems=problems,
        end_of_turn_in_span=_eot_in_span(analysis) if blocks else None,
        prefix_preserving=preserving,
        prefix_break=prefix_break,
        supports_tools=_supports_tools(analysis),
        renders_tool_calls=_renders_tool_calls(analysis),
        dropped_output=_dropped_output(analysis),
        supports_system=_supports_system(analysis),
        think_in_history=_think_in_history(analysis),
        uses_add_generation_prompt=_uses_name(ast, "add_generation_prompt"),
        generation_prompt=analysis.generation_prompt,
        content_format=analysis.content_format,
        span_tracking_exact=_tracking_exact(analysis),
        probes=tuple(ProbeStatus(r.run.probe.name, r.rendered is not None, r.run.error) for r in analysis.results),
    )


# --- the human-readable form (``whileai-datasets template inspect``) ------------------------------
_METHODS = {
    "template": "the template's own generation blocks",
    "patched": "generation blocks added by with_generation()",
    "turns": "per-turn rendering (no structural patch fits)",
}


def _yes_no(value: bool | None) -> str:
    return "unknown" if value is None else "yes" if value else "no"


def _no_blocks(report: TemplateReport) -> str:
    """What ``template patch`` would do with a template that has no generation block, in the words it uses."""
    if report.classifier:
        return "none; a guard/classifier template: `template patch` and tokenize both refuse it"
    if report.mask_method == "patched":
        return "none (`template patch` adds them, verified on every probe)"
    if report.patch_refusal_class:
        then = ("and tokenize masks it exactly, turn by turn" if report.turns_mask is not False else
                "and tokenize cannot mask it turn by turn either (the reason below)")
        return f"none; `template patch` refuses this template [refusal class: {report.patch_refusal_class}], {then}"
    if report.mask_method == "turns":
        return "none; tokenize masks it exactly, turn by turn (`template patch` is not tried: see below)"
    return "none (run `template patch` to add them)"


def _block_lines(report: TemplateReport) -> list[str]:
    if not report.generation_blocks:
        return [f"  generation blocks:        {_no_blocks(report)}"]
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
    if report.classifier:
        lines.append(f"  ! not a chat-training template: a guard/classifier template ({report.classifier})")
    lines += [
        f"  prefix-preserving:        {_yes_no(report.prefix_preserving)}",
        *([f"    ! {report.prefix_break}"] if report.prefix_break else []),
        f"  tool definitions:         {_yes_no(report.supports_tools)}",
        f"  tool calls rendered:      {_yes_no(report.renders_tool_calls)}",
        *([f"    ! {d}: tokenize refuses such rows (the turn would train its end marker alone)"
           for d in report.dropped_output[:3]]),
        f"  system message:           {_yes_no(report.supports_system)}",
        f"  <think> in history:       {report.think_in_history}",
        f"  add_generation_prompt:    {'used' if report.uses_add_generation_prompt else 'not used'}"
        + (f" (appends {report.generation_prompt!r})" if report.generation_prompt else ""),
        f"  content format:           {report.content_format}",
        f"  tool-call arguments:      {report.tool_call_arguments or 'unknown'}",
        *(["  tool-call ids:            rewritten to the 9 characters the template requires (lossless; the "
           "rewritten ids are trained)"] if report.tool_call_ids == "nine_characters" else []),
        *(["  text content parts:       joined into one string (the template concatenates strings, or writes "
           "nothing or the list's data for a list; lossless: the same text is trained)"]
          if report.content_parts == "joined" else []),
        f"  token masks by:           "
        + ("none (a classifier template)" if report.classifier else _METHODS.get(report.mask_method or "", "unknown")),
        *([f"    ({report.mask_method_reason})"] if report.mask_method_reason else []),
    ]
    failed = [p for p in report.probes if not p.ok]
    if failed:
        lines.append(f"  probes that fail:         {len(failed)}")
        lines += [f"    - {p.name}: {p.error or 'no reason recorded'}" for p in failed]
    if report.span_tracking_exact is False:
        lines.append("  ! span markers change this template's output; spans from render() are unreliable")
    return "\n".join(lines)
