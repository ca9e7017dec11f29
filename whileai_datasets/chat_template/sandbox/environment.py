"""The sandboxed Jinja environment chat templates are parsed and rendered in.

Template text from the Hub is untrusted code. Everything here runs in jinja2's
``ImmutableSandboxedEnvironment`` with the names transformers gives templates:
``raise_exception``, ``strftime_now``, a ``tojson`` filter that does not escape
HTML, ``dict``, a ``namespace`` that refuses underscore-prefixed attributes, the
``loopcontrols`` extension and the ``{% generation %}`` tag. Three differences, all
deliberate:

* an unsafe attribute access (``__class__``, ``__globals__``, a mutating list
  method, ...) raises ``SecurityError`` at once. Jinja's default would hand back
  an undefined value that prints as an empty string, so a probing template
  would silently keep running;
* every render runs under a ``RenderBudget`` (see ``budget``): the loops,
  calls, operators, concatenations, filters and prints of the compiled
  template check size and time through the hooks below;
* a ``{% generation %}`` block can emit position markers (private-use
  characters, see ``MARK_OPEN``) when the environment is built with
  ``track=True``. Markers travel with the text through macros and
  ``{% set %}`` captures, so a block's offsets stay right where transformers'
  tracker (which measures the output already yielded) shifts them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.exceptions import TemplateError as JinjaTemplateError
from jinja2.ext import Extension
from jinja2.parser import Parser
from jinja2.runtime import LoopContext, Macro, Undefined
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace
from packaging.version import Version

from whileai_datasets.chat_template.sandbox.budget import (
    Meter,
    MeteredIterable,
    RenderBudget,
    current_meter,
    printed_size,
)
from whileai_datasets.chat_template.sandbox.guards import (
    check_binop,
    check_call,
    check_result,
    format_size,
    guarded_filter,
)

MIN_JINJA = Version("3.1.6")

# Markers are private-use code points: U+E000 opens a marker, U+E001 closes it.
# The character after U+E000 says what the marker means (see render.py).
MARK_OPEN = "\ue000"
MARK_CLOSE = "\ue001"
GENERATION_METHOD = "_generation"
#: The span tracker's callbacks (``rendering.spans.LoopTracker``), which the instrumented template calls per
#: loop pass; reserved: no template may use these names (``rendering.render.instrument_loops`` refuses it).
TRACKER_NAMES = ("__wai_loop_open", "__wai_iter", "__wai_loop_close")


def marker(kind: str, *payload: int) -> str:
    """One position marker: ``kind`` is a single letter, ``payload`` integers."""
    return f"{MARK_OPEN}{kind}{','.join(map(str, payload))}{MARK_CLOSE}"


class GenerationExtension(Extension):
    """Parses ``{% generation %}...{% endgeneration %}`` into a call block.

    The block renders its body unchanged, in its own scope like transformers'
    (a ``{% set %}`` inside does not leak out). Its call carries the opening
    and closing line numbers as constants, so the AST says where each block is.
    """

    tags = frozenset({"generation"})  # type: ignore[assignment]

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        end_lineno = parser.stream.current.lineno
        call = self.call_method(GENERATION_METHOD, [nodes.Const(lineno), nodes.Const(end_lineno)])
        return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _generation(self, start_line: int, end_line: int, caller: Macro) -> str:
        # called without the sandbox's per-call checks (``trusted`` below): the body's text was measured
        # when the block's output was joined (``ChatEnvironment.concat``), its loops and calls tick the clock
        body = str(caller())
        if getattr(self.environment, "track_generation", False):
            opening, closing = _generation_marks(start_line)
            return opening + body + closing
        return body


@lru_cache(maxsize=1024)
def _generation_marks(line: int) -> tuple[str, str]:
    """The markers around the text of the generation block opened on template line ``line``."""
    return marker("G", line), marker("g", line)


def is_generation_block(node: nodes.Node) -> bool:
    """True for the call block a ``{% generation %}`` tag parses into."""
    if not isinstance(node, nodes.CallBlock) or not isinstance(node.call, nodes.Call):
        return False
    target = node.call.node
    return isinstance(target, nodes.ExtensionAttribute) and target.name == GENERATION_METHOD


def generation_lines(node: nodes.CallBlock) -> tuple[int, int]:
    """(opening line, closing line) of a generation block."""
    call = node.call
    assert isinstance(call, nodes.Call)
    first, last = call.args[0], call.args[1]
    assert isinstance(first, nodes.Const) and isinstance(last, nodes.Const)
    return int(first.value), int(last.value)


MUTATING_METHODS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "update",
                              "setdefault", "popitem", "add", "discard", "difference_update", "intersection_update",
                              "symmetric_difference_update"})


class _RaisingUndefined(Undefined):
    """Jinja's default undefined, except that an unsafe access raises at once."""

    def __init__(
        self,
        hint: str | None = None,
        obj: Any = jinja2.utils.missing,
        name: str | None = None,
        exc: type[Exception] = jinja2.exceptions.UndefinedError,
    ) -> None:
        if isinstance(exc, type) and issubclass(exc, SecurityError):
            if name in MUTATING_METHODS:
                raise SecurityError(f"the template calls .{name}() on a {type(obj).__name__}, which changes it in "
                                    "place; the immutable sandbox (transformers' too) refuses that")
            raise SecurityError(hint or f"access to {name!r} is not allowed in a chat template")
        super().__init__(hint, obj, name, exc)  # type: ignore[arg-type]


