"""Add ``{% generation %}`` blocks to a template, found from its structure, proven by rendering.

1. Render the probe set with the original and work out, per assistant turn,
   which characters the model generates (``probes.py``, ``analysis.py``).
2. Render it again with every top-level output unit reporting what it wrote
   (``trace.py``), and decide per unit what to wrap (``plan.py``); a unit
   whose span starts at different places in different turns gets a test that
   tells them apart (``prompt_split.py``), or, if that fails verification, the
   earliest start everywhere.
3. Group the wrapped units into runs of siblings and insert one block per run
   (``edits.py`` picks each inserted tag's whitespace signs).
4. Render the patched text on every probe: it must give exactly the original
   text, its blocks must cover every expected assistant span and nothing
   outside assistant turns. Otherwise ``Unpatchable`` is raised and no text is
   returned.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jinja2 import nodes

from whileai_datasets.chat_template.analysis.analysis import Analysis, ProbeResult, analyse
from whileai_datasets.chat_template.analysis.classifier import refuse_classifier
from whileai_datasets.chat_template.analysis.probes import ProbeRun, common_prefix
from whileai_datasets.chat_template.analysis.trace import TracedTemplate, Unit
from whileai_datasets.chat_template.analysis.unpatchable import (
    EmptyContentVerification,
    MixedHeader,
    MixedOperands,
    NotAChat,
    NoTopLevelOutput,
    TraceChanged,
    Unpatchable,
    VerificationFailed,
)
from whileai_datasets.chat_template.patching.accumulated import print_accumulated
from whileai_datasets.chat_template.patching.edits import (
    Composer,
    Edit,
    Part,
    Raw,
    Tag,
    Var,
)
from whileai_datasets.chat_template.patching.plan import (
    Item,
    Observation,
    Plan,
    Run,
    decide,
    group_runs,
    observe,
)
from whileai_datasets.chat_template.patching.plan import _message_loop_var as message_loop_var
from whileai_datasets.chat_template.patching.prompt_split import (
    raise_late_required,
    resolve,
    segment,
    with_late_start,
)
from whileai_datasets.chat_template.patching.repair import (
    inline_macro_call,
    sink_into_previous_if,
    split_assigned_output,
    split_prompt_prefix,
)
from whileai_datasets.chat_template.rendering.spans import RenderedChat
from whileai_datasets.chat_template.sandbox.source import SourceMap, Tok, data_token
from whileai_datasets.errors import TemplateError

_BEGINS = ("block_begin", "variable_begin", "comment_begin", "raw_begin")
MAX_REPAIRS = 4
MAX_ATTEMPTS = 12
_HINT = "Add the {% generation %} tags by hand, or report the template so the patcher can learn its shape."


# ---------------------------------------------------------------- planning


@dataclass
class Observed:
    """Every probe traced: each unit's observations, the message loops, text a span may leave out."""

    traced: TracedTemplate
    observations: dict[int, list[Observation]]
    message_loops: set[int]
    dropped: dict[str, list[tuple[int, int]]]


def observe_probes(traced: TracedTemplate, analysis: Analysis) -> Observed:
    """Trace every rendered probe and classify each unit's executions."""
    observations: dict[int, list[Observation]] = defaultdict(list)
    message_loops: set[int] = set()
    dropped: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for result in analysis.ok:
        run = result.run
        trace = traced.run(run.probe.messages, run.probe.tools, run.probe.add_generation_prompt,
                           dict(analysis.kwargs))
        if trace.text != run.text:
            raise TraceChanged(f"tracing the template changed its output on probe {run.probe.name!r}",
                              location=traced.name, hint=_HINT)
        message_loops |= trace.message_loops
        for obs in observe(traced, run, trace.executions):
            observations[obs.execution.uid].append(obs)
            if obs.dropped is not None:
                dropped[run.probe.name].append(obs.dropped)
    return Observed(traced, dict(observations), message_loops, dict(dropped))


def build_plan(observed: Observed, exact_starts: bool = True, allow_late: bool = True) -> Plan:
    """Decide what each unit needs; with ``exact_starts``, starts that differ by turn get a prompt test."""
    traced, observations = observed.traced, observed.observations
    decisions = {}
    for unit in traced.units:
        loop_var = message_loop_var(unit, traced, observed.message_loops)
        decision = decide(unit, observations.get(unit.uid, []), loop_var, allow_late)
        if decision is not None:
            if not exact_starts and decision.late_required:
                raise_late_required(decision)
            late = with_late_start(decision, observations.get(unit.uid, [])) if exact_starts else decision
            decisions[unit.uid] = late
    decisions = resolve(decisions, traced, observed.message_loops)
    units_under: dict[int, list[Unit]] = defaultdict(list)
    for unit in traced.units:
        for ancestor in unit.ancestors:
            units_under[id(ancestor)].append(unit)
    written = {uid for uid, obs in observations.items() if obs}
    return Plan(decisions, {id(u.node): u for u in traced.units}, dict(units_under), written, observed.dropped)


