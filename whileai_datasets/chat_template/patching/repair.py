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

import json

from jinja2 import nodes

from whileai_datasets.chat_template.analysis.trace import Unit, collect_units
from whileai_datasets.chat_template.sandbox.source import SourceMap, Tok, parse_located

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
    edited = cut_out(text, if_range[1].core_end, unit_range)
    for position, snippet in sorted(inserts, reverse=True):
        edited = edited[:position] + snippet + edited[position:]
    return edited


def cut_out(text: str, floor: int, tag: tuple[Tok, Tok]) -> str:
    """``text`` without the ``{{ }}`` tag ``tag`` and the whitespace its ``-`` signs stripped (back to
    ``floor`` on the left), so the text around it renders as it did beside it."""
    first, last = tag
    before, after = text[: first.start], text[last.core_end :]
    if first.mod == "-":
        before = before[:floor] + before[floor:].rstrip()
    if last.mod == "-":
        after = after.lstrip()
    return before + after


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


def _reads_content(node: nodes.Node, derived: frozenset[str] = frozenset()) -> bool:
    """Whether ``node`` reads a message's content, directly or through a variable in ``derived``."""
    for item in [node, *node.find_all((nodes.Getitem, nodes.Getattr))]:
        key = item.arg.value if isinstance(item, nodes.Getitem) and isinstance(item.arg, nodes.Const) else getattr(item, "attr", None)
        if key == "content":
            return True
    return any(name.name in derived for name in [node, *node.find_all(nodes.Name)] if isinstance(name, nodes.Name))


def content_variables(template: nodes.Template) -> frozenset[str]:
    """Names some ``{% set %}`` binds to a value read from a message's content (``message_text``), to a
    fixed point: a name set from such a name is one too."""
    assigns = [a for a in template.find_all(nodes.Assign) if isinstance(a.target, nodes.Name)]
    derived: frozenset[str] = frozenset()
    while True:
        grown = derived | {str(a.target.name) for a in assigns if _reads_content(a.node, derived)}  # type: ignore[attr-defined]
        if grown == derived:
            return derived
        derived = frozenset(grown)


def _assignment(unit: Unit, name: str) -> tuple[nodes.Assign, list[nodes.Node]] | None:
    """The last ``{% set name = ... %}`` before the unit's output in the same body, and what lies between."""
    index = next(i for i, stmt in enumerate(unit.body) if stmt is unit.statement)
    for back in range(index - 1, -1, -1):
        stmt = unit.body[back]
        if isinstance(stmt, nodes.Assign) and isinstance(stmt.target, nodes.Name) and stmt.target.name == name:
            return stmt, unit.body[back + 1 : index]
    return None


def _printed_first(node: nodes.Node, source: SourceMap) -> nodes.Name | None:
    """The variable an output prints first: ``{{ X }}``, or ``{{ X + rest }}`` with X nowhere in rest."""
    if isinstance(node, nodes.Name):
        return node
    from whileai_datasets.chat_template.analysis.trace import operand_chain

    operands = operand_chain(node, source) or []
    if not operands or not isinstance(operands[0], nodes.Name):
        return None
    first = operands[0]
    return None if any(_mentions(op, str(first.name)) for op in operands[1:]) else first


def split_assigned_output(text: str, unit_start: int, name: str = "<template>") -> str | None:
    """``text`` with the variable printed at ``unit_start`` split before its content operand.

    Returns None unless the unit prints a variable (alone, or as the first operand of a chain that
    does not read it again: CodeLlama-70B's ``{{ X + ' <step> ' }}``) assigned, in the same body, a ``+`` chain whose
    first operands write a header and a later one reads a message's content, and nothing between
    the assignment and the output does more than prepend to the variable.
    """
    from whileai_datasets.chat_template.analysis.trace import operand_chain

    source = parse_located(text, name)
    unit = _find_unit(source, unit_start)
    printed_name = None if unit is None else _printed_first(unit.node, source)
    if unit is None or printed_name is None:
        return None
    variable = str(printed_name.name)
    found = _assignment(unit, variable)
    if found is None or not _only_prepends(found[1], variable) or _mentions(found[0].node, variable):
        return None
    assign = found[0]
    operands = operand_chain(assign.node, source)
    derived = content_variables(source.ast) - {variable}
    split = next((k for k, op in enumerate(operands or []) if _reads_content(op, derived)), 0)
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
    at = source.spans.get(id(printed_name))
    if at is None:
        return None
    # {{ X + rest }} -> {{ X }}{{ X__wai_tail + rest }}: head + (tail + rest) writes the same text
    printed = text[first.start : at[1]].rstrip() + f" }}}}{{{{ {tail_name} " + text[at[1] : last.core_end].lstrip()
    edited = text[: first.start] + printed + text[last.core_end :]
    value = f"({head}), ({tail})"
    target = next((t for t in source.tokens[out[0].index :] if text[t.start : t.end] == variable), None)
    if target is None or target.start >= whole[0]:
        return None
    set_start = target.start  # the assignment's target, right after `set`
    return edited[:set_start] + f"{variable}, {tail_name} = {value}" + edited[whole[1] :]


