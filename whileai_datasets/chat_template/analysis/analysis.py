"""Render the probe set with a template and work out the expected generation spans."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from jinja2 import nodes
from jinja2.exceptions import TemplateSyntaxError

from whileai_datasets.chat_template.analysis.probes import (
    PINNED_NOW,
    Probe,
    ProbeRun,
    TurnExpectation,
    expect_turn,
    foreign_spans,
    probe_set,
    with_string_arguments,
)
from whileai_datasets.chat_template.rendering.render import render_chat, render_plain
from whileai_datasets.chat_template.rendering.spans import RenderedChat
from whileai_datasets.chat_template.sandbox.environment import (
    chat_environment,
    normalize_newlines,
)
from whileai_datasets.errors import TemplateError


@dataclass
class ProbeResult:
    """A probe rendered with tracking, plus its expected assistant spans."""

    run: ProbeRun
    rendered: RenderedChat | None = None
    meaningful: bool = True  # False: the template ignores what the probe tests (its tool calls)


@dataclass
class Analysis:
    """The probe set rendered with one template."""

    text: str
    kwargs: Mapping[str, Any]
    name: str = "<template>"
    content_format: str = "string"
    generation_prompt: str | None = None
    results: list[ProbeResult] = field(default_factory=list)

    def plain(self, probe: Probe, messages: list[dict[str, Any]], agp: bool) -> str:
        return render_plain(self.text, messages, tools=probe.tools, add_generation_prompt=agp,
                            kwargs=self.kwargs, now=PINNED_NOW, name=self.name)

    def tracked(self, probe: Probe, text: str | None = None) -> RenderedChat:
        return render_chat(text if text is not None else self.text, probe.messages, tools=probe.tools,
                           add_generation_prompt=probe.add_generation_prompt, kwargs=self.kwargs,
                           now=PINNED_NOW, name=self.name)

    @property
    def ok(self) -> list[ProbeResult]:
        """The probes the template renders (``meaningful`` says which of them verification judges)."""
        return [r for r in self.results if r.rendered is not None]


def _contents_rendered(text: str, probe: Probe) -> bool:
    for message in probe.messages:
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(part.get("text", "") for part in content)
        if content and content.strip() not in text:
            return False
    return True


def choose_content_format(analysis: Analysis) -> str:
    """'string' unless the template only renders contents given as lists of text parts."""
    for fmt in ("string", "parts"):
        probe = next(p for p in probe_set(fmt) if p.name == "multi_turn")
        try:
            if _contents_rendered(analysis.tracked(probe).text, probe):
                return fmt
        except TemplateError:
            continue
    return "string"


def generation_prompt(analysis: Analysis) -> str | None:
    """What ``add_generation_prompt=True`` appends after a user message (None if not a suffix).

    Read off the lone user message first, then off the conversation that opens with a system message: a
    template that writes a default system block only when asked for a prompt (and given no system message)
    adds more than the prompt to the first, not to the second."""
    for name in ("generation_prompt", "generation_prompt_multi"):
        probe = next(p for p in probe_set(analysis.content_format) if p.name == name)
        try:
            without = analysis.plain(probe, probe.messages, False)
            with_prompt = analysis.plain(probe, probe.messages, True)
        except TemplateError:
            continue
        if with_prompt.startswith(without):
            return with_prompt[len(without):]
    return None


def _render_probe(analysis: Analysis, probe: Probe) -> ProbeResult:
    candidates = [probe]
    if any(m.get("tool_calls") for m in probe.messages):
        candidates.append(with_string_arguments(probe))
    error = ""
    for candidate in candidates:
        try:
            rendered = analysis.tracked(candidate)
        except TemplateError as err:
            error = error or str(err)
            continue
        run = ProbeRun(candidate, rendered.text, rendered.message_spans)
        return ProbeResult(run, rendered, _renders_its_tool_calls(analysis, candidate, rendered.text))
    return ProbeResult(ProbeRun(probe, error=error))


def _without_tool_calls(message: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in message.items() if key != "tool_calls"}


def _renders_its_tool_calls(analysis: Analysis, probe: Probe, text: str) -> bool:
    """False when the probe has tool calls and the template renders the same text without them.

    A template without tool support is then not judged on a tool-call probe:
    whatever it renders there is what it renders for the conversation without calls.
    """
    if not any(m.get("tool_calls") for m in probe.messages):
        return True
    bare = [_without_tool_calls(m) for m in probe.messages]
    try:
        return analysis.plain(probe, bare, probe.add_generation_prompt) != text
    except TemplateError:
        return True


def expectations(analysis: Analysis, run: ProbeRun) -> list[TurnExpectation]:
    """Expected spans of each assistant turn of a rendered probe."""
    probe = run.probe

    def render(messages: list[dict[str, Any]], agp: bool) -> str:
        return analysis.plain(probe, messages, agp)

    foreign = foreign_spans(run)
    turns = []
    for k, message in enumerate(probe.messages):
        if message.get("role") == "assistant":
            turn = expect_turn(run, k, render, analysis.generation_prompt or "", foreign, in_own_pass=True)
            if turn is not None:
                turns.append(turn)
    return turns


PLACEHOLDER_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}


def probe_kwargs(text: str, kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """``kwargs`` plus placeholder special tokens the template uses but was not given.

    A template read from a bare .jinja file has no tokenizer behind it; its
    structure does not depend on what ``bos_token`` spells, so probes use
    placeholders rather than fail on an undefined name.
    """
    given = dict(kwargs or {})
    try:
        names = {n.name for n in chat_environment().parse(normalize_newlines(text)).find_all(nodes.Name)}
    except TemplateSyntaxError:
        return given
    return {**{k: v for k, v in PLACEHOLDER_TOKENS.items() if k in names}, **given}


def analyse(text: str, kwargs: Mapping[str, Any] | None = None, name: str = "<template>") -> Analysis:
    """Render every probe with ``text`` (spans tracked) and compute expectations."""
    analysis = Analysis(text, probe_kwargs(text, kwargs), name)
    analysis.content_format = choose_content_format(analysis)
    analysis.generation_prompt = generation_prompt(analysis)
    for probe in probe_set(analysis.content_format):
        result = _render_probe(analysis, probe)
        if result.rendered is not None:
            result.run = replace(result.run, turns=expectations(analysis, result.run))
        analysis.results.append(result)
    return analysis