# ---------------------------------------------------------------- editing


def _bounds(item: Item, source: SourceMap) -> tuple[Tok, Tok]:
    found = source.tag_range(item.node)
    if found is None:
        raise Unpatchable("could not find this statement's tags in the template text",
                          location=f"{source.name}:{item.node.lineno}", hint=_HINT)
    return found


def _run_range(run: Run, source: SourceMap) -> tuple[int, int]:
    first, _ = _bounds(run.items[0], source)
    _, last = _bounds(run.items[-1], source)
    if last.kind != "data":
        return first.start, last.core_end
    following = source.next_token(last)
    end = following.start if following is not None and following.type in _BEGINS else last.end
    return first.start, end


def _split_variable(item: Item, source: SourceMap) -> list[Part]:
    assert item.unit is not None and item.decision is not None
    unit, decision = item.unit, item.decision
    first, last = _bounds(item, source)
    late = decision.late or decision.start
    bounds = [(0, 0), decision.start, late, decision.end, (unit.n_pieces, 0)]
    head, shared, rest, tail = (segment(unit, source, bounds[n], bounds[n + 1]) for n in range(4))
    test, parts = decision.prompt_test, list[Part]()
    if head is not None:
        parts.append(Var(head, "", ""))
    if shared is not None:  # written before the block where the prompt supplies it, inside it elsewhere
        parts += [Tag(f"if {test}"), Var(shared, "", ""), Tag("endif")]
    if decision.opens:
        parts.append(Tag("generation"))
    if shared is not None:
        parts += [Tag(f"if not ({test})"), Var(shared, "", ""), Tag("endif")]
    if rest is not None:
        parts.append(Var(rest, "", ""))
    if decision.closes:
        parts.append(Tag("endgeneration"))
    if tail is not None:
        parts.append(Var(tail, "", ""))
    variables = [i for i, p in enumerate(parts) if isinstance(p, Var)]
    if variables:
        head_at, tail_at = variables[0], variables[-1]
        parts[head_at] = Var(parts[head_at].expr, first.mod, parts[head_at].right)  # type: ignore[union-attr]
        parts[tail_at] = Var(parts[tail_at].expr, parts[tail_at].left, last.mod)  # type: ignore[union-attr]
    return parts


def _split_data(item: Item, source: SourceMap) -> list[Part]:
    assert item.decision is not None and isinstance(item.node, nodes.TemplateData)
    tok, decision = data_token(item.node), item.decision
    data = str(item.node.data)
    if tok is None or source.text[tok.start : tok.start + len(data)] != data:
        raise Unpatchable("text data could not be located exactly in the template",
                          location=f"{source.name}:{item.node.lineno}", hint=_HINT)
    at = [tok.start + (c[1] if c[0] == 0 else len(data)) for c in (decision.start, decision.end)]
    parts: list[Part] = [Raw(tok.start, at[0])]
    if decision.opens:
        parts.append(Tag("generation"))
    parts.append(Raw(at[0], at[1]))
    if decision.closes:
        parts.append(Tag("endgeneration"))
    parts.append(Raw(at[1], tok.end))
    return parts


def run_edit(run: Run, source: SourceMap) -> Edit:
    """The edit that puts one run of items into a generation block."""
    start, end = _run_range(run, source)
    first, last = run.items[0], run.items[-1]
    opens_inside = first.kind == "split" and first.decision is not None and first.decision.opens
    closes_inside = last.kind == "split" and last.decision is not None and last.decision.closes
    patched: list[Part] = [] if opens_inside else [Tag("generation")]
    position = start
    for item in run.items:
        if item.kind != "split":
            continue
        begin_tok, end_tok = _bounds(item, source)
        is_data = item.unit is not None and item.unit.is_data
        split = _split_data(item, source) if is_data else _split_variable(item, source)
        patched += [Raw(position, begin_tok.start), *split]
        position = end_tok.end if is_data else end_tok.core_end
    patched.append(Raw(position, end))
    if not closes_inside:
        patched.append(Tag("endgeneration"))
    if run.condition is None:
        return Edit(start, end, tuple(patched))
    return Edit(start, end, (Tag(f"if {run.condition}"), *patched, Tag("else"), Raw(start, end), Tag("endif")))


