"""Parse a template with jinja2's own parser and remember where each node came from.

Jinja's AST carries line numbers only. Patching needs character offsets, so
this module lexes the text with jinja2's lexer, gives every token its offset
(walking the source in order: tokens only ever skip whitespace that the
lexer stripped), and feeds those tokens to a ``jinja2.parser.Parser`` subclass
that records, for each statement, top-level ``{{ }}`` expression and operand,
the tokens it starts and ends at. Text data keeps its token through a ``str``
subclass. Nothing here inspects template text with a regular expression.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jinja2 import nodes
from jinja2.exceptions import TemplateSyntaxError
from jinja2.lexer import Token, TokenStream
from jinja2.parser import Parser

from whileai_datasets.chat_template.sandbox.environment import (
    chat_environment,
    normalize_newlines,
)
from whileai_datasets.errors import TemplateError

_BEGIN_KINDS = {"block_begin": "block", "variable_begin": "variable", "comment_begin": "comment"}
_END_KINDS = {"block_end": "block", "variable_end": "variable", "comment_end": "comment"}


@dataclass(frozen=True)
class Tok:
    """One lexer token with its place in the (newline-normalized) source.

    ``core_end`` excludes whitespace the token swallowed (``-%}  \\n``);
    ``mod`` is the whitespace-control sign on the tag's inner side
    (``-``, ``+`` or ``""``); ``kind`` is block/variable/comment/raw/data/other.
    """

    type: str
    start: int
    end: int
    core_end: int
    kind: str
    mod: str
    index: int
    line: int


class Located(str):
    """A text-data value that remembers its token."""

    tok: Tok


def data_token(node: nodes.Node) -> Tok | None:
    """The token a text-data node was read from (None for any other node)."""
    if isinstance(node, nodes.TemplateData) and isinstance(node.data, Located):
        return node.data.tok
    return None


@dataclass
class SourceMap:
    """The parsed template and where its pieces are in ``text``."""

    text: str
    name: str
    ast: nodes.Template
    tokens: list[Tok]
    starts: dict[int, Tok] = field(default_factory=dict)
    ends: dict[int, Tok] = field(default_factory=dict)
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)
    branch_ends: dict[int, Tok] = field(default_factory=dict)

    def tag_range(self, node: nodes.Node) -> tuple[Tok, Tok] | None:
        """(first token, last token) of a statement or a ``{{ }}`` output child."""
        tok = data_token(node)
        if tok is not None:
            return tok, tok
        first, last = self.starts.get(id(node)), self.ends.get(id(node))
        return (first, last) if first is not None and last is not None else None

    def expr_text(self, node: nodes.Node) -> str | None:
        """The source text of an expression, when the parser recorded it."""
        span = self.spans.get(id(node))
        return None if span is None else self.text[span[0] : span[1]].strip()

    def next_token(self, tok: Tok) -> Tok | None:
        """The token after ``tok`` that is not whitespace inside a tag."""
        for other in self.tokens[tok.index + 1 :]:
            if other.type != "whitespace":
                return other
        return None


def _tag_mod(value: str, begin: bool) -> str:
    if begin:
        sign = value[2:3]
    else:
        sign = value.strip()[:1]
    return sign if sign in ("-", "+") else ""


def _make_tok(kind_type: str, value: str, start: int, index: int, line: int) -> Tok:
    end = start + len(value)
    if kind_type in _BEGIN_KINDS:
        return Tok(kind_type, start, end, end, _BEGIN_KINDS[kind_type], _tag_mod(value, True), index, line)
    if kind_type in _END_KINDS:
        core = start + len(value.rstrip())
        return Tok(kind_type, start, end, core, _END_KINDS[kind_type], _tag_mod(value, False), index, line)
    if kind_type == "raw_begin":
        return Tok(kind_type, start, end, end, "raw", _tag_mod(value, True), index, line)
    if kind_type == "raw_end":
        core = start + len(value.rstrip())
        sign = value.rstrip()[-3:-2]
        return Tok(kind_type, start, end, core, "raw", sign if sign in ("-", "+") else "", index, line)
    return Tok(kind_type, start, end, end, "data" if kind_type == "data" else "other", "", index, line)


def locate_tokens(text: str, name: str) -> list[tuple[Tok, int, str]]:
    """Every raw token of ``text`` as (located token, line number, raw value)."""
    env = chat_environment()
    out: list[tuple[Tok, int, str]] = []
    cursor = 0
    for lineno, kind_type, value in env.lexer.tokeniter(text, name):
        start = cursor
        while not text.startswith(value, start):
            if start >= len(text) or not text[start].isspace():
                raise TemplateError(
                    f"could not place the token {value!r} in the template text",
                    location=f"{name}:{lineno}",
                    hint="This is a bug in whileai_datasets' template reader; please report it with the template.",
                )
            start += 1
        tok = _make_tok(kind_type, value, start, len(out), lineno)
        out.append((tok, lineno, value))
        cursor = tok.end
    return out


class _LocatingParser(Parser):
    """A jinja2 parser that records the tokens each node starts and ends at."""

    def __init__(self, source_map: SourceMap, stream: TokenStream, tok_of: dict[int, Tok]) -> None:
        env = chat_environment()
        super().__init__(env, source_map.text, source_map.name)
        self.stream = stream
        self._map = source_map
        self._tok_of = tok_of

    def _current(self) -> Tok | None:
        return self._tok_of.get(id(self.stream.current))

    def parse_statement(self) -> nodes.Node | list[nodes.Node]:
        name_tok = self._current()
        rv = super().parse_statement()
        end_tok = self._current()
        begin = None if name_tok is None else self._previous_tag(name_tok)
        for node in rv if isinstance(rv, list) else [rv]:
            if begin is not None and end_tok is not None:
                self._map.starts[id(node)] = begin
                self._map.ends[id(node)] = end_tok
        return rv

    def parse_statements(self, end_tokens: tuple[str, ...], drop_needle: bool = False) -> list[nodes.Node]:
        body = super().parse_statements(end_tokens, drop_needle=False)
        name_tok = self._current()
        closing = None if name_tok is None else self._previous_tag(name_tok)
        if closing is not None:
            self._map.branch_ends[id(body)] = closing  # the tag that ends this body
        if drop_needle:
            next(self.stream)
        return body

    def _previous_tag(self, tok: Tok) -> Tok | None:
        tokens = self._map.tokens
        index = tok.index - 1
        while index >= 0 and tokens[index].type == "whitespace":
            index -= 1
        return tokens[index] if index >= 0 else None

    def parse_tuple(self, *args: Any, **kwargs: Any) -> Any:
        first = self._current()
        rv = self._recorded(super().parse_tuple, *args, **kwargs)
        before = None if first is None else self._previous_tag(first)
        if before is not None and before.type == "variable_begin":
            end_tok = self._current()
            if end_tok is not None and end_tok.type == "variable_end":
                self._map.starts[id(rv)] = before
                self._map.ends[id(rv)] = end_tok
        return rv

    def _recorded(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        first = self._current()
        rv = method(*args, **kwargs)
        last = self._current()
        if first is not None and last is not None and isinstance(rv, nodes.Node):
            self._map.spans[id(rv)] = (first.start, last.start)
        return rv

    def parse_math1(self) -> nodes.Expr:
        return self._recorded(super().parse_math1)  # type: ignore[no-any-return]

    def parse_concat(self) -> nodes.Expr:
        return self._recorded(super().parse_concat)  # type: ignore[no-any-return]

    def parse_math2(self) -> nodes.Expr:
        return self._recorded(super().parse_math2)  # type: ignore[no-any-return]


def _wrapped_tokens(located: list[tuple[Tok, int, str]], name: str) -> tuple[list[Token], dict[int, Tok]]:
    env = chat_environment()
    wrapped: list[Token] = []
    tok_of: dict[int, Tok] = {}
    for tok, lineno, value in located:
        for token in env.lexer.wrap(iter([(lineno, tok.type, value)]), name):
            if token.type == "data":
                data = Located(token.value)
                data.tok = tok
                token = Token(token.lineno, token.type, data)
            wrapped.append(token)
            tok_of[id(token)] = tok
    return wrapped, tok_of


def parse_located(text: str, name: str = "<template>") -> SourceMap:
    """Parse ``text`` (newlines normalized) and record where its nodes are.

    Raises:
        TemplateError: the template has a syntax error (location names the line).
    """
    text = normalize_newlines(text)
    try:
        located = locate_tokens(text, name)
        wrapped, tok_of = _wrapped_tokens(located, name)
        stream = TokenStream(iter(wrapped), name, None)
        source_map = SourceMap(text, name, nodes.Template([]), [t for t, _, _ in located])
        parser = _LocatingParser(source_map, stream, tok_of)
        source_map.ast = parser.parse()
    except TemplateSyntaxError as err:
        raise syntax_error(err, name) from err
    return source_map


def syntax_error(err: TemplateSyntaxError, name: str) -> TemplateError:
    """The TemplateError for a Jinja syntax error, located at its line."""
    return TemplateError(
        f"syntax error: {err.message}",
        location=f"{name}:{err.lineno}",
        hint="Fix the template at that line; Jinja cannot parse it, so it cannot be inspected or rendered.",
    )