class _TemplateNamespace(Namespace):
    """``namespace()`` for templates: refuses underscore-prefixed attribute names."""

    def __init__(*args: Any, **kwargs: Any) -> None:
        self, rest = args[0], args[1:]
        attrs = dict(*rest, **kwargs)
        for name in attrs:
            _check_attribute_name(name)
        Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _check_attribute_name(name)
        Namespace.__setitem__(self, name, value)


def _check_attribute_name(name: Any) -> None:
    if isinstance(name, str) and name.startswith("_"):
        raise SecurityError(f"a chat template cannot store the underscore-prefixed attribute {name!r}")


class _TemplateDict:
    """``dict(...)`` for templates, without exposing the ``dict`` type itself."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


def _raise_exception(message: str) -> None:
    raise JinjaTemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def pinned_strftime(moment: datetime) -> Callable[[str], str]:
    """A ``strftime_now`` that always formats ``moment`` (deterministic renders)."""

    def strftime_now(fmt: str) -> str:
        return moment.strftime(fmt)

    return strftime_now


TRUSTED = "_wai_trusted"
_DICT_ATTRIBUTES = frozenset(dir(dict))
#: The loop variable's public attributes (``loop.index``, ...); ``cycle`` and ``changed`` are its methods.
_LOOP_ATTRIBUTES = frozenset({"index", "index0", "revindex", "revindex0", "first", "last", "length", "depth",
                              "depth0", "previtem", "nextitem", "cycle", "changed"})


def trusted(function: Callable[..., Any]) -> Callable[..., Any]:
    """Mark one of this package's own callbacks so the sandbox calls it without its per-call checks."""
    setattr(function, TRUSTED, True)
    return function


_NUMBERS = frozenset({int, float})
trusted(GenerationExtension._generation)


_METERED_LOOP = "metered_loop"


