"""Decide, unit by unit, what a generation patch wraps (the evidence comes from trace.py).

Each unit gets one decision valid for all its executions: leave it, wrap it
whole, or wrap part of it (a split between the operands of a ``+``/``~``
chain, or inside a constant). When the same unit also writes other roles'
text, the patched unit goes under ``{% if <message>.role == 'assistant' %}``
with the original in the else branch (or a condition on the last message for
units after the message loop). Units, and statements whose units are all
wrapped, are then grouped into runs of siblings that share one block.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from jinja2 import nodes

from whileai_datasets.chat_template.analysis.probes import ProbeRun
from whileai_datasets.chat_template.analysis.trace import Execution, TracedTemplate, Unit
from whileai_datasets.chat_template.analysis.unpatchable import (
    MixedHeader,
    MixedOperands,
    SharedOutput,
)
from whileai_datasets.chat_template.sandbox.environment import statement_lists

Cut = tuple[int, int]  # (operand index, characters into it); (n, 0) is the end


@dataclass(frozen=True)
class Observation:
    """One execution of a unit, seen against one probe's expected spans."""

    execution: Execution
    lengths: tuple[int, ...]
    cut: tuple[Cut, Cut] | None
    owner_role: str | None
    last_role: str | None
    allowed: bool
    probe: str
    allowed_spans: tuple[tuple[int, int], ...]
    text: str
    dropped: tuple[int, int] | None = None
    heads_turn: bool = False  # ends where its message's generated span starts: it wrote the turn's header
    generated_from: int | None = None  # where the generated text starts in this execution (absolute)


@dataclass(frozen=True)
class Decision:
    """What to wrap in a unit: from ``start`` to ``end``, under ``condition`` if set."""

    unit: Unit
    start: Cut
    end: Cut
    condition: str | None
    late: Cut | None = None  # the start in turns whose prompt supplies start..late (prompt_split.py)
    late_text: str | None = None  # what start..late writes in those turns
    prompt_test: str | None = None  # the Jinja test that tells those turns apart
    late_required: bool = False  # the earliest start everywhere would cover a role header
    #: what the unit writes before the generated text where it writes some, and all it writes where it heads
    #: a turn (a refusal hands these to ``repair.split_prompt_prefix``)
    prefixes: frozenset[str] = frozenset()

    @property
    def opens(self) -> bool:
        """The block starts inside the unit (header text before it)."""
        return self.start != (0, 0) or self.late is not None

    @property
    def closes(self) -> bool:
        """The block ends inside the unit (other text after it)."""
        return self.end != (self.unit.n_pieces, 0)

    @property
    def full(self) -> bool:
        return not (self.opens or self.closes)


# ---------------------------------------------------------------- observing


def _to_cut(offset: int, lengths: tuple[int, ...], consts: Sequence[str | None], down: bool) -> Cut:
    acc = 0
    for index, length in enumerate(lengths):
        if offset == acc:
            return (index, 0)
        if offset < acc + length:
            if consts[index] is not None:
                return (index, offset - acc)
            return (index, 0) if down else (index + 1, 0)
        acc += length
    return (len(lengths), 0)


def offset_of(cut: Cut, lengths: tuple[int, ...]) -> int:
    return sum(lengths[: cut[0]]) + cut[1]


def _lengths(unit: Unit, execution: Execution) -> tuple[tuple[int, ...], list[str | None]] | None:
    if unit.pieces and execution.lengths and len(execution.lengths) == len(unit.pieces):
        return execution.lengths, [p.const for p in unit.pieces]
    if unit.n_pieces == 1:
        const = unit.pieces[0].const if unit.pieces else None
        return (execution.end - execution.start,), [const]
    return None


def _inside(start: int, end: int, spans: tuple[tuple[int, int], ...]) -> bool:
    return any(a <= start and end <= b for a, b in spans)


