"""Per-turn rendering: the exact fallback for a template no structural patch fits.

The model is prompted with ``render(messages[:k], add_generation_prompt=True)``
and writes until ``render(messages[:k+1])`` ends: that is what it must learn
for assistant turn ``k``. This module applies that definition to one row at a
time with the rules ``probes.expect_turn`` uses for the probe conversations:
the turn starts where the full rendering leaves the generation prompt (text
that agrees with the prompt by chance is told apart by a copy of the turn
whose content starts with another character), and ends where the rendering of
the conversation up to the turn ends, clamped to the turn's own loop pass and
cut before any other message's content. So the role header stays out, the
end-of-turn marker is in, and templates that trim, rewrite or drop parts of a
turn are measured on their real output.

The price: two or three extra renders per supervised assistant turn, so it is
used only where neither the template's own generation blocks nor a verified
patch can serve.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from whileai_datasets.chat_template.analysis.probes import Probe, ProbeRun, expect_turn, foreign_spans, role_line
from whileai_datasets.chat_template.masks.dropped import call_pieces
from whileai_datasets.chat_template.masks.mask_check import content_text, rendered_forms
from whileai_datasets.chat_template.rendering.render import render_chat, render_plain
from whileai_datasets.chat_template.rendering.spans import RenderedChat
from whileai_datasets.errors import TemplateError


class TurnRenderer:
    """Renders one row and finds each supervised assistant turn's span by per-turn rendering."""

    def __init__(self, text: str, kwargs: Mapping[str, Any], name: str, generation_prompt: str,
                 tracking_exact: bool) -> None:
        self.text = text
        self.kwargs = dict(kwargs)
        self.name = name
        self.generation_prompt = generation_prompt
        self.tracking_exact = tracking_exact

    def _plain(self, messages: list[dict[str, Any]], tools: Any, agp: bool, now: datetime) -> str:
        return render_plain(self.text, messages, tools=tools, add_generation_prompt=agp, kwargs=self.kwargs,
                            now=now, name=self.name)

    def render(self, messages: list[dict[str, Any]], tools: Any, now: datetime) -> RenderedChat:
        """The row's text, with message spans when tracking does not change the output."""
        if self.tracking_exact:
            return render_chat(self.text, messages, tools=tools, kwargs=self.kwargs, now=now, name=self.name)
        text = self._plain(messages, tools, False, now)
        return RenderedChat(text, [(0, 0)] * len(messages))

    def spans(self, rendered: RenderedChat, messages: list[dict[str, Any]], tools: Any,
              loss_mask: Sequence[int], now: datetime) -> list[tuple[int, int]]:
        """Supervised character spans of the loss-carrying assistant turns."""
        run = ProbeRun(Probe("row", messages, tools), rendered.text, list(rendered.message_spans))

        def render(prefix: list[dict[str, Any]], agp: bool) -> str:
            return self._plain(prefix, tools, agp, now)

        foreign = _outside_assistant_text(foreign_spans(run), rendered, messages)
        out: list[tuple[int, int]] = []
        for index, (message, flag) in enumerate(zip(messages, loss_mask)):
            if not flag or message.get("role") != "assistant":
                continue
            turn = expect_turn(run, index, render, self.generation_prompt, foreign)
            if turn is not None and turn.must[1] > turn.must[0]:
                out.append(turn.must)
                continue
            found = _generated_after(rendered.text, render, messages, index, max((e for _, e in out), default=0))
            if found is None and self.tracking_exact:
                found = _own_pass(rendered, messages, index, self.generation_prompt, foreign)
            if found is not None:
                out.append(found)
        return sorted(out)


def _outside_assistant_text(foreign: list[tuple[int, int]], rendered: RenderedChat,
                            messages: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """``foreign`` without the places that lie inside an assistant's own rendered content.

    An answer that quotes the question must not end its own turn at the quote.
    """
    own = []
    for index, message in enumerate(messages):
        content = content_text(message)
        if message.get("role") != "assistant" or not content.strip():
            continue
        start, end = rendered.message_spans[index] if index < len(rendered.message_spans) else (0, 0)
        low, high = (start, end) if end > start else (0, len(rendered.text))
        for form in rendered_forms(content):
            at = rendered.text.rfind(form, low, high)
            if at >= 0:
                own.append((at, at + len(form)))
                break
    return [(a, e) for a, e in foreign if not any(s <= a and e <= t for s, t in own)]


def _own_pass(rendered: RenderedChat, messages: list[dict[str, Any]], k: int, generation_prompt: str,
              foreign: list[tuple[int, int]]) -> tuple[int, int] | None:
    """Turn k as its own loop pass writes it, past the generation prompt's role line where the pass starts
    with it: for a template whose history renders differently around every turn (vLLM's Mistral tool
    templates write the system prompt into the last user message, so neither the prompt nor the history
    is a prefix of the rendering with the turn). None where the pass holds none of the turn's output, or
    any other message's content (``foreign``), or where a later message's content is written before it.
    """
    text = rendered.text
    start, end = rendered.message_spans[k] if k < len(rendered.message_spans) else (0, 0)
    if end <= start:
        return None
    line = role_line(generation_prompt)
    if line.strip() and text.startswith(line.lstrip(), start):
        start += len(line.lstrip())
    own = text[start:end]
    pieces = [content_text(messages[k]).strip(), *call_pieces(messages[k])]
    if not any(p and p in own for p in pieces) or any(a < end and start < e for a, e in foreign):
        return None
    later = (content_text(m).strip() for m in messages[k + 1:])
    if any(0 <= text.find(piece) < start for piece in later if piece):  # written after what it had not seen
        return None
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _generated_after(text: str, render: Any, messages: list[dict[str, Any]], k: int,
                     cursor: int) -> tuple[int, int] | None:
    """Turn k as what the model writes after its prompt, found once in ``text`` past ``cursor``.

    For a template that moves text around the history once a turn exists (Mistral writes the tool
    definitions before the last user message, so the prompt of an earlier turn is no prefix of the whole
    rendering): ``render(messages[:k+1])`` starts with the prompt ``render(messages[:k], True)``, and what
    it adds holds the turn's output. None where it is not so, where that text is not found exactly once, or
    where a later message's content is written before it (the text there would follow what the model had
    not seen yet).
    """
    try:
        prompt, alone = render(messages[:k], True), render(messages[: k + 1], False)
    except TemplateError:
        return None
    generated = alone[len(prompt):] if alone.startswith(prompt) else ""
    pieces = [content_text(messages[k]).strip(), *call_pieces(messages[k])]
    if not generated.strip() or not any(p and p in generated for p in pieces):
        return None
    at = text.find(generated, cursor)
    if at < 0 or text.find(generated, at + 1) >= 0:
        return None
    later = (content_text(m).strip() for m in messages[k + 1:])
    if any(0 <= text.find(piece) < at for piece in later if piece):
        return None
    return at, at + len(generated)
