"""Check a row's supervised text against its messages: never a silent wrong mask.

Whatever method found the supervised spans (a template's own generation
blocks, a patched template, per-turn rendering), the result is checked row by
row against the messages themselves:

* the content of every assistant message that carries loss, as the template
  renders it, lies inside supervised text;
* its tool calls (name and argument values), where the turn's own pass
  renders them, are supervised too;
* no content of a masked message (system, user, tool, or an assistant turn
  with loss 0) is supervised;
* nothing of a loss-carrying turn's output is missing from the rendering
  (``dropped.py``): a template that renders no tool call, or drops a content
  beside a call, would train the turn's end marker alone; such a row fails.

"As the template renders it": templates trim contents, drop a ``<think>``
block from history turns or keep only the text after ``</think>``. The check
looks for the content, its stripped form and the text after its last
``</think>``, inside the message's own rendered span (the pass of the message
loop that rendered it), and uses the longest form it finds. Whitespace the
template writes around a content it trims is not part of the content.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from whileai_datasets.chat_template.rendering.spans import RenderedChat
from whileai_datasets.chat_template.masks.dropped import (
    REFUSED_KINDS,
    DroppedOutput,
    Rerender,
    call_pieces,
    content_text,
    dropped_output,
)

THINK_CLOSE = "</think>"


@dataclass(frozen=True)
class MaskViolation:
    """What is wrong with one row's supervised text; ``at`` is the content's rendered place, if found."""

    message: int
    role: str
    problem: str
    line: int | None
    at: tuple[int, int] | None = None
    #: what of the turn's own output the render lacks (``dropped.DropKind``), when that is the violation
    dropped: str | None = None


def rendered_forms(content: str) -> list[str]:
    """The forms a template may render ``content`` in, longest first."""
    forms = {content, content.strip()}
    if THINK_CLOSE in content:
        forms.add(content.rsplit(THINK_CLOSE, 1)[1].strip())
    return sorted((f for f in forms if f), key=len, reverse=True)


class Coverage:
    """Membership tests against sorted, disjoint character spans."""

    def __init__(self, spans: Sequence[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for start, end in sorted(s for s in spans if s[1] > s[0]):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self.starts = [s for s, _ in merged]
        self.ends = [e for _, e in merged]

    def covers(self, start: int, end: int) -> bool:
        """Every character of ``[start, end)`` is inside one span."""
        index = bisect_right(self.starts, start) - 1
        return index >= 0 and self.ends[index] >= end

    def touches(self, start: int, end: int) -> bool:
        """Some character of ``[start, end)`` is inside a span."""
        index = bisect_right(self.starts, end - 1) - 1
        return index >= 0 and self.ends[index] > start

    def first_gap(self, start: int, end: int) -> int:
        """The first character of ``[start, end)`` outside every span."""
        position = start
        while position < end:
            index = bisect_right(self.starts, position) - 1
            if index < 0 or self.ends[index] <= position:
                return position
            position = self.ends[index]
        return end


def _find(text: str, form: str, span: tuple[int, int]) -> tuple[int, int] | None:
    start, end = span if span[1] > span[0] else (0, len(text))
    at = text.rfind(form, start, end)
    return None if at < 0 else (at, at + len(form))


def _locate(text: str, content: str, span: tuple[int, int]) -> tuple[int, int] | None:
    found = _find(text, content, span) if content else None  # the longest form first: most templates render it
    if found is not None:
        return found
    for form in rendered_forms(content):
        found = _find(text, form, span) if form != content else None
        if found is not None:
            return found
    return None


def _line(rendered: RenderedChat, message: int) -> int | None:
    lines = [b.line for b in rendered.generation_blocks if b.message == message]
    return lines[0] if lines else None


def check_row(rendered: RenderedChat, messages: Sequence[Mapping[str, Any]], loss_mask: Sequence[int],
              spans: Sequence[tuple[int, int]], *, spans_known: bool = True, rerender: Rerender | None = None,
              dropped: Sequence[DroppedOutput] | None = None) -> MaskViolation | None:
    """The first violation of the rules above in one rendered row (None: the mask is right).

    ``spans`` are the supervised character spans; ``spans_known`` is False
    when the message spans of ``rendered`` could not be tracked (contents are
    then searched in the whole text). ``rerender`` renders the row's messages
    again (``dropped.py``: a piece found only outside its turn's pass is
    looked up by stand-in); ``dropped``: ``dropped_output`` of the row, when
    the caller has it already.
    """
    text, coverage = rendered.text, Coverage(spans)
    if dropped is None:
        dropped = dropped_output(rendered, messages, loss_mask, spans_known=spans_known, rerender=rerender)
    dropped = [d for d in dropped if d.kind in REFUSED_KINDS and d.trained]
    if dropped:
        first = dropped[0].message
        problem = "; ".join(d.describe() for d in dropped if d.message == first)
        return MaskViolation(first, "assistant", f"{problem}: the turn would train without it",
                             _line(rendered, first), dropped=dropped[0].kind)
    supervised_contents = [content_text(m) for m, f in zip(messages, loss_mask) if f and m.get("role") == "assistant"]
    for index, (message, flag) in enumerate(zip(messages, loss_mask)):
        content = content_text(message)
        span = rendered.message_spans[index] if spans_known and index < len(rendered.message_spans) else (0, 0)
        if not content.strip():
            problem = _unsupervised_call(text, coverage, message, span) if flag else None
            if problem:
                return MaskViolation(index, str(message.get("role")), problem, _line(rendered, index))
            continue
        found = _locate(text, content, span)
        role = str(message.get("role"))
        if flag and role == "assistant":
            problem = _missing(text, coverage, found, span) or _unsupervised_call(text, coverage, message, span)
        elif span[1] > span[0]:
            problem = _leaked(text, coverage, found, role)
        elif not any(content.strip() in other for other in supervised_contents):
            problem = _leaked_everywhere(text, coverage, content, role)
        else:
            problem = None
        if problem:
            return MaskViolation(index, role, problem, _line(rendered, index), found)
    return None


def _leaked(text: str, coverage: Coverage, found: tuple[int, int] | None, role: str) -> str | None:
    if found is None or not coverage.touches(*found):
        return None
    what = "its content is supervised, but its loss_mask entry is 0" if role == "assistant" else \
        f"the {role} content is supervised"
    return f"{what} ({text[found[0]:found[1]][:50]!r})"


def _leaked_everywhere(text: str, coverage: Coverage, content: str, role: str) -> str | None:
    """A message outside any tracked pass: flagged when every place its content appears is supervised."""
    for form in rendered_forms(content):
        places = []
        at = text.find(form)
        while at >= 0:
            places.append((at, at + len(form)))
            at = text.find(form, at + 1)
        if places:
            if all(coverage.touches(*place) for place in places):
                return _leaked(text, coverage, places[-1], role)
            return None
    return None


def _missing(text: str, coverage: Coverage, found: tuple[int, int] | None, span: tuple[int, int]) -> str | None:
    if found is not None:
        start, end = found
        while start < end and text[start].isspace():  # whitespace a template writes around a content
            start += 1                                # it trims (a header's line break) is not the content
        while end > start and text[end - 1].isspace():
            end -= 1
        gap = coverage.first_gap(start, end)
        if gap < end:
            return (f"the assistant content carries loss but {text[gap:end][:50]!r} of it is not "
                    "supervised")
        return None
    if span[1] > span[0] and not coverage.touches(*span):
        return "the assistant message carries loss but none of its rendered text is supervised"
    return None


def _unsupervised_call(text: str, coverage: Coverage, message: Mapping[str, Any], span: tuple[int, int]) -> str | None:
    """A tool call of a loss-carrying turn rendered in the turn's own pass but not trained (None: all are)."""
    if span[1] <= span[0] or message.get("role") != "assistant":
        return None
    for piece in call_pieces(message):
        at = text.find(piece, *span)  # the call itself, before any result a template folds into the pass
        if at >= 0 and coverage.first_gap(at, at + len(piece)) < at + len(piece):
            return f"its tool call carries loss but {piece[:50]!r} of it is not supervised"
    return None
