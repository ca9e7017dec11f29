"""Spans that start at a different place in a unit depending on the turn.

A span starts where the generation prompt ends. The same output can write text
that the prompt supplies in one turn and that the model writes in another:
qwen2.5's ``'\\n<tool_call>...'`` opens a tool-call-only turn, whose ``\\n`` the
prompt ``<|im_start|>assistant\\n`` supplies, but it follows the content (or
an earlier call) in other turns, where the model writes that ``\\n``. No static
cut serves both, so the text ``M`` between the two cuts is written twice, under
a test ``P`` that holds where the prompt supplies it::

    {% if P %}{{ M }}{% endif %}{% generation %}{% if not P %}{{ M }}{% endif %}{{ rest }}

``P`` holds when nothing before ``M`` in the turn is the model's: no earlier
pass of ``M``'s own loop (``loop.first``), none of the generating outputs that
precede it in the message's loop body ran (the tests that guard them are
false) and, when ``M`` is not all constant text, ``M`` renders as it does where
the prompt supplies it. Where ``P`` cannot be written, the unit keeps the
earliest cut (the extra text is then covered in the turns whose prompt has it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from itertools import pairwise

from jinja2 import nodes

from whileai_datasets.chat_template.analysis.trace import TracedTemplate, Unit
from whileai_datasets.chat_template.analysis.unpatchable import MixedHeader
from whileai_datasets.chat_template.patching.edits import literal
from whileai_datasets.chat_template.patching.plan import Cut, Decision, Observation, offset_of
from whileai_datasets.chat_template.sandbox.environment import statement_lists
from whileai_datasets.chat_template.sandbox.source import SourceMap, Tok


class _Inexpressible(Exception):
    """The turns cannot be told apart by a test written at the unit."""


def with_late_start(decision: Decision, observations: list[Observation]) -> Decision:
    """``decision`` with ``late`` set when its executions start their spans at two different cuts."""
    gens = [o for o in observations if o.cut is not None]
    starts = sorted({o.cut[0] for o in gens if o.cut is not None})
    unit = decision.unit
    if len(starts) != 2 or unit.is_data or not unit.pieces or not starts[1] < decision.end:
        return decision
    late = starts[1]
    texts = {o.text[o.execution.start + offset_of(decision.start, o.lengths):
                    o.execution.start + offset_of(late, o.lengths)]
             for o in gens if o.cut is not None and o.cut[0] == late}
    return replace(decision, late=late, late_text=texts.pop() if len(texts) == 1 else None)


def resolve(decisions: dict[int, Decision], traced: TracedTemplate, message_loops: set[int]) -> dict[int, Decision]:
    """Give each late-start decision its prompt test, or drop the late start when none can be written."""
    loop_ids = {id(traced.loops[uid]) for uid in message_loops if uid in traced.loops}
    out = {}
    for uid, decision in decisions.items():
        if decision.late is not None:
            try:
                test = _prompt_test(decision, decisions.values(), traced.source, loop_ids)
                decision = replace(decision, prompt_test=test)
            except _Inexpressible:
                if decision.late_required:
                    raise_late_required(decision)
                decision = replace(decision, late=None, late_text=None)
        out[uid] = decision
    return out


def raise_late_required(decision: Decision) -> None:
    """Refuse a unit whose span starts later in some turns when no test tells those turns apart."""
    err = MixedHeader(
        "the output at this line writes the role header in some assistant turns (where the generation prompt "
        "supplies it) and generated text in others, and no test at this line tells those turns apart",
        location=decision.unit.location,
        hint="Write the role header in its own {{ }} tag, then patch again.")
    err.unit_start = decision.unit.start
    err.prefixes = decision.prefixes
    err.past_first_operand = decision.start[0] > 0
    raise err


def segment(unit: Unit, source: SourceMap, begin: Cut, end: Cut) -> str | None:
    """A Jinja expression for the operands of ``unit`` between two cuts (None if empty)."""
    if begin >= end or not unit.pieces:
        return None
    pieces = unit.pieces
    (i, j), (k, offset) = begin, end
    if i == k:
        return literal((pieces[i].const or "")[j:offset])
    parts = []
    first_full = i
    if j > 0:
        parts.append(literal((pieces[i].const or "")[j:]))
        first_full = i + 1
    if first_full <= k - 1:
        parts.append(source.text[pieces[first_full].start : pieces[k - 1].end].strip())
    if offset > 0:
        parts.append(literal((pieces[k].const or "")[:offset]))
    joiner = " ~ " if isinstance(unit.node, nodes.Concat) else " + "
    return joiner.join(parts)


# ---------------------------------------------------------------- the test


def _prompt_test(decision: Decision, decisions: Iterable[Decision], source: SourceMap, loop_ids: set[int]) -> str:
    unit = decision.unit
    inner = _inner_loops(unit, loop_ids)
    if len(inner) > 1:
        raise _Inexpressible
    atoms = ["loop.first"] if inner else []
    decisions = list(decisions)
    for other in decisions:
        if other.unit is not unit:
            try:
                guard = _ran_before(other, unit, source, loop_ids)
            except _Inexpressible:
                guard = _branch_ran(other, unit, decisions, source)
            if guard is not None:
                atoms.append(f"not {_group(guard)}")
    assert decision.late is not None and unit.pieces is not None
    (i, _), (k, offset) = decision.start, decision.late
    if any(p.const is None for p in unit.pieces[i : k + (offset > 0)]):
        if decision.late_text is None:
            raise _Inexpressible
        atoms.append(f"{_group(segment(unit, source, decision.start, decision.late) or '')} == "
                     f"{literal(decision.late_text)}")
    if not atoms:
        raise _Inexpressible
    return " and ".join(dict.fromkeys(atoms))


def _group(expr: str) -> str:
    """``expr`` in parentheses unless it is a plain name or attribute."""
    return expr if all(ch.isalnum() or ch in "._" for ch in expr) else f"({expr})"


def _inner_loops(unit: Unit, loop_ids: set[int]) -> list[nodes.For]:
    """The loops around ``unit`` inside its message loop (raises when it is in none)."""
    index = max((n for n, loop in enumerate(unit.loops) if id(loop) in loop_ids), default=-1)
    if index < 0:
        raise _Inexpressible
    return unit.loops[index + 1 :]


def _ran_before(other: Decision, unit: Unit, source: SourceMap, loop_ids: set[int]) -> str | None:
    """When ``other`` wrote generated text before ``unit`` in the same turn (None: it never does)."""
    if other.unit.start >= unit.start or not any(id(loop) in loop_ids for loop in other.unit.loops):
        return None  # later in the body (an earlier pass of a shared loop is `loop.first`'s), or outside
    mine, theirs = unit.ancestors, other.unit.ancestors
    common = 0
    while common < min(len(mine), len(theirs)) and mine[common] is theirs[common]:
        common += 1
    path = [*theirs[common:], other.unit.statement]
    if common and _branch(mine[common - 1], [*mine[common:], unit.statement][0]) != _branch(
            mine[common - 1], path[0]):
        return None  # the other branch of an if both sit in: never in the same pass
    tests = [_branch_test(node, child, source) for node, child in pairwise(path)]
    if tests:
        return " and ".join(_group(t) for t in tests)
    return _generated_expression(other, source)


def _always_writes(decision: Decision) -> bool:
    """Whether the decision's unit writes generated constant text whenever it runs."""
    pieces, (i, _), (k, offset) = decision.unit.pieces, decision.start, decision.end
    return (decision.condition is None and bool(pieces) and not decision.unit.is_data
            and any(p.const for p in (pieces or [])[i : k + (offset > 0)]))


