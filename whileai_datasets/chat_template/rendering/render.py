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
them, so the text equals transformers' render: keys whose value is ``None``
are dropped, values are rebuilt from plain JSON types, and a message's
reasoning (``reasoning_content``, ``thinking`` or ``reasoning``) is made
available under ``reasoning_content`` and ``thinking``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from itertools import count, islice
from typing import Any

import jinja2
import pyarrow as pa
import pyarrow.compute as pc
from jinja2 import nodes

from whileai_datasets.chat_template.rendering.failures import failure_problem_and_hint
from whileai_datasets.chat_template.rendering.spans import (
    TRACKER_NAMES,
    LoopTracker,
    RenderedChat,
    assemble,
    decode,
)
from whileai_datasets.chat_template.sandbox.budget import Meter, metered, shared_values, sharing
from whileai_datasets.chat_template.sandbox.environment import (
    MARK_CLOSE,
    MARK_OPEN,
    chat_environment,
    generation_lines,
    is_generation_block,
    marker,
    normalize_newlines,
    pinned_strftime,
    statement_lists,
)
from whileai_datasets.chat_template.sandbox.source import syntax_error
from whileai_datasets.errors import TemplateError

_REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")


# ---------------------------------------------------------------- inputs


_EXACT = frozenset({str, int, float, bool, type(None)})


def plain(value: Any) -> Any:
    """``value`` rebuilt from JSON types; any other object becomes ``"<TypeName>"``."""
    kind = type(value)
    if kind in _EXACT:
        return value
    if kind is dict:  # the common case first: no abstract-class checks
        return {key if type(key) is str else plain(key): item if type(item) in _EXACT else plain(item)
                for key, item in value.items()}
    if kind is list:
        return [item if type(item) in _EXACT else plain(item) for item in value]
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {plain(key): plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, tuple):
        return tuple(plain(item) for item in value)
    return f"<{type(value).__name__}>"


def prepare_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The message dicts the template sees (see the module docstring)."""
    prepared = []
    for index, message in enumerate(messages):
        if type(message) is not dict and not isinstance(message, Mapping):
            raise TemplateError(
                f"expected a message dict, got {type(message).__name__}",
                location=f"messages[{index}]",
                hint="Pass messages as dicts with 'role' and 'content'.",
            )
        kept = {key: plain(value) for key, value in message.items() if value is not None}
        reasoning = next((kept[key] for key in _REASONING_KEYS if kept.get(key) is not None), None)
        if reasoning is not None:
            kept = {"thinking": reasoning, **kept, "reasoning_content": reasoning}
        prepared.append(kept)
    return prepared


def _has_markers(value: Any) -> bool:
    """Whether any string in ``value`` holds a marker character (one C-speed serialisation)."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str, check_circular=False)
    except (TypeError, ValueError, RecursionError):
        return True  # undecided: let the walk below look
    return MARK_OPEN in text or MARK_CLOSE in text


def _check_no_markers(value: Any, where: str) -> None:
    if isinstance(value, str):
        if MARK_OPEN in value or MARK_CLOSE in value:
            raise TemplateError(
                "the input contains the private-use character U+E000 or U+E001, which span tracking reserves",
                location=where,
                hint="Remove those characters from the conversation before rendering.",
            )
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _check_no_markers(item, f"{where}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_no_markers(item, f"{where}[{index}]")


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


def template_context(
    messages: list[dict[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    add_generation_prompt: bool,
    kwargs: Mapping[str, Any],
    now: datetime | None,
) -> dict[str, Any]:
    """The variables a template renders with, as transformers passes them."""
    context: dict[str, Any] = {key: plain(value) for key, value in kwargs.items()}
    batch = _BATCH.get()
    clean = batch is not None and batch.messages_clean
    context.update(
        messages=[] if clean else messages,
        tools=None,
        documents=context.get("documents"),
        add_generation_prompt=add_generation_prompt,
    )
    if now is not None:
        context["strftime_now"] = pinned_strftime(now)
    if _has_markers(context):
        _check_no_markers(context, "inputs")
    context["messages"] = messages
    if tools is not None:
        context["tools"] = prepared_tools(tools)
    return context


@dataclass
class _BatchInputs:
    tools: dict[int, tuple[Any, list[Any]]] = field(default_factory=dict)
    messages_clean: bool = False


_BATCH: ContextVar[_BatchInputs | None] = ContextVar("whileai_batch_inputs", default=None)


@contextmanager
def batch_inputs(*, messages_clean: bool = False) -> Iterator[None]:
    """Within: renders of one batch of rows, whose caller owns the inputs and changes none of them inside.

    A tool list handed to several renders is prepared (``plain``) and checked
    for marker characters once (``tokenize`` decodes each distinct tools text
    of a batch once, so its rows share the lists); the prepared copy is shared
    too, which the immutable sandbox makes safe: no template can change it.
    ``messages_clean``: the caller has checked every text the messages hold
    (``marker_free``), so they are not serialised again per render.
    """
    token = _BATCH.set(_BatchInputs(messages_clean=messages_clean))
    try:
        with sharing():  # and what pure filters make of the prepared tools, once (``budget.SharedValues``)
            yield
    finally:
        _BATCH.reset(token)


#: A marker character, or its JSON escape (text decoded later, like tool-call arguments or extra keys).
_MARKER_TEXT = "[\ue000\ue001]|\\\\u[eE]00[01]"


def marker_free(array: pa.Array | pa.ChunkedArray) -> bool:
    """True when no string anywhere in ``array`` (lists and structs gone through) can hold a marker character.

    One Arrow regex pass per string column of a batch instead of a serialisation
    of every row; False (undecided: check each render) for a type it does not read.
    """
    kind = array.type
    if isinstance(array, pa.ChunkedArray):
        return all(marker_free(chunk) for chunk in array.chunks)
    if isinstance(kind, pa.ExtensionType):
        return marker_free(array.storage)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return not pc.any(pc.match_substring_regex(array, _MARKER_TEXT)).as_py()
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return marker_free(array.flatten())
    if pa.types.is_struct(kind):
        return all(marker_free(field) for field in array.flatten())
    return pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind) or \
        pa.types.is_null(kind)


def prepared_tools(tools: Sequence[Mapping[str, Any]]) -> list[Any]:
    """``plain(list(tools))``, checked for marker characters (once per list inside ``batch_inputs``)."""
    batch = _BATCH.get()
    known = None if batch is None else batch.tools
    entry = None if known is None else known.get(id(tools))
    if entry is not None and entry[0] is tools:
        return entry[1]
    prepared = plain(list(tools))
    if _has_markers(prepared):
        _check_no_markers(prepared, "inputs['tools']")
    if known is not None:
        known[id(tools)] = (tools, prepared)  # holding ``tools`` keeps its id from being reused meanwhile
        shared = shared_values()
        if shared is not None:
            shared.share(prepared)
    return prepared


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