# ---------------------------------------------------------------- inline a macro that writes a whole turn
#
# A generation block inside a macro is measured wrongly by transformers (its tracker counts only the
# output already emitted, and a macro's output is emitted when the macro returns). So a turn written by
#
#     {%- macro turn(message) -%}BODY{%- endmacro -%} ... {{- turn(m) -}}
#
# is inlined at the call, in a scope of its own that binds the parameters the way the call does:
#
#     {%- with message = m -%}BODY{%- endwith -%}
#
# The tags keep the signs of the ones they replace (``+`` where there was none, so trim_blocks and
# lstrip_blocks cut nothing the call did not), so BODY renders the same text at the call site.

_MACRO_ONLY = {"varargs", "kwargs", "caller", "loop"}


def _bound_anywhere(body: list[nodes.Node], skip: nodes.Macro) -> set[str]:
    """Names bound outside ``skip`` whose value the call site might see differ from the macro's: all but
    those bound exactly once in the whole template, by a top-level ``{% set %}`` or macro definition (one
    value everywhere: an ``if`` opens no scope, so a second binding anywhere would count)."""
    names: set[str] = set()
    bindings: dict[str, int] = {}
    once_on_top: set[str] = set()
    for stmt in body:
        if stmt is skip:
            continue
        stored = [str(n.name) for n in stmt.find_all(nodes.Name) if n.ctx in ("store", "param")]
        if isinstance(stmt, nodes.Macro):
            stored.append(str(stmt.name))
        for bound in stored:
            bindings[bound] = bindings.get(bound, 0) + 1
        names |= set(stored)
        if isinstance(stmt, nodes.Macro):
            once_on_top.add(str(stmt.name))
        elif isinstance(stmt, nodes.Assign) and isinstance(stmt.target, nodes.Name):
            once_on_top.add(str(stmt.target.name))
    return {n for n in names if not (n in once_on_top and bindings[n] == 1)}


def _free_names(macro: nodes.Macro) -> set[str]:
    loads = {str(n.name) for n in macro.find_all(nodes.Name) if n.ctx == "load"}
    stores = {str(n.name) for n in macro.find_all(nodes.Name) if n.ctx in ("store", "param")}
    return loads - stores


def _bindings(macro: nodes.Macro, call: nodes.Call, source: SourceMap) -> list[str] | None:
    """``param = argument`` for every parameter, in the macro's order (None: not bindable statically)."""
    if call.dyn_args is not None or call.dyn_kwargs is not None or len(call.args) > len(macro.args):
        return None
    given: dict[str, nodes.Node] = {str(p.name): a for p, a in zip(macro.args, call.args)}
    for keyword in call.kwargs:
        if keyword.key in given or keyword.key not in {p.name for p in macro.args}:
            return None
        given[keyword.key] = keyword.value
    defaults = dict(zip([str(p.name) for p in macro.args[len(macro.args) - len(macro.defaults):]], macro.defaults))
    out = []
    for param in macro.args:
        value = given.get(str(param.name), defaults.get(str(param.name)))
        text = None if value is None else source.expr_text(value)
        if text is None or (param.name not in given and not isinstance(value, nodes.Const)):
            return None
        out.append(f"{param.name} = {text}")
    return out


def inline_macro_call(text: str, unit_start: int, name: str = "<template>") -> str | None:
    """``text`` with the macro call printed at ``unit_start`` replaced by the macro's body.

    Returns None unless the unit is ``{{ m(...) }}`` alone in its tag, ``m`` a top-level macro defined
    once, with no nested macro, and nothing its body reads unbound (besides its parameters) is bound
    anywhere else in the template (the call site could see another value), nor is ``loop``/``caller``.
    """
    source = parse_located(text, name)
    unit = _find_unit(source, unit_start)
    if unit is None or not isinstance(unit.node, nodes.Call) or not isinstance(unit.node.node, nodes.Name):
        return None
    macros = [m for m in source.ast.body if isinstance(m, nodes.Macro) and m.name == unit.node.node.name]
    if len(macros) != 1 or len(unit.statement.nodes) != 1 or list(macros[0].find_all(nodes.Macro)):
        return None
    macro, call = macros[0], unit.node
    free = _free_names(macro) - {str(p.name) for p in macro.args} - {str(macro.name)}
    bindings = _bindings(macro, call, source)
    if bindings is None or free & (_MACRO_ONLY | _bound_anywhere(source.ast.body, macro)):
        return None
    opening, closing, site = source.tag_range(macro), source.branch_ends.get(id(macro.body)), source.tag_range(call)
    if opening is None or closing is None or site is None:
        return None
    open_end = next(t for t in source.tokens[opening[0].index :] if t.type == "block_end")
    body = text[open_end.core_end : closing.start]
    first, last = site
    inlined = (f"{{%{first.mod or '+'} with {', '.join(bindings)} {open_end.mod}%}}{body}"
               f"{{%{closing.mod} endwith {last.mod or '+'}%}}")
    return text[: first.start] + inlined + text[last.core_end :]