def _branch_ran(other: Decision, unit: Unit, decisions: list[Decision], source: SourceMap) -> str:
    """For an ``other`` whose own test is inexpressible (it sits in a loop): the test of an if branch around
    it that also holds, unconditionally, an output writing generated text before ``unit``; that branch ran
    exactly when generated text was written there (DeepSeek's tool calls, then their closing marker)."""
    theirs = other.unit.ancestors
    for depth in range(len(theirs) - 1, -1, -1):
        node = theirs[depth]
        if not isinstance(node, nodes.If) or any(a is node for a in unit.ancestors):
            continue
        child = theirs[depth + 1] if depth + 1 < len(theirs) else other.unit.statement
        body = next((b for b in statement_lists(node) if any(s is child for s in b)), None)
        if body is None:
            continue
        if any(d.unit is not other.unit and d.unit.start < unit.start and _always_writes(d)
               and any(s is d.unit.statement for s in body) and d.unit.ancestors[: depth + 1] == theirs[: depth + 1]
               and len(d.unit.ancestors) == depth + 1 for d in decisions):
            path = [*theirs[: depth + 1], child]
            start = next(n for n in range(len(path)) if not any(a is path[n] for a in unit.ancestors))
            tests = [_branch_test(n, c, source) for n, c in pairwise(path[start:])]
            if tests:
                return " and ".join(_group(t) for t in tests)
    raise _Inexpressible


def _branch(node: nodes.Node, child: nodes.Node) -> int:
    return next((n for n, body in enumerate(statement_lists(node)) if any(s is child for s in body)), -1)


def _branch_test(node: nodes.Node, child: nodes.Node, source: SourceMap) -> str:
    """The test under which ``node`` (an if) runs the branch that holds ``child``."""
    if not isinstance(node, nodes.If):
        raise _Inexpressible  # a loop (or anything else) between them: how often it ran is unknown
    bodies = [node.body, *(branch.body for branch in node.elif_)]
    index = next((n for n, body in enumerate(bodies) if any(s is child for s in body)), len(bodies))
    begins = [source.starts.get(id(node)), *(source.branch_ends.get(id(body)) for body in bodies[:-1])]
    tests = [_tag_expression(tok, source) if tok is not None else None for tok in begins[: index + 1]]
    if any(t is None for t in tests):
        raise _Inexpressible
    earlier = [f"not {_group(t)}" for t in tests[:index] if t is not None]
    own = [_group(tests[index] or "")] if index < len(bodies) else []
    return " and ".join([*earlier, *own])


def _tag_expression(begin: Tok, source: SourceMap) -> str | None:
    """The expression of an ``{% if x %}`` / ``{% elif x %}`` tag that starts at ``begin``."""
    tokens = [t for t in source.tokens[begin.index + 1 :] if t.type != "whitespace"]
    if len(tokens) < 2 or source.text[tokens[0].start : tokens[0].end] not in ("if", "elif"):
        return None
    end = next((t for t in tokens if t.type == "block_end"), None)
    return None if end is None else source.text[tokens[0].end : end.start].strip() or None


def _generated_expression(other: Decision, source: SourceMap) -> str:
    """The generated operands of an output that runs unconditionally (raises if any is constant)."""
    pieces = other.unit.pieces
    if not pieces or other.unit.is_data:
        raise _Inexpressible
    (i, j), (k, offset) = other.start, other.end
    chosen = pieces[i : k + (offset > 0)]
    if j or offset or any(p.const is not None for p in chosen):
        raise _Inexpressible  # constant text: it always writes something, so the unit is never first
    return source.text[chosen[0].start : chosen[-1].end].strip()
