"""Output-preserving rewrites that give the patcher a shape it can wrap.

The one rewrite so far: *sink an output into the preceding if*. When a unit
writes the role header in some turns and generated text in others, and what
decides that is the ``{% if %}`` right before it (gpt-oss renders
``<|start|>assistant`` once more after an analysis message), then

    {% if C %}A{% endif %}{{ U }}   becomes   {% if C %}A{{ U }}{% else %}{{ U }}{% endif %}

which renders the same text (the test runs first either way, and an ``if``
opens no scope) while each copy of ``U`` now behaves the same in every turn.
"""

from __future__ import annotations

from jinja2 import nodes

from whileai_datasets.chat_template.source import SourceMap, Tok, parse_located
from whileai_datasets.chat_template.trace import Unit, collect_units

_QUIET = ("whitespace", "comment_begin", "comment", "comment_end")


def _find_unit(source: SourceMap, start: int) -> Unit | None:
    return next((u for u in collect_units(source) if u.start == start), None)


def _only_quiet_between(source: SourceMap, left: Tok, right: Tok) -> bool:
    for tok in source.tokens[left.index + 1 : right.index]:
        if tok.type in _QUIET:
            continue
        if tok.type == "data" and not source.text[tok.start : tok.end].strip():
            continue
        return False
    return True


def _branch_bodies(stmt: nodes.If) -> list[list[nodes.Node]]:
    return [stmt.body, *(branch.body for branch in stmt.elif_), *([stmt.else_] if stmt.else_ else [])]


def sink_into_previous_if(text: str, unit_start: int, name: str = "<template>") -> str | None:
    """``text`` with the unit at ``unit_start`` copied into the preceding if's branches.

    Returns None when the unit is not a ``{{ }}`` output right after an
    ``{% if %}`` (with only whitespace and comments between).
    """
    source = parse_located(text, name)
    unit = _find_unit(source, unit_start)
    if unit is None or unit.is_data or unit.statement.nodes[0] is not unit.node:
        return None
    index = next(i for i, stmt in enumerate(unit.body) if stmt is unit.statement)
    previous = unit.body[index - 1] if index else None
    unit_range, if_range = source.tag_range(unit.node), source.tag_range(previous) if previous else None
    if not isinstance(previous, nodes.If) or unit_range is None or if_range is None:
        return None
    if not _only_quiet_between(source, if_range[1], unit_range[0]):
        return None
    ends = [source.branch_ends.get(id(body)) for body in _branch_bodies(previous)]
    if any(end is None for end in ends):
        return None
    copy = text[unit_range[0].start : unit_range[1].core_end]
    inserts = [(end.start, copy) for end in ends if end is not None]
    if not previous.else_:
        inserts[-1] = (inserts[-1][0], copy + "{% else %}" + copy)
    edited = text[: unit_range[0].start] + text[unit_range[1].core_end :]
    for position, snippet in sorted(inserts, reverse=True):
        edited = edited[:position] + snippet + edited[position:]
    return edited