# ---------------------------------------------------------------- verifying


def _covered(text: str, rendered: RenderedChat) -> bytearray:
    covered = bytearray(len(text))
    for start, end in rendered.generation_spans:
        covered[start:end] = b"\x01" * (end - start)
    return covered


def has_output(message: Mapping[str, Any]) -> bool:
    """Whether an assistant message has anything for the model to write: content, reasoning or a tool call."""
    return bool(message.get("content") or message.get("tool_calls")
                or any(message.get(key) for key in ("reasoning_content", "thinking", "reasoning")))


def span_problems(run: ProbeRun, rendered: RenderedChat, excused: list[tuple[int, int]] | None = None) -> list[str]:
    """What is wrong with the generation spans of one render, against the expectations.

    ``excused`` ranges of expected text may stay uncovered (see ``plan._cuts``). An empty assistant
    message needs no block of its own: its expected span is checked like any other, and is empty where the
    original writes no assistant text for it (no end-of-turn marker after the last turn); block text
    outside the expected spans is still stray.
    """
    text, problems = rendered.text, []
    covered = _covered(text, rendered)
    for start, end in excused or []:
        covered[start:end] = b"\x02" * (end - start)
    for turn in run.turns:
        a, e = turn.must
        missing = [i for i in range(a, e) if not covered[i]]
        if missing:
            snippet = text[missing[0] : missing[-1] + 1]
            problems.append(f"probe {run.probe.name!r}: assistant message {turn.message} is not covered "
                            f"({snippet[:60]!r})")
    for k, message in enumerate(run.probe.messages):
        start, end = rendered.message_spans[k] if k < len(rendered.message_spans) else (0, 0)
        if not has_output(message):
            continue  # nothing of its own to write: its expected span (checked above) may be empty or elsewhere
        if message.get("role") == "assistant" and end > start and not any(covered[start:end]):
            problems.append(f"probe {run.probe.name!r}: assistant message {k} has no generation span "
                            f"({text[start:end][:60]!r})")
    allowed = bytearray(len(text))
    for turn in run.turns:
        for start, end in turn.allowed:
            allowed[start:end] = b"\x01" * (end - start)
    stray = [i for i in range(len(text)) if covered[i] == 1 and not allowed[i]]
    if stray:
        line = next((b.line for b in rendered.generation_blocks if b.start <= stray[0] < b.end), 0)
        problems.append(f"probe {run.probe.name!r}: the generation block at line {line} covers "
                        f"{text[stray[0]:stray[-1] + 1][:60]!r}, which is not assistant output")
    return problems


def _verify_probe(result: ProbeResult, analysis: Analysis, patched: str,
                  excused: list[tuple[int, int]]) -> list[str]:
    probe = result.run.probe
    try:
        rendered = analysis.tracked(probe, patched)
    except TemplateError as err:
        return [] if result.rendered is None else [f"probe {probe.name!r}: the patched template fails ({err})"]
    if result.rendered is None:
        return [f"probe {probe.name!r}: the original fails but the patched template renders"]
    if rendered.text != result.rendered.text:
        at = common_prefix(rendered.text, result.rendered.text)
        return [(f"probe {probe.name!r}: the patched template renders differently from character {at} "
                 f"({result.rendered.text[at:at + 40]!r} became {rendered.text[at:at + 40]!r})")]
    # a probe whose tool calls the template ignores must render the same text, but its spans are not judged
    return span_problems(result.run, rendered, excused) if result.meaningful else []


def verify(patched: str, analysis: Analysis, excused: dict[str, list[tuple[int, int]]] | None = None) -> None:
    """Raise Unpatchable unless ``patched`` renders like the original with correct spans."""
    excused = excused or {}
    problems = [p for result in analysis.results
                for p in _verify_probe(result, analysis, patched, excused.get(result.run.probe.name, []))]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        failure = EmptyContentVerification if _on_empty_content(problems, analysis) else VerificationFailed
        raise failure(f"the patched template failed verification: {problems[0]}{more}",
                      location=analysis.name, hint=_HINT)


def _on_empty_content(problems: list[str], analysis: Analysis) -> bool:
    """Whether the first failing probe has an assistant message with empty content."""
    probe = next((r.run.probe for r in analysis.results if f"probe {r.run.probe.name!r}" in problems[0]), None)
    return probe is not None and any(m.get("role") == "assistant" and not m.get("content") for m in probe.messages)


# ---------------------------------------------------------------- entry point


