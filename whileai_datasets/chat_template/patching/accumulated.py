"""Print a conversation that the template builds in one namespace string as it is built.

Some templates write nothing while they walk the messages: every turn is appended to a namespace
attribute and the whole text is printed once, at the end (Reka's ``ns.out``)::

    {%- set ns = namespace(out="") -%}
    {%- for ... -%}{%- set ns.out = ns.out ~ "assistant: " -%}{%- set ns.out = ns.out ~ content -%}...
    {%- endfor -%}
    {{- ns.out -}}

One output then holds every role's text and no block can go around a turn. Each append is rewritten
to also print what it appends, where it appends it, and the final print is removed::

    {%- set wai_acc1 = [content] %}{{ wai_acc1[0] }}{% set ns.out = ns.out ~ wai_acc1[0] -%}

The appended operands are evaluated once, in their order, into a list (constants stay literal, so the
patcher can still cut inside them), the attribute keeps its value for every other read, and the text
comes out in the order it was appended: the same text, as long as nothing else is printed before the
final print. Only a shape where that holds is rewritten (see ``print_accumulated``); the result is then
verified like any other patch.
"""

from __future__ import annotations

from jinja2 import nodes

from whileai_datasets.chat_template.analysis.trace import Unit, collect_units, operand_chain
from whileai_datasets.chat_template.patching.repair import cut_out
from whileai_datasets.chat_template.sandbox.source import SourceMap, parse_located

_PREFIX = "wai_acc"


def _is_attribute(node: nodes.Node, space: str, attribute: str) -> bool:
    return (isinstance(node, nodes.Getattr) and node.attr == attribute and isinstance(node.node, nodes.Name)
            and node.node.name == space)


def _appends(value: nodes.Node, space: str, attribute: str, source: SourceMap) -> list[nodes.Node] | None:
    """The operands ``ns.out ~ a ~ b`` (or ``+``) appends, None unless it starts with the attribute itself."""
    operands = operand_chain(value, source)
    if not operands or len(operands) < 2 or not _is_attribute(operands[0], space, attribute):
        return None
    return operands[1:]


def _binds(macro: nodes.Macro, space: str) -> bool:
    """Whether a macro has a ``space`` of its own (a parameter, or a ``{% set %}`` of that name)."""
    return space in {str(p.name) for p in macro.args} or any(
        isinstance(a.target, nodes.Name) and a.target.name == space for a in macro.find_all(nodes.Assign))


def _foreign_writes(template: nodes.Template, space: str, attribute: str) -> bool:
    """Whether the attribute is written anywhere but by top-level appends: a ``{% set %}`` block, or a
    macro that assigns it without a namespace of its own."""
    if any(isinstance(b.target, nodes.NSRef) and b.target.attr == attribute
           for b in template.find_all(nodes.AssignBlock)):
        return True
    for macro in template.find_all(nodes.Macro):
        writes = [a for a in macro.find_all(nodes.Assign)
                  if isinstance(a.target, nodes.NSRef) and a.target.attr == attribute]
        if writes and not _binds(macro, space):
            return True
    return False


def _outside_macros(template: nodes.Template) -> list[nodes.Node]:
    """Every node of the template that is not inside a macro."""
    found: list[nodes.Node] = []

    def visit(node: nodes.Node) -> None:
        for child in node.iter_child_nodes():
            if not isinstance(child, nodes.Macro):
                found.append(child)
                visit(child)

    visit(template)
    return found


def _starts_empty(assign: nodes.Assign, attribute: str) -> bool:
    """``{% set ns = namespace(..., out='') %}``."""
    call = assign.node
    if not (isinstance(call, nodes.Call) and isinstance(call.node, nodes.Name) and call.node.name == "namespace"):
        return False
    return any(k.key == attribute and isinstance(k.value, nodes.Const) and k.value.value == ""
               for k in call.kwargs)


def _printed_attribute(unit: Unit | None) -> tuple[str, str] | None:
    """(namespace, attribute) when the unit is a top-level ``{{ ns.attr }}`` alone in its tag."""
    if unit is None or unit.ancestors or len(unit.statement.nodes) != 1:
        return None
    node = unit.node
    if not isinstance(node, nodes.Getattr) or not isinstance(node.node, nodes.Name):
        return None
    return str(node.node.name), str(node.attr)