def _cuts(
    execution: Execution,
    lengths: tuple[int, ...],
    consts: Sequence[str | None],
    gen: tuple[int, int],
    spans: tuple[tuple[tuple[int, int], ...], list[tuple[int, int]]],
) -> tuple[tuple[Cut, Cut] | None, tuple[int, int] | None]:
    """Static cuts for the generated part ``gen`` of one execution, and any must-text left out.

    The end goes to the end of its operand (``<|end|>``, not ``<|``) when that
    stays inside the turn, else into a constant, else, when the operand also
    writes another message's text (gemma's ``<|tool_response>`` glued to the
    tool result), to the operand's start: that trailing marker is left out.
    """
    allowed, musts = spans
    base, whole = execution.start, [None] * len(lengths)  # whole: treat every operand as unsplittable
    start = _to_cut(gen[0], lengths, consts, True)
    dropped = None
    end = _to_cut(gen[1], lengths, whole, False)
    if not _inside(base + gen[0], base + offset_of(end, lengths), allowed):
        end = _to_cut(gen[1], lengths, consts, False)
        at_turn_end = any(base + gen[1] == e for _, e in musts)
        if not _inside(base + gen[0], base + offset_of(end, lengths), allowed) and at_turn_end:
            end = _to_cut(gen[1], lengths, whole, True)
            dropped = (base + offset_of(end, lengths), base + gen[1])
    return ((start, end) if end > start else None), dropped


def observe(traced: TracedTemplate, run: ProbeRun, executions: list[Execution]) -> list[Observation]:
    """Classify each non-empty execution of a probe against its expected spans."""
    musts = [t.must for t in run.turns if t.must[1] > t.must[0]]
    allowed = tuple(span for t in run.turns for span in t.allowed)
    roles = [m.get("role") for m in run.probe.messages]
    last_role = None if run.probe.add_generation_prompt or not roles else roles[-1]
    out = []
    for execution in executions:
        if execution.end <= execution.start:
            continue
        unit = traced.units[execution.uid]
        shape = _lengths(unit, execution)
        overlaps = [(max(a, execution.start), min(e, execution.end)) for a, e in musts
                    if a < execution.end and e > execution.start]
        cut, dropped, begins = None, None, None
        lengths = shape[0] if shape else (execution.end - execution.start,)
        if overlaps:
            g0 = min(a for a, _ in overlaps) - execution.start
            begins = execution.start + g0
            if shape is None:
                err = MixedOperands(
                    "an output mixes assistant text with other text and its operands are not all strings",
                    location=unit.location,
                    hint="Write the header and the content in separate {{ }} tags.")
                err.unit_start, err.prefixes = unit.start, frozenset({run.text[execution.start : begins]})
                raise err
            g1 = max(e for _, e in overlaps) - execution.start
            cut, dropped = _cuts(execution, lengths, shape[1], (g0, g1), (allowed, musts))
        owner = None if execution.owner is None else roles[execution.owner]
        fits = cut is None and dropped is not None or _inside(execution.start, execution.end, allowed)
        heads = any(t.must[0] == execution.end and t.message == execution.owner for t in run.turns)
        out.append(Observation(execution, lengths, cut, owner, last_role, fits, run.probe.name,
                               allowed, run.text, dropped, heads, begins))
    return out


# ---------------------------------------------------------------- deciding


def _message_loop_var(unit: Unit, traced: TracedTemplate, message_loops: set[int]) -> str | None:
    ids = {id(node): uid for uid, node in traced.loops.items()}
    for loop in reversed(unit.loops):
        if ids.get(id(loop)) in message_loops and isinstance(loop.target, nodes.Name):
            return str(loop.target.name)
    return None


def _condition(gens: list[Observation], others: list[Observation], loop_var: str | None) -> str | None:
    if loop_var and all(o.owner_role == "assistant" for o in gens) and all(
            o.owner_role != "assistant" for o in others):
        return f"{loop_var}.role == 'assistant'"
    if all(o.last_role == "assistant" for o in gens) and all(o.last_role != "assistant" for o in others):
        return "messages and messages[-1].role == 'assistant'"
    return None


def _covered_range(decision: Decision, obs: Observation) -> tuple[int, int] | None:
    """What the decision would wrap in this execution (None: cannot tell)."""
    if len(obs.lengths) != decision.unit.n_pieces:
        if not decision.full:
            return None
        return obs.execution.start, obs.execution.end
    return (obs.execution.start + offset_of(decision.start, obs.lengths),
            obs.execution.start + offset_of(decision.end, obs.lengths))


def _harmless(decision: Decision, obs: Observation) -> bool:
    covered = _covered_range(decision, obs)
    return covered is not None and (covered[0] >= covered[1] or _inside(*covered, obs.allowed_spans))