class _MeteredCodeGenerator(CodeGenerator):
    """Compiles every ``for`` loop over a metered iterable and every ``~`` through a size check."""

    def visit_For(self, node: nodes.For, frame: Frame) -> None:
        metered = nodes.Call(nodes.EnvironmentAttribute(_METERED_LOOP), [node.iter], [], None, None,
                             lineno=node.lineno)
        super().visit_For(nodes.For(node.target, metered, node.body, node.else_, node.test, node.recursive,
                                    lineno=node.lineno), frame)

    def visit_Call(self, node: nodes.Call, frame: Frame, **kwargs: Any) -> None:
        target = node.node
        if isinstance(target, nodes.EnvironmentAttribute) and target.name == _METERED_LOOP:
            self.write(f"environment.{_METERED_LOOP}(")  # our own call: no sandbox check on it
            self.visit(node.args[0], frame)
            self.write(")")
            return
        generation = isinstance(target, nodes.ExtensionAttribute) and target.name == GENERATION_METHOD
        if generation or (isinstance(target, nodes.Name) and target.name in TRACKER_NAMES
                          and self.environment.track_generation):
            # our own callbacks (the span tracker's, a generation block's), called as plain Python, not
            # through the sandbox's call path once per loop pass and block: only instrument_loops writes the
            # tracker's names (a template using them is refused before it compiles), only the parser the block
            self.visit(target, frame)
            self.write("(")
            for index, argument in enumerate(node.args):
                self.write(", " if index else "")
                self.visit(argument, frame)
            self.write(", caller=caller)" if kwargs.get("forward_caller") else ")")
            return
        super().visit_Call(node, frame, **kwargs)

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        if frame.eval_ctx.volatile or frame.eval_ctx.autoescape:
            super().visit_Concat(node, frame)
            return
        self.write("environment.metered_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


def _meter() -> Meter:
    """The running render's meter; outside a render (jinja folding constants at compile time), a fresh one."""
    return current_meter() or Meter(RenderBudget.from_env())


def _finalize(value: Any) -> Any:
    """Every printed value passes here: a container is measured before ``str()`` expands it."""
    if type(value) is not str:
        meter = _meter()
        meter.size(printed_size(value, meter.budget.max_chars), f"printing a {type(value).__name__}")
    return value


class ChatEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox plus the globals and filters transformers gives chat templates.

    Calls to this package's own span-tracking callbacks (marked with
    ``trusted``; a template cannot set attributes) skip the sandbox's
    callability check, which is most of their cost; every other call is checked
    and ticks the render's budget, like every loop pass.
    """

    track_generation: bool = False
    code_generator_class = _MeteredCodeGenerator
    intercepted_binops = frozenset({"*", "+", "%", "**"})

    # Attribute and item lookups on the messages' plain dicts take a short path with the sandbox's own
    # answer: a dict has no attribute of that name, so the item (or undefined) is what Jinja returns.
    # Jinja gets there through a raised AttributeError (or KeyError) per lookup, most of a render's cost.
    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and type(attribute) is str and attribute not in _DICT_ATTRIBUTES:
            return self._dict_item(obj, attribute)
        if type(obj) is LoopContext and attribute in _LOOP_ATTRIBUTES:
            # ``loop.first`` and friends: jinja's own loop object, whose public attributes the sandbox allows
            # (after four abstract-class checks per lookup, a tenth of a short render)
            return getattr(obj, attribute)
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        if type(obj) is dict and type(argument) is str and argument not in _DICT_ATTRIBUTES:
            return self._dict_item(obj, argument)
        return super().getitem(obj, argument)

    def _dict_item(self, obj: dict[str, Any], name: str) -> Any:
        return obj[name] if name in obj else self.undefined(obj=obj, name=name)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        if getattr(__obj, TRUSTED, False) is True:
            kwargs.pop("_loop_vars", None)
            kwargs.pop("_block_vars", None)
            return __obj(*args, **kwargs)
        meter = _meter()
        meter.tick()
        args = check_call(meter, __obj, args, kwargs)
        return check_result(meter, super().call(__context, __obj, *args, **kwargs), "the call's result")

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        kind = type(left)
        if operator == "+" and kind is type(right) and (kind is str or kind in _NUMBERS):
            if kind is str:  # the common cases (strings, loop counters) first
                _meter().add(len(left) + len(right), "str + str")
            return left + right
        meter = _meter()
        check_binop(meter, operator, left, right)
        return check_result(meter, self.binop_table[operator](left, right), f"the {operator!r} result")

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        formatted = super().wrap_str_format(value)
        if formatted is None:
            return None
        template = value.__self__

        def checked(*args: Any, **kwargs: Any) -> str:
            meter = _meter()
            meter.size(format_size(meter, template, args, kwargs), "the str.format() result")
            return formatted(*args, **kwargs)

        return checked

    def metered_loop(self, iterable: Any) -> Any:
        meter = current_meter()
        return iterable if meter is None else MeteredIterable(iterable, meter)

    def metered_concat(self, parts: tuple[Any, ...]) -> str:
        meter = _meter()
        total = 0
        for part in parts:
            total += len(part) if type(part) is str else printed_size(part, meter.budget.max_chars)
        meter.add(total, "the ~ concatenation")
        return "".join(map(str, parts))

    def concat(self, parts: Any) -> str:  # type: ignore[override]
        """Joins a macro's, a ``{% set %}`` block's or a filter block's output, measured first."""
        if type(parts) is list:
            _meter().add(sum(map(len, parts)), "a macro's or {% set %} block's text")
        return "".join(parts)


def _check_jinja_version() -> None:
    from whileai_datasets.errors import UnsupportedVersionError

    if Version(jinja2.__version__) < MIN_JINJA:
        raise UnsupportedVersionError(
            f"jinja2 {jinja2.__version__} is installed; chat templates need jinja2>={MIN_JINJA}",
            hint="Older versions have known sandbox escapes. Run `pip install -U 'jinja2>=3.1.6'`.",
        )


@lru_cache(maxsize=2)
def chat_environment(track: bool = False) -> ChatEnvironment:
    """The shared environment; ``track=True`` makes generation blocks emit markers."""
    _check_jinja_version()
    env = ChatEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[GenerationExtension, "jinja2.ext.loopcontrols"],
        undefined=_RaisingUndefined,
    )
    env.track_generation = track
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    env.finalize = _finalize
    for name, function in list(env.filters.items()):
        env.filters[name] = guarded_filter(name, function)
    return env


def normalize_newlines(text: str) -> str:
    """The text with ``\\r\\n`` and ``\\r`` as ``\\n``, as Jinja's lexer reads it."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def statement_lists(node: nodes.Node) -> Iterator[list[nodes.Node]]:
    """The lists of statements directly held by ``node`` (bodies, else branches)."""
    for field in ("body", "else_"):
        value = getattr(node, field, None)
        if isinstance(value, list):
            yield value
    if isinstance(node, nodes.If):
        for branch in node.elif_:
            yield from statement_lists(branch)