def print_accumulated(text: str, unit_start: int, name: str = "<template>") -> str | None:
    """``text`` with every append to the namespace string printed at ``unit_start`` printed where it is made.

    Returns None unless the unit is a top-level ``{{ ns.attr }}`` alone in its tag, printed after every
    append; every other output of the template is whitespace or lies before the first append (a BOS token
    printed first) or after the print; ``ns`` is bound once, outside macros, by
    ``namespace(attr='')``; and the attribute is only ever written outside macros by ``{% set ns.attr =
    ns.attr ~ ... %}`` (``+`` too) before that print.
    """
    source = parse_located(text, name)
    units = collect_units(source)
    unit = next((u for u in units if u.start == unit_start), None)
    printed = _printed_attribute(unit)
    if unit is None or printed is None:
        return None
    space, attribute = printed
    outer = _outside_macros(source.ast)
    binders = [n for n in outer if isinstance(n, nodes.Name) and n.name == space and n.ctx in ("store", "param")]
    creations = [n for n in outer if isinstance(n, nodes.Assign) and isinstance(n.target, nodes.Name)
                 and n.target.name == space]
    if len(binders) != 1 or len(creations) != 1 or not _starts_empty(creations[0], attribute):
        return None
    if _foreign_writes(source.ast, space, attribute):
        return None
    writes = [n for n in outer if isinstance(n, nodes.Assign) and isinstance(n.target, nodes.NSRef)
              and n.target.attr == attribute]
    first_write = min((tags[0].start for tags in map(source.tag_range, writes) if tags), default=unit.start)
    if any(_printed_between(u, unit, first_write, source, writes) for u in units):
        return None
    return _rewrite(source, unit, writes, space, attribute)


def _printed_between(other: Unit, printed: Unit, first_write: int, source: SourceMap,
                     writes: list[nodes.Assign]) -> bool:
    """Whether ``other`` may print text while the string is built: it is not whitespace, and it does not
    end before the first append (in source order, the order statements run outside a loop that appends)
    or start after the final print."""
    if other is printed or (other.is_data and not str(other.node.data).strip()):
        return False
    if any(any(write is a for a in loop.find_all(nodes.Assign)) for loop in other.loops for write in writes):
        return True  # the loop that holds it appends too: its passes interleave with the appends
    tags = source.tag_range(other.node)
    return tags is None or not (tags[1].end <= first_write or tags[0].start > printed.start)


def _rewrite(source: SourceMap, unit: Unit, writes: list[nodes.Assign], space: str, attribute: str) -> str | None:
    text = source.text
    edits: list[tuple[int, int, str]] = []
    names = (f"{_PREFIX}{k}" for k in range(1, len(text) + len(writes) + 2) if f"{_PREFIX}{k}" not in text)
    for write in writes:
        operands = _appends(write.node, space, attribute, source) if write.target.name == space else None
        tags, spans = source.tag_range(write), [source.spans.get(id(o)) for o in operands or []]
        if operands is None or tags is None or any(s is None for s in spans) or tags[0].start >= unit.start:
            return None
        variable, joiner = next(names), " + " if isinstance(write.node, nodes.Add) else " ~ "
        values = [text[s[0] : s[1]].strip() for s in spans if s is not None]
        held = [v for o, v in zip(operands, values) if not _literal(o)]
        chain, index = [], 0
        for operand, value in zip(operands, values):
            if _literal(operand):
                chain.append(value)
            else:
                chain.append(f"{variable}[{index}]")
                index += 1
        appended = joiner.join(chain)
        first, last = tags
        parts = [f"{{%{first.mod} set {variable} = [{', '.join(held)}] %}}", f"{{{{ {appended} }}}}",
                 f"{{% set {space}.{attribute} = {space}.{attribute}{joiner}{appended} {last.mod}%}}"]
        edits.append((first.start, last.core_end, "".join(parts)))
    printed = source.tag_range(unit.node)
    if printed is None:
        return None
    text = cut_out(text, 0, printed)  # first: every edit lies before the print, so their offsets still hold
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def _literal(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Const) and isinstance(node.value, str)