def _check_widening(decision: Decision, gens: list[Observation]) -> None:
    for obs in gens:
        covered = _covered_range(decision, obs)
        if covered is None:
            raise MixedOperands("an output that must be split has operands that are not all strings",
                              location=decision.unit.location,
                              hint="Write the role header and the content in separate {{ }} tags, then patch again.")
        if not _inside(*covered, obs.allowed_spans):
            extra = obs.text[covered[0] : covered[1]]
            err = MixedHeader(
                f"the output at this line writes the role header or other non-assistant text together with "
                f"assistant text ({extra[:60]!r} on probe {obs.probe!r}), and no split between its operands "
                f"separates them the same way in every assistant turn",
                location=decision.unit.location,
                hint="Split the expression so the role header is its own {{ }} tag, then patch again.")
            err.unit_start = decision.unit.start
            err.prefixes = decision.prefixes
            err.past_first_operand = decision.start[0] > 0
            raise err


def _prompted_whole(unit: Unit, cuts: tuple[Cut, Cut], others: list[Observation]) -> bool:
    """Whether the unit is generated whole, except where it writes, always alike, the header the prompt
    supplies (muse's ``<|start|>assistant`` again after a reasoning channel): a prompt test splits it."""
    texts = {o.text[o.execution.start : o.execution.end] for o in others}
    return (cuts == ((0, 0), (unit.n_pieces, 0)) and not unit.is_data and bool(unit.pieces)
            and all(o.heads_turn for o in others) and len(texts) == 1)


def decide(unit: Unit, observations: list[Observation], loop_var: str | None,
           allow_late: bool = True) -> Decision | None:
    """One decision for a unit from all its executions (None: leave it alone).

    With ``allow_late``, a unit whose earliest start would cover a role header in some turns is kept for a
    prompt test (``prompt_split.py``) instead of refused."""
    gens = [o for o in observations if o.cut is not None]
    if not gens:
        return None
    start = min(o.cut[0] for o in gens if o.cut)
    end = max(o.cut[1] for o in gens if o.cut)
    unconditional = Decision(unit, start, end, None)
    others = [o for o in observations if o.cut is None and not o.allowed and not _harmless(unconditional, o)]
    prefixes = frozenset([*(o.text[o.execution.start : o.generated_from] for o in gens
                            if o.generated_from is not None),
                          *(o.text[o.execution.start : o.execution.end] for o in others if o.heads_turn)])
    condition = None
    if others:
        condition = _condition(gens, others, loop_var)
        if condition is None and _prompted_whole(unit, (start, end), others):
            return Decision(unit, start, end, None, late=end, late_text=others[0].text[
                others[0].execution.start : others[0].execution.end], late_required=True, prefixes=prefixes)
        if condition is None:
            raise SharedOutput(
                "the same output writes assistant text in some turns and other text in others, and neither "
                "the message role nor the last message tells them apart",
                location=unit.location,
                hint="Give the assistant branch its own output statement, then patch again.")
    decision = Decision(unit, start, end, condition, prefixes=prefixes)
    try:
        _check_widening(decision, gens)
    except MixedHeader:
        if not allow_late or len({o.cut[0] for o in gens if o.cut}) != 2:
            raise
        for obs in gens:  # each turn from its own start: the prompt test must then tell them apart
            _check_widening(replace(decision, start=obs.cut[0] if obs.cut else start), [obs])
        decision = replace(decision, late_required=True)
    return decision


# ---------------------------------------------------------------- grouping


def _binds_name(target: nodes.Node) -> bool:
    if isinstance(target, nodes.Name):
        return True
    return isinstance(target, nodes.Tuple) and any(_binds_name(t) for t in target.items)


def scope_safe(stmt: nodes.Node) -> bool:
    """True when moving ``stmt`` into a generation block (its own scope) changes nothing."""
    if isinstance(stmt, (nodes.Macro, nodes.Import, nodes.FromImport, nodes.Include, nodes.Extends,
                         nodes.Block, nodes.CallBlock, nodes.FilterBlock, nodes.Break, nodes.Continue)):
        return False
    if isinstance(stmt, (nodes.Assign, nodes.AssignBlock)) and _binds_name(stmt.target):
        return False
    if isinstance(stmt, nodes.For):
        return True
    return all(scope_safe(inner) for body in statement_lists(stmt) for inner in body)