# ---------------------------------------------------------------- split off the prompt's text at run time
#
# Some templates write a turn's prefill and its output in one value: Hy3's ``content`` starts with the
# empty think block the generation prompt prefills, Kimi-K3's ``render_assistant(...)`` with the think
# opener it prefills. No operand boundary falls where the output starts, so the value is cut where it is
# printed, by the text the prompt writes there:
#
#     {{ E }}   becomes   {% set V = E %}{% if V is string and V.startswith(P) %}{{ V[:n] }}{{ V[n:] }}
#                         {% else %}{{ V }}{% endif %}
#
# with P that text (n its length; one ``elif`` per further P, longest first). ``E`` is evaluated once,
# where it was, so the same text comes out in the same order. Only what the generation prompt prefills
# after the turn's header is cut (the rule says it is prompt on every turn alike): P must be written by
# the prompt after its start, and end where the prompt ends or one of its tags or lines ends (Hy3 writes
# its think opener alone before a reasoning). An output that writes the role header itself with the
# content is not cut this way (a header is not prefill), unless the header runs over an operand boundary
# into a value (see ``split_prompt_prefix``). The patch is then verified like any other.

_PREFIX_NAME = "wai_out"
_MAX_PREFIXES = 3


def prompt_pieces(generation_prompt: str) -> set[str]:
    """Where the generation prompt's text may stop: its end, and the end of each of its tags and lines."""
    return {generation_prompt[:j] for j in range(1, len(generation_prompt) + 1)
            if j == len(generation_prompt) or generation_prompt[j - 1] in ">\n"}


def _prefilled(prefix: str, generation_prompt: str, whole: bool = False) -> bool:
    """Whether the generation prompt writes ``prefix`` after its start (so another output wrote the turn's
    header) and ends it where the prompt ends or one of its tags or lines ends; with ``whole``, the prompt's
    text from its start (the header) counts too."""
    return any((len(piece) > len(prefix) or whole and len(piece) == len(prefix)) and piece.endswith(prefix)
               for piece in prompt_pieces(generation_prompt))


def split_prompt_prefix(text: str, unit_start: int, prefixes: frozenset[str], generation_prompt: str | None,
                        name: str = "<template>", header: bool = False) -> str | None:
    """``text`` with the output at ``unit_start`` printed through a variable that is cut after the text
    the generation prompt writes there.

    Returns None unless every execution that writes generated text writes before it nothing or text the
    generation prompt prefills after the turn's header (at most three such texts). With ``header``, the
    prompt's whole text counts too: for an output whose generated text starts past its first operand
    (Jamba's ``bom + role_tag(role) + content``, the tag's trailing space the model's), the prompt's text
    runs over an operand boundary into a value, and no static cut exists; a value that holds header and
    content alone (a turn built in one variable or macro) is left to the rewrites whose guards know it.
    """
    written = sorted({p for p in prefixes if p}, key=len, reverse=True)
    if not generation_prompt or not written or len(written) > _MAX_PREFIXES:
        return None
    if not all(_prefilled(prefix, generation_prompt, header) for prefix in written):
        return None
    source = parse_located(text, name)
    unit = _find_unit(source, unit_start)
    tag = None if unit is None or unit.is_data else source.tag_range(unit.node)
    expression = None if unit is None else source.expr_text(unit.node)
    if tag is None or expression is None or expression.startswith(_PREFIX_NAME):
        return None  # (an output this rewrite wrote: cut once, it is refused as it is)
    first, last = tag
    v = next(f"{_PREFIX_NAME}{k}" for k in range(1, len(text) + 2) if f"{_PREFIX_NAME}{k}" not in text)
    branches = "".join(
        f"{{% {'if' if k == 0 else 'elif'} {v} is string and {v}.startswith({json.dumps(p, ensure_ascii=False)}) %}}"
        f"{{{{ {v}[:{len(p)}] }}}}{{{{ {v}[{len(p)}:] }}}}" for k, p in enumerate(written))
    rewritten = (f"{{%{first.mod or '+'} set {v} = {expression} %}}{branches}"
                 f"{{% else %}}{{{{ {v} }}}}{{% endif {last.mod or '+'}%}}")
    return text[: first.start] + rewritten + text[last.core_end :]
