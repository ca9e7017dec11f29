"""Output-preserving rewrites that give the patcher a shape it can wrap.

Two rewrites: *split a variable built from header + content* (below), and
*sink an output into the preceding if*. When a unit
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


# ---------------------------------------------------------------- split a variable built from header + content
#
# Llama-3 / CodeLlama-style templates build each turn in one variable and print it:
#
#     {% set X = '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' + m['content'] | trim + '<|eot_id|>' %}
#     {% if loop.first %}{% set X = bos_token + X %}{% endif %}
#     {{ X }}
#
# becomes
#
#     {% set X, X__wai_tail = ('<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n'), (m['content'] | trim + '<|eot_id|>') %}
#     {% if loop.first %}{% set X = bos_token + X %}{% endif %}
#     {{ X }}{{ X__wai_tail }}
#
# which writes the same text (``+`` is associative, and every later change of X
# only prepends to it) while the header and the content are separate outputs.

TAIL_SUFFIX = "__wai_tail"


def _mentions(node: nodes.Node, name: str) -> list[nodes.Name]:
    return [n for n in node.find_all(nodes.Name) if n.name == name]


def _prepends_to(stmt: nodes.Assign, name: str) -> bool:
    """``{% set X = P + X %}`` with P not using X."""
    value = stmt.node
    return (isinstance(value, nodes.Add) and isinstance(value.right, nodes.Name) and value.right.name == name
            and not _mentions(value.left, name))


def _only_prepends(between: list[nodes.Node], name: str) -> bool:
    """Whether the statements between the assignment and the output only prepend to ``name``."""
    for stmt in between:
        uses = _mentions(stmt, name)
        if not uses:
            continue
        assigns = [a for a in stmt.find_all(nodes.Assign) if isinstance(a.target, nodes.Name) and a.target.name == name]
        if not assigns or not all(_prepends_to(a, name) for a in assigns):
            return False
        if len(uses) != 2 * len(assigns) or any(isinstance(n, (nodes.For, nodes.Macro)) for n in stmt.find_all(nodes.Node)):
            return False  # X read anywhere else, or reassigned in a loop
    return True


def _reads_content(node: nodes.Node) -> bool:
    for item in [node, *node.find_all((nodes.Getitem, nodes.Getattr))]:
        key = item.arg.value if isinstance(item, nodes.Getitem) and isinstance(item.arg, nodes.Const) else getattr(item, "attr", None)
        if key == "content":
            return True
    return False


def _assignment(unit: Unit, name: str) -> tuple[nodes.Assign, list[nodes.Node]] | None:
    """The last ``{% set name = ... %}`` before the unit's output in the same body, and what lies between."""
    index = next(i for i, stmt in enumerate(unit.body) if stmt is unit.statement)
    for back in range(index - 1, -1, -1):
        stmt = unit.body[back]
        if isinstance(stmt, nodes.Assign) and isinstance(stmt.target, nodes.Name) and stmt.target.name == name:
            return stmt, unit.body[back + 1 : index]
    return None


def split_assigned_output(text: str, unit_start: int, name: str = "<template>") -> str | None:
    """``text`` with the variable printed at ``unit_start`` split before its content operand.

    Returns None unless the unit prints a variable assigned, in the same body, a ``+`` chain whose
    first operands write a header and a later one reads a message's content, and nothing between
    the assignment and the output does more than prepend to the variable.
    """
    from whileai_datasets.chat_template.trace import _chain

    source = parse_located(text, name)
    unit = _find_unit(source, unit_start)
    if unit is None or not isinstance(unit.node, nodes.Name):
        return None
    variable = str(unit.node.name)
    found = _assignment(unit, variable)
    if found is None or not _only_prepends(found[1], variable) or _mentions(found[0].node, variable):
        return None
    assign = found[0]
    operands = _chain(assign.node, source)
    split = next((k for k, op in enumerate(operands or []) if _reads_content(op)), 0)
    spans = [source.spans.get(id(op)) for op in operands or []]
    whole, tag, out = source.spans.get(id(assign.node)), source.tag_range(unit.node), source.tag_range(assign)
    if split == 0 or any(s is None for s in spans) or whole is None or tag is None or out is None:
        return None
    head = text[spans[0][0] : spans[split - 1][1]].strip()  # type: ignore[index]
    tail = text[spans[split][0] : spans[-1][1]].strip()  # type: ignore[index]
    tail_name = variable + TAIL_SUFFIX
    if tail_name in text:
        return None
    first, last = tag
    printed = f"{{{{{first.mod} {variable} }}}}{{{{ {tail_name} {last.mod}}}}}"
    edited = text[: first.start] + printed + text[last.core_end :]
    value = f"({head}), ({tail})"
    target = next((t for t in source.tokens[out[0].index :] if text[t.start : t.end] == variable), None)
    if target is None or target.start >= whole[0]:
        return None
    set_start = target.start  # the assignment's target, right after `set`
    return edited[:set_start] + f"{variable}, {tail_name} = {value}" + edited[whole[1] :]