@dataclass
class Item:
    """One unit or statement of a body, with what patching wants from it."""

    node: nodes.Node
    kind: str  # wrap | split | silent | mixed | blocker
    unit: Unit | None = None
    decision: Decision | None = None
    condition: str | None = None


@dataclass
class Run:
    """Consecutive items that share one generation block."""

    condition: str | None
    items: list[Item] = field(default_factory=list)


@dataclass
class Plan:
    """Decisions plus the lookups grouping needs."""

    decisions: dict[int, Decision]
    units_by_node: dict[int, Unit]
    units_under: dict[int, list[Unit]]
    written: set[int]
    dropped: dict[str, list[tuple[int, int]]] = field(default_factory=dict)


def _statement_item(stmt: nodes.Node, plan: Plan) -> Item:
    units = plan.units_under.get(id(stmt), [])
    decided = [plan.decisions[u.uid] for u in units if u.uid in plan.decisions]
    if isinstance(stmt, (nodes.FilterBlock, nodes.CallBlock)):
        return Item(stmt, "blocker")
    if not decided:
        return Item(stmt, "blocker" if any(u.uid in plan.written for u in units) else "silent")
    conditions = {d.condition for d in decided}
    undecided = [u for u in units if u.uid in plan.written and u.uid not in plan.decisions]
    condition = decided[0].condition
    if (len(conditions) == 1 and all(d.full for d in decided) and not undecided and scope_safe(stmt)
            and not _binds_condition(stmt, condition)):
        return Item(stmt, "wrap", condition=condition)
    return Item(stmt, "mixed")


def _binds_condition(stmt: nodes.Node, condition: str | None) -> bool:
    """Whether ``stmt`` is the loop that binds the variable ``condition`` tests (``message.role == ...``):
    the condition then only means something inside it, so the loop's body is entered instead."""
    if condition is None or not isinstance(stmt, nodes.For):
        return False
    bound = {n.name for n in stmt.target.find_all(nodes.Name)} | (
        {stmt.target.name} if isinstance(stmt.target, nodes.Name) else set())
    return condition.split(".", 1)[0] in bound


def body_items(body: list[nodes.Node], plan: Plan) -> list[Item]:
    """The items of a statement list (output statements expand into their units)."""
    items = []
    for stmt in body:
        if not isinstance(stmt, nodes.Output):
            items.append(_statement_item(stmt, plan))
            continue
        for child in stmt.nodes:
            unit = plan.units_by_node[id(child)]
            decision = plan.decisions.get(unit.uid)
            if decision is None:
                kind = "blocker" if unit.uid in plan.written else "silent"
                items.append(Item(child, kind, unit))
            else:
                kind = "wrap" if decision.full else "split"
                items.append(Item(child, kind, unit, decision, decision.condition))
    return items


class _RunBuilder:
    """Collects runs: consecutive wrap items with one condition, silent statements between them."""

    def __init__(self) -> None:
        self.runs: list[Run] = []
        self.current: Run | None = None
        self.pending: list[Item] = []

    def close(self) -> None:
        if self.current is not None:
            self.runs.append(self.current)
        self.current, self.pending = None, []

    def extend(self, item: Item) -> None:
        if self.current is not None and self.current.condition == item.condition:
            self.current.items += [*self.pending, item]
            self.pending = []
        else:
            self.close()
            self.current = Run(item.condition, [item])

    def hold(self, item: Item) -> bool:
        """Keep a silent statement in case the run continues after it."""
        if self.current is None or not scope_safe(item.node):
            return False
        self.pending.append(item)
        return True


def group_runs(body: list[nodes.Node], plan: Plan) -> list[Run]:
    """Runs of items for one body and, recursively, for the statements it must enter."""
    builder = _RunBuilder()
    for item in body_items(body, plan):
        if item.kind == "wrap":
            builder.extend(item)
        elif item.kind == "split" and item.decision is not None:
            if item.decision.opens:  # header text first: the block starts inside this item
                builder.close()
            builder.extend(item)
            if item.decision.closes:  # other text after: the block ends inside this item
                builder.close()
        elif not (item.kind == "silent" and builder.hold(item)):
            builder.close()
            if item.kind == "mixed":
                for inner in statement_lists(item.node):
                    builder.runs += group_runs(inner, plan)
    builder.close()
    return builder.runs