def require_assistant_turns(analysis: Analysis) -> None:
    """Raise unless some probe renders an assistant turn with text to learn."""
    if not analysis.ok:
        first = next((r.run.error for r in analysis.results if r.run.error), "")
        raise NotAChat(f"the template fails on every probe conversation: {first}",
                          location=analysis.name, hint="Check that it is a chat template for this message shape.")
    if not any(t.must[1] > t.must[0] for r in analysis.ok for t in r.run.turns):
        raise NotAChat("no probe conversation renders an assistant turn whose output could be located",
                          location=analysis.name, hint=_HINT)


def _compose(observed: Observed, analysis: Analysis, exact_starts: bool, allow_late: bool) -> tuple[str, Plan]:
    plan = build_plan(observed, exact_starts, allow_late)
    if not plan.decisions:
        raise NoTopLevelOutput("no top-level output writes the assistant text (it may be built inside a macro "
                          "or a {% set %} block whose result is printed together with other text)",
                          location=analysis.name, hint=_HINT)
    source = observed.traced.source
    runs = group_runs(source.ast.body, plan)
    return Composer(source).apply([run_edit(run, source) for run in runs]), plan


def _patch_once(text: str, analysis: Analysis, allow_late: bool = True) -> str:
    observed = observe_probes(TracedTemplate(text, analysis.name), analysis)
    patched, plan = _compose(observed, analysis, True, allow_late)
    try:
        verify(patched, analysis, plan.dropped)
    except Unpatchable:
        if not any(d.late is not None for d in plan.decisions.values()):
            raise
        patched, plan = _compose(observed, analysis, False, allow_late)  # the earliest cut everywhere
        verify(patched, analysis, plan.dropped)
    return patched


def add_generation(text: str, kwargs: Mapping[str, Any] | None = None, name: str = "<template>",
                   analysis: Analysis | None = None) -> str:
    """``text`` with generation blocks around assistant output, verified on the probe set.

    Raises:
        Unpatchable: the structure does not allow a safe patch; the message says why and where
            (``ClassifierTemplate`` for a guard/classifier template, which is not for chat training).
    """
    analysis = analysis or analyse(text, kwargs, name)
    refuse_classifier(analysis)
    require_assistant_turns(analysis)
    return _Search(analysis, name).patch(analysis.text, 0)


def _rewrites(current: str, err: MixedHeader | MixedOperands, analysis: Analysis, name: str) -> Iterator[str]:
    """The output-preserving rewrites that may give the refused unit a shape the patcher can wrap, in the
    order they are tried (each computed only when the ones before it led nowhere)."""
    if isinstance(err, MixedHeader):
        yield from (r for r in (split_assigned_output(current, err.unit_start, name),) if r is not None)
        yield from (r for r in (inline_macro_call(current, err.unit_start, name),) if r is not None)
        yield from (r for r in (sink_into_previous_if(current, err.unit_start, name),) if r is not None)
    yield from (r for r in (print_accumulated(current, err.unit_start, name),) if r is not None)
    header = isinstance(err, MixedHeader) and err.past_first_operand
    repaired = split_prompt_prefix(current, err.unit_start, err.prefixes, analysis.generation_prompt, name, header)
    if repaired is not None:
        yield repaired


class _Search:
    """Patch a template, trying rewrites where a unit mixes a header with assistant text.

    A rewrite that leads nowhere (the next refusal has no rewrite that works, or tracing the rewritten text
    changes the output) is dropped and the next one is tried; where none works, a unit that mixes a header
    with the text is written under a prompt test (``allow_late``) on the text before the rewrites. At most
    ``MAX_ATTEMPTS`` patches are tried in all, and at most ``MAX_REPAIRS`` rewrites are stacked."""

    def __init__(self, analysis: Analysis, name: str) -> None:
        self.analysis, self.name, self.attempts = analysis, name, 0

    def _once(self, text: str, allow_late: bool) -> str:
        self.attempts += 1
        return _patch_once(text, self.analysis, allow_late)

    def patch(self, current: str, depth: int) -> str:
        try:
            return self._once(current, allow_late=False)
        except (MixedHeader, MixedOperands) as err:
            if depth < MAX_REPAIRS:
                for repaired in _rewrites(current, err, self.analysis, self.name):
                    if self.attempts >= MAX_ATTEMPTS:
                        break
                    try:
                        return self.patch(repaired, depth + 1)
                    except Unpatchable:
                        continue
            if isinstance(err, MixedOperands):
                raise
            return self._once(current, allow_late=True)  # the header under a prompt test where one applies
