"""Which piece of template code wrote which characters: the evidence patching uses.

A *unit* is one child of an output node that writes straight to the template
output: a ``{{ expression }}`` or a run of literal text, outside macros,
``{% set %}`` captures, filter and call blocks. Patching can only put
generation tags around units (a tag inside a macro would be measured wrongly
by transformers). Each unit is compiled into a call that writes its text
between two markers and, when the expression is a chain of ``+`` or ``~``,
records the length of each operand, so the text can later be split between
operands.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from jinja2 import nodes

from whileai_datasets.chat_template.analysis.probes import PINNED_NOW
from whileai_datasets.chat_template.rendering.render import (
    compile_ast,
    instrument_loops,
    prepare_messages,
    run_template,
    template_context,
)
from whileai_datasets.chat_template.rendering.spans import Event, LoopTracker, decode, loop_event
from whileai_datasets.chat_template.sandbox.environment import (
    is_generation_block,
    marker,
    statement_lists,
)
from whileai_datasets.chat_template.sandbox.source import Located, SourceMap, parse_located

_OPAQUE = (nodes.Macro, nodes.CallBlock, nodes.AssignBlock, nodes.FilterBlock)


@dataclass(frozen=True)
class Piece:
    """One operand of a unit: its source span, and its text when it is a constant."""

    start: int
    end: int
    const: str | None


@dataclass
class Unit:
    """A top-level output child, where it sits, and its operands."""

    uid: int
    node: nodes.Node
    body: list[nodes.Node]
    statement: nodes.Output
    pieces: list[Piece] | None
    loops: list[nodes.For]
    is_data: bool
    ancestors: list[nodes.Node]
    start: int = -1
    location: str = ""

    @property
    def n_pieces(self) -> int:
        return len(self.pieces) if self.pieces else 1

    @property
    def line(self) -> int:
        return int(self.node.lineno or self.statement.lineno or 0)


@dataclass(frozen=True)
class Execution:
    """One time a unit wrote text: where, and the lengths of its operands."""

    uid: int
    start: int
    end: int
    lengths: tuple[int, ...] | None
    owner: int | None


@dataclass
class Trace:
    """A traced render: clean text, executions, message spans, loop ids that saw messages."""

    text: str
    executions: list[Execution]
    message_loops: set[int] = field(default_factory=set)


def operand_chain(node: nodes.Node, source: SourceMap) -> list[nodes.Node] | None:
    """The operands of a ``~`` or ``+`` chain in source order, or None when `node` is neither."""
    if isinstance(node, nodes.Concat):
        return list(node.nodes)
    if not isinstance(node, nodes.Add):
        return None
    operands: list[nodes.Node] = []
    current: nodes.Node = node
    while isinstance(current, nodes.Add) and (current is node or id(current) not in source.spans):
        operands.append(current.right)
        current = current.left
    operands.append(current)
    return operands[::-1]


def _pieces(node: nodes.Node, source: SourceMap) -> list[Piece] | None:
    if isinstance(node, nodes.TemplateData) and isinstance(node.data, Located):
        tok = node.data.tok
        return [Piece(tok.start, tok.end, str(node.data))]
    operands = operand_chain(node, source) or [node]
    pieces = []
    for operand in operands:
        span = source.spans.get(id(operand))
        if span is None:
            return None
        const = operand.value if isinstance(operand, nodes.Const) and isinstance(operand.value, str) else None
        pieces.append(Piece(span[0], span[1], const))
    return pieces


def collect_units(source: SourceMap) -> list[Unit]:
    """Every top-level unit of the template, in source order."""
    units: list[Unit] = []

    def visit(body: list[nodes.Node], loops: list[nodes.For], ancestors: list[nodes.Node]) -> None:
        for stmt in body:
            if isinstance(stmt, nodes.Output):
                for child in stmt.nodes:
                    found = source.tag_range(child)
                    unit = Unit(len(units), child, body, stmt, _pieces(child, source), loops,
                                isinstance(child, nodes.TemplateData), ancestors,
                                found[0].start if found else -1)
                    unit.location = f"{source.name}:{unit.line}"
                    units.append(unit)
            elif isinstance(stmt, _OPAQUE) and not is_generation_block(stmt):
                continue
            else:
                inner_loops = [*loops, stmt] if isinstance(stmt, nodes.For) else loops
                for inner in statement_lists(stmt):
                    visit(inner, inner_loops, [*ancestors, stmt])

    visit(source.ast.body, [], [])
    return units


class UnitRecorder:
    """The callback instrumented units call; remembers operand lengths per execution."""

    def __init__(self) -> None:
        self.records: dict[int, tuple[int, tuple[int, ...] | None]] = {}
        self._numbers = count()

    def __call__(self, uid: int, operands: Any, value: Any) -> str:
        number = next(self._numbers)
        text = str(value)
        lengths = None
        if isinstance(operands, list) and all(isinstance(o, str) for o in operands) and "".join(operands) == text:
            lengths = tuple(len(o) for o in operands)
        self.records[number] = (uid, lengths)
        return marker("U", number) + text + marker("u", number)


def instrument_units(source: SourceMap, units: list[Unit]) -> None:
    """Rewrite the AST in place so every unit reports itself, and loops track messages."""
    for unit in units:
        index = next(i for i, child in enumerate(unit.statement.nodes) if child is unit.node)
        operands = operand_chain(unit.node, source) if unit.pieces and len(unit.pieces) > 1 else None
        listed: nodes.Expr = (nodes.List([copy.deepcopy(o) for o in operands]) if operands
                              else nodes.Const(None))
        value = nodes.Const(str(unit.node.data)) if isinstance(unit.node, nodes.TemplateData) else unit.node
        unit.statement.nodes[index] = nodes.Call(
            nodes.Name("__wai_unit", "load"), [nodes.Const(unit.uid), listed, value], [], None, None)
    instrument_loops(source.ast)


def clone_statements(node: nodes.Node) -> Any:
    """A copy of the statement tree (new statement nodes and lists) sharing its expressions.

    Instrumenting the copy leaves the parsed template, and the positions
    recorded for its nodes, untouched.
    """
    new = copy.copy(node)
    for name in ("body", "else_", "elif_"):
        value = getattr(node, name, None)
        if isinstance(value, list):
            setattr(new, name, [clone_statements(child) for child in value])
    if isinstance(new, nodes.Output):
        new.nodes = list(new.nodes)
    return new


def _for_nodes(body: list[nodes.Node]) -> Iterator[nodes.For]:
    """For loops in the order instrument_loops numbers them (children before parents)."""
    for stmt in body:
        for inner in statement_lists(stmt):
            yield from _for_nodes(inner)
        if isinstance(stmt, nodes.For) and isinstance(stmt.target, nodes.Name):
            yield stmt


class TracedTemplate:
    """A template compiled with unit, loop and generation markers, ready to render probes."""

    def __init__(self, text: str, name: str = "<template>") -> None:
        self.name = name
        self.source = parse_located(text, name)
        self.units = collect_units(self.source)
        self.loops = dict(enumerate(_for_nodes(self.source.ast.body)))
        clone = SourceMap(self.source.text, name, clone_statements(self.source.ast), self.source.tokens,
                          spans=self.source.spans)
        instrument_units(clone, collect_units(clone))
        self.compiled = compile_ast(clone.ast, track=True, name=name)

    def unit(self, uid: int) -> Unit:
        return self.units[uid]

    def run(self, messages: list[dict[str, Any]], tools: Any, agp: bool, kwargs: dict[str, Any]) -> Trace:
        """Render once; raises TemplateError when the template fails."""
        prepared = prepare_messages(messages)
        context = template_context(prepared, tools, agp, kwargs, PINNED_NOW)
        tracker, recorder = LoopTracker(prepared), UnitRecorder()
        raw = run_template(self.compiled, {**context, **tracker.callbacks(), "__wai_unit": recorder}, self.name)
        text, events = decode(raw)
        return Trace(text, _executions(events, recorder), _message_loops(events))


def _message_loops(events: list[Event]) -> set[int]:
    return {payload[2] for _, kind, payload in events if kind == "I"}


def _executions(events: list[Event], recorder: UnitRecorder) -> list[Execution]:
    frames: list[list[int]] = []
    opened: dict[int, tuple[int, int | None]] = {}
    out: list[Execution] = []
    for position, kind, payload in events:
        if loop_event(frames, kind, payload):
            continue
        if kind == "U":
            opened[payload[0]] = (position, frames[-1][1] if frames else None)
        elif kind == "u" and payload[0] in opened:
            start, owner = opened.pop(payload[0])
            uid, lengths = recorder.records[payload[0]]
            out.append(Execution(uid, start, position, lengths, owner))
    return out
