"""Rewrite template text next to tokens without changing its whitespace behaviour.

Jinja's whitespace control (``trim_blocks``, ``lstrip_blocks``, the ``-`` and
``+`` signs) depends on what sits next to a tag, so an inserted tag takes its
signs from its neighbours:

* placed where an original tag ``X`` starts, its left sign is ``X``'s (for a
  ``{{`` tag, which never lstrips, ``-`` stays ``-`` and nothing becomes ``+``):
  whitespace ``X`` would have stripped is now stripped by the inserted tag;
* placed where an original tag ``Y`` ends, its right sign is ``Y``'s;
* placed inside text, it gets ``+`` on that side, so it neither strips nor
  trims anything.

Tags placed directly against another tag need no sign on that side.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from whileai_datasets.chat_template.sandbox.source import SourceMap, Tok

_BEGINS = ("block_begin", "variable_begin", "comment_begin", "raw_begin")
_ENDS = ("block_end", "variable_end", "comment_end", "raw_end")


@dataclass(frozen=True)
class Raw:
    """Original source text ``text[start:end]``."""

    start: int
    end: int


@dataclass(frozen=True)
class Tag:
    """An inserted ``{% body %}`` tag (signs decided when rendered)."""

    body: str


@dataclass(frozen=True)
class Var:
    """An inserted ``{{ expr }}`` with explicit signs (taken from the tag it replaces)."""

    expr: str
    left: str
    right: str


Part = Raw | Tag | Var


@dataclass(frozen=True)
class Edit:
    """Replace ``text[start:end]`` by ``parts``."""

    start: int
    end: int
    parts: tuple[Part, ...]


def _sign(tok: Tok) -> str:
    if tok.kind == "variable":
        return "-" if tok.mod == "-" else "+"
    return tok.mod


class Composer:
    """Turns parts into text, choosing each inserted tag's whitespace signs."""

    def __init__(self, source: SourceMap) -> None:
        self.text = source.text
        self._begin_at = {t.start: t for t in source.tokens if t.type in _BEGINS}
        self._end_at = {t.core_end: t for t in source.tokens if t.type in _ENDS}
        self._begins = sorted(self._begin_at)
        self._ends = sorted(self._end_at)

    def left_rule(self, position: int) -> str:
        """Sign for the left side of a tag inserted at ``position``."""
        if position in self._begin_at:
            sign = _sign(self._begin_at[position])
        else:
            sign = "" if position in self._end_at else "+"
        if sign == "+" and (not self._lstrip_applies(position) or self._stripped_before(position)):
            return ""  # plain `{%` strips nothing here either (and matches trl's tag detection)
        return sign

    def right_rule(self, position: int) -> str:
        """Sign for the right side of a tag inserted at ``position``."""
        if position in self._end_at:
            sign = _sign(self._end_at[position])
        else:
            sign = "" if position in self._begin_at else "+"
        if sign == "+" and (self.text[position : position + 1] != "\n" or self._stripped_after(position)):
            return ""  # no newline for trim_blocks to remove, or the next tag strips it anyway
        return sign

    def _stripped_after(self, position: int) -> bool:
        index = bisect_left(self._begins, position)
        if index == len(self._begins):
            return False
        following = self._begin_at[self._begins[index]]
        return following.mod == "-" and not self.text[position : following.start].strip()

    def _stripped_before(self, position: int) -> bool:
        index = bisect_right(self._ends, position) - 1
        if index < 0:
            return False
        previous = self._end_at[self._ends[index]]
        return previous.mod == "-" and not self.text[previous.core_end : position].strip()

    def _lstrip_applies(self, position: int) -> bool:
        line = self.text[:position].rsplit("\n", 1)[-1]
        return bool(line) and not line.strip(" \t")

    def compose(self, edit: Edit) -> str:
        parts = edit.parts
        out = []
        for index, part in enumerate(parts):
            if isinstance(part, Raw):
                out.append(self.text[part.start : part.end])
            elif isinstance(part, Var):
                out.append(f"{{{{{part.left} {part.expr} {part.right}}}}}")
            else:
                left = self._left_of(parts, index, edit.start)
                right = self._right_of(parts, index, edit.end)
                out.append(f"{{%{left} {part.body} {right}%}}")
        return "".join(out)

    def _left_of(self, parts: tuple[Part, ...], index: int, start: int) -> str:
        for part in reversed(parts[:index]):
            if isinstance(part, Raw):
                if part.start == part.end:
                    continue
                return self.left_rule(part.end)
            return ""
        return self.left_rule(start)

    def _right_of(self, parts: tuple[Part, ...], index: int, end: int) -> str:
        for part in parts[index + 1 :]:
            if isinstance(part, Raw):
                if part.start == part.end:
                    continue
                return self.right_rule(part.start)
            return ""
        return self.right_rule(end)

    def apply(self, edits: list[Edit]) -> str:
        """The text with every (non-overlapping) edit applied."""
        text = self.text
        for edit in sorted(edits, key=lambda e: e.start, reverse=True):
            text = text[: edit.start] + self.compose(edit) + text[edit.end :]
        return text


def literal(value: str) -> str:
    """A Jinja string literal that evaluates to ``value``."""
    escapes = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return "'" + "".join(escapes.get(ch, ch) for ch in value) + "'"
