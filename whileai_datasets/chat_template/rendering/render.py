"""Render a chat template once and report where each message and generation block landed.

How spans are tracked: the template is compiled from a copy of its AST in which

* each ``{% generation %}`` block returns its body between two markers, and
* each ``{% for x in ... %}`` loop calls a tracker at the start of every pass;
  when ``x`` *is* one of the conversation's message dicts (identity, not
  equality) the tracker emits a marker naming that message.

Markers are private-use characters (U+E000 ... U+E001) that are stripped after
rendering; offsets are measured in the stripped text. Because a marker is part
of the text, it moves with it: a block inside a macro or inside a
``{% set %}...{% endset %}`` capture still gets the offsets where its text ends
up. (transformers measures a block against the output already yielded, which
is wrong in exactly those two places.) The cost of this choice: a template that
post-processes captured text around a block (``| trim`` on a capture that
contains markers) could see the markers; ``ChatTemplate.inspect`` compares the
tracked render with a plain one and reports such templates. Inputs that already
contain the private-use characters are refused.

Inputs are prepared the way transformers' ``apply_chat_template`` prepares
them (``inputs.py``), so the text equals transformers' render.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from itertools import count, islice
from typing import Any

import jinja2
from jinja2 import nodes

from whileai_datasets.chat_template.rendering.failures import failure_problem_and_hint
from whileai_datasets.chat_template.rendering.inputs import (
    batch_inputs,
    marker_free,
    plain,
    prepare_messages,
    prepared_tools,
    template_context,
)
from whileai_datasets.chat_template.rendering.spans import (
    TRACKER_NAMES,
    LoopTracker,
    RenderedChat,
    assemble,
    decode,
)
from whileai_datasets.chat_template.sandbox.budget import Meter, metered
from whileai_datasets.chat_template.sandbox.environment import (
    chat_environment,
    generation_lines,
    is_generation_block,
    marker,
    normalize_newlines,
    statement_lists,
)
from whileai_datasets.chat_template.sandbox.source import syntax_error
from whileai_datasets.errors import TemplateError

#: Prepared in ``inputs.py``; named here too, where callers have always found them.
__all__ = ["batch_inputs", "compile_ast", "compile_plain", "compile_tracking", "inline_generation",
           "instrument_loops", "iter_statements", "marker_free", "plain", "prepare_messages", "prepared_tools",
           "render_chat", "render_plain", "run_template", "template_context"]

# ---------------------------------------------------------------- compiling


def instrument_loops(ast: nodes.Template) -> nodes.Template:
    """Add message-tracking calls around and inside every ``for`` loop (in place).

    Raises:
        TemplateError: the template itself uses one of the tracker's names (they compile to plain calls).
    """
    reserved = next((node for node in ast.find_all(nodes.Name) if node.name in TRACKER_NAMES), None)
    if reserved is not None:
        raise TemplateError(f"the template uses the name {reserved.name!r}, which span tracking reserves",
                            location=f"template line {reserved.lineno}",
                            hint=f"Rename {reserved.name!r} in the template (names starting __wai_ are ours).")
    uids = count()

    def visit(body: list[nodes.Node]) -> None:
        rewritten: list[nodes.Node] = []
        for stmt in body:
            for inner in statement_lists(stmt):
                visit(inner)
            if isinstance(stmt, nodes.For) and isinstance(stmt.target, nodes.Name):
                uid = next(uids)
                iter_call = _call("__wai_iter", nodes.Name(stmt.target.name, "load"))
                stmt.body.insert(0, nodes.Output([iter_call]))
                rewritten += [nodes.Output([_call("__wai_loop_open", nodes.Const(uid))]), stmt,
                              nodes.Output([_call("__wai_loop_close")])]
            else:
                rewritten.append(stmt)
        body[:] = rewritten

    visit(ast.body)
    return ast


def inline_generation(ast: nodes.Template) -> nodes.Template:
    """Each ``{% generation %}`` block as its body in a scope of its own between its two markers (in place).

    The text is what ``GenerationExtension._generation`` returns for the block, without a macro call per
    block and pass (a tenth of a Llama 3.1 row's render): a ``{% set %}`` inside still stays inside, and the
    markers, being text, still travel through macros and captures.
    """
    def visit(body: list[nodes.Node]) -> None:
        rewritten: list[nodes.Node] = []
        for stmt in body:
            for inner in statement_lists(stmt):
                visit(inner)
            if is_generation_block(stmt):
                line = generation_lines(stmt)[0]
                rewritten += [nodes.Output([nodes.TemplateData(marker("G", line))]), nodes.Scope(stmt.body),
                              nodes.Output([nodes.TemplateData(marker("g", line))])]
            else:
                rewritten.append(stmt)
        body[:] = rewritten

    visit(ast.body)
    return ast


def _call(name: str, *args: nodes.Expr) -> nodes.Call:
    return nodes.Call(nodes.Name(name, "load"), list(args), [], None, None)


@lru_cache(maxsize=64)
def compile_tracking(text: str, name: str = "<template>") -> jinja2.Template:
    """The template compiled with generation markers and message tracking."""
    env = chat_environment(track=True)
    try:
        ast = env.parse(normalize_newlines(text), name)
    except jinja2.TemplateSyntaxError as err:
        raise syntax_error(err, name) from err
    return compile_ast(inline_generation(instrument_loops(ast)), track=True, name=name)


@lru_cache(maxsize=64)
def compile_plain(text: str, name: str = "<template>") -> jinja2.Template:
    """The template compiled as transformers compiles it (no markers)."""
    env = chat_environment()
    try:
        return flat_globals(env.from_string(normalize_newlines(text)))
    except jinja2.TemplateSyntaxError as err:
        raise syntax_error(err, name) from err


def flat_globals(template: jinja2.Template) -> jinja2.Template:
    """``template`` with its globals (a ``ChainMap`` of its own over the environment's) as one dict: each
    render copies them into its context, and a ``ChainMap`` is copied key by key in Python."""
    template.globals = dict(template.globals)
    return template


def compile_ast(ast: nodes.Template, *, track: bool, name: str = "<template>") -> jinja2.Template:
    """Compile an (instrumented) AST; errors the rewrite provoked become TemplateError."""
    env = chat_environment(track=track)
    try:
        return flat_globals(env.from_string(ast))
    except (jinja2.TemplateSyntaxError, SyntaxError) as err:
        raise TemplateError(
            f"the instrumented template does not compile: {err}",
            location=name,
            hint="The template uses a construct span tracking does not support; render it without spans.",
        ) from err


# ---------------------------------------------------------------- rendering


def run_template(template: jinja2.Template, context: Mapping[str, Any], name: str) -> str:
    """Render under the render budget, turning any failure into a TemplateError that names the template line."""
    try:
        with metered(name, _error_location) as meter:
            return _collect(template.generate(**context), meter)
    except TemplateError:
        raise
    except jinja2.exceptions.SecurityError as err:
        mutation = "changes it in place" in str(err)
        raise TemplateError(
            f"the template tried an operation the sandbox forbids: {err}",
            location=_error_location(err, name),
            hint="Rewrite that line with a namespace() or list concatenation (`x = x + [item]`)." if mutation
            else "Chat templates from the Hub are untrusted code; do not use this template.",
        ) from err
    except Exception as err:
        problem, hint = failure_problem_and_hint(err)
        raise TemplateError(problem, location=_error_location(err, name), hint=hint) from err


def _collect(pieces: Iterator[str], meter: Meter) -> str:
    """The rendered text, measured against ``max_chars`` a batch of pieces at a time, before each join."""
    chunks, total = [], 0
    while batch := list(islice(pieces, 512)):
        total += sum(map(len, batch))
        if total > meter.budget.max_chars:
            meter.size(total, "the rendered text")
        chunks.append("".join(batch))
    return "".join(chunks)


def _error_location(err: BaseException, name: str) -> str:
    line = None
    tb = err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename in (name, "<template>"):
            line = tb.tb_lineno
        tb = tb.tb_next
    lineno = getattr(err, "lineno", None) or line
    return f"{name}:{lineno}" if lineno else name


def render_chat(
    text: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = False,
    kwargs: Mapping[str, Any] | None = None,
    now: datetime | None = None,
    name: str = "<template>",
) -> RenderedChat:
    """Render ``text`` once, with message and generation spans."""
    prepared = prepare_messages(messages)
    context = template_context(prepared, tools, add_generation_prompt, kwargs or {}, now)
    tracker = LoopTracker(prepared)
    raw = run_template(compile_tracking(text, name), {**context, **tracker.callbacks()}, name)
    clean, events = decode(raw)
    return assemble(clean, events, len(prepared))


def render_plain(
    text: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = False,
    kwargs: Mapping[str, Any] | None = None,
    now: datetime | None = None,
    name: str = "<template>",
) -> str:
    """Render ``text`` exactly as transformers would (no spans)."""
    prepared = prepare_messages(messages)
    context = template_context(prepared, tools, add_generation_prompt, kwargs or {}, now)
    return run_template(compile_plain(text, name), context, name)


def iter_statements(body: list[nodes.Node]) -> Iterator[nodes.Node]:
    """Every statement in ``body`` and below it, parents before children."""
    for stmt in body:
        yield stmt
        for inner in statement_lists(stmt):
            yield from iter_statements(inner)

