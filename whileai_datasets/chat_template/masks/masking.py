"""How a template's rows get their supervised spans: the method, chosen once per template.

* ``"template"``: the template's own ``{% generation %}`` blocks cover the
  assistant output; one render per row.
* ``"patched"``: ``with_generation()`` added verified blocks; one render per row.
* ``"turns"``: no structural patch is possible (the role header and the content
  in one expression, one output writing assistant text in some turns and other
  text in others, tracing that changes the output, ...); each supervised turn
  is located by per-turn rendering (``turns.py``), exact for any template that
  renders the conversation, at two or three extra renders per turn.

Whatever the method, each row's result is checked against its messages
(``mask_check.py``) before it is used. Tool-call arguments are handed to the
template in the encoding it renders: dicts, unless the template fails on them
or prints them as a Python dict (then JSON text), found by rendering a tool
call both ways.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from datetime import datetime
from typing import Any, Literal

from whileai_datasets.chat_template.analysis.classifier import refuse_classifier
from whileai_datasets.chat_template.analysis.probes import (
    PINNED_NOW,
    probe_set,
    role_line,
    with_parts,
    with_string_arguments,
)
from whileai_datasets.chat_template.masks.text_parts import PartsForm, parts_form
from whileai_datasets.chat_template.masks.tool_ids import IdForm, id_form
from whileai_datasets.chat_template.masks.turn_check import cannot_mask_turn_by_turn
from whileai_datasets.chat_template.masks.turn_edges import prompt_prefill, settle_turns
from whileai_datasets.chat_template.masks.turns import TurnRenderer
from whileai_datasets.chat_template.rendering.render import render_plain
from whileai_datasets.chat_template.rendering.spans import RenderedChat
from whileai_datasets.errors import TemplateError

# ``ChatTemplate`` (template.py) builds its plan through this module, so it is typed ``Any`` here
# rather than imported back (no import circle).
ChatTemplate = Any

MaskMethod = Literal["template", "patched", "turns"]
ArgumentEncoding = Literal["dict", "text"]


def supervised_spans(rendered: RenderedChat, loss_mask: Sequence[int]) -> list[tuple[int, int]]:
    """The generation spans of the messages whose loss_mask entry is 1 (``turn_spans``, flattened)."""
    return sorted(span for spans in turn_spans(rendered, loss_mask) for span in spans)


def turn_spans(rendered: RenderedChat, loss_mask: Sequence[int]) -> list[list[tuple[int, int]]]:
    """The generation spans of each message whose loss_mask entry is 1, one list per message."""
    return list(turn_spans_by_message(rendered, loss_mask).values())


def turn_spans_by_message(rendered: RenderedChat, loss_mask: Sequence[int]) -> dict[int, list[tuple[int, int]]]:
    """``turn_spans`` keyed by message index, in message order.

    A block opened outside the message loop (one block around the whole loop)
    belongs to no message; it is split along the messages' rendered spans. An
    empty block (an empty assistant message) supervises nothing, so no token
    that merely straddles its position (the end of a role header) is trained.
    """
    flags = list(loss_mask)
    per_message: dict[int, list[tuple[int, int]]] = {}
    for block in rendered.generation_blocks:
        if block.message is not None:
            if block.message < len(flags) and flags[block.message] and block.end > block.start:
                per_message.setdefault(block.message, []).append((block.start, block.end))
            continue
        for index, (start, end) in enumerate(rendered.message_spans):
            if index < len(flags) and flags[index] and end > start:
                low, high = max(start, block.start), min(end, block.end)
                if high > low:
                    per_message.setdefault(index, []).append((low, high))
    return {index: sorted(per_message[index]) for index in sorted(per_message)}


def _tool_probe_text(text: str, kwargs: Mapping[str, Any], name: str, string_arguments: bool) -> str | None:
    probe = next(p for p in probe_set() if p.name == "tool_call")
    if string_arguments:
        probe = with_string_arguments(probe)
    try:
        return render_plain(text, probe.messages, tools=probe.tools, kwargs=kwargs, now=PINNED_NOW, name=name)
    except TemplateError:
        return None


def argument_encoding(text: str, kwargs: Mapping[str, Any], name: str = "<template>") -> ArgumentEncoding:
    """'dict' unless the template fails on dict arguments or prints them as a Python dict."""
    as_dict = _tool_probe_text(text, kwargs, name, False)
    if as_dict is not None and str({"city": "Paris"}) not in as_dict:
        return "dict"
    as_text = _tool_probe_text(text, kwargs, name, True)
    return "text" if as_text is not None else "dict"


def tool_call_id_form(text: str, kwargs: Mapping[str, Any], arguments: ArgumentEncoding,
                      name: str = "<template>") -> IdForm:
    """Whether the template needs tool-call ids rewritten (``tool_ids.py``), found on the tool-call probe."""
    probe = next(p for p in probe_set() if p.name == "tool_call")
    if arguments == "text":
        probe = with_string_arguments(probe)

    def render(messages: list[dict[str, Any]]) -> str | None:
        try:
            return render_plain(text, messages, tools=probe.tools, kwargs=kwargs, now=PINNED_NOW, name=name)
        except TemplateError:
            return None

    return id_form(render, probe.messages)


def text_parts_form(text: str, kwargs: Mapping[str, Any], name: str = "<template>") -> PartsForm:
    """Whether the template needs text-only content parts joined into strings (``text_parts.py``), found on
    the multi-turn probe with its contents as text parts."""
    probe = with_parts(next(p for p in probe_set() if p.name == "multi_turn"))

    def render(messages: list[dict[str, Any]]) -> str | None:
        try:
            return render_plain(text, messages, kwargs=kwargs, now=PINNED_NOW, name=name)
        except TemplateError:
            return None

    return parts_form(render, probe.messages)


def encode_arguments(messages: Sequence[Mapping[str, Any]], encoding: ArgumentEncoding) -> list[dict[str, Any]]:
    """Canonical messages (arguments as JSON text) with arguments in ``encoding``.

    Arguments that do not decode to a value stay text either way.
    """
    out = []
    for message in messages:
        message = dict(message)
        calls = message.get("tool_calls")
        if calls:
            message["tool_calls"] = [_encode_call(call, encoding) for call in calls]
        out.append(message)
    return out


def encode_arguments_in_place(messages: Sequence[dict[str, Any]], encoding: ArgumentEncoding) -> None:
    """``encode_arguments`` on message dicts the caller owns and gives up (rows just decoded from Arrow):
    only the messages with tool calls change, each getting a new list of calls; no message is copied."""
    for message in messages:
        calls = message.get("tool_calls")
        if calls:
            message["tool_calls"] = [_encode_call(call, encoding) for call in calls]


def _encode_call(call: Mapping[str, Any], encoding: ArgumentEncoding) -> dict[str, Any]:
    function = dict(call.get("function") or {})
    arguments = function.get("arguments")
    if encoding == "dict" and isinstance(arguments, str):
        try:
            function["arguments"] = json.loads(arguments)
        except ValueError:
            pass  # left as text on purpose: the round-trip gate reports it
    elif encoding == "text" and not isinstance(arguments, str) and arguments is not None:
        function["arguments"] = json.dumps(arguments, ensure_ascii=False)
    return {**call, "function": function}


@dataclass(frozen=True)
class MaskPlan:
    """The method a template's rows are masked with, and what it renders with.

    ``reason`` says why a structural patch was not possible (method ``"turns"``), and
    ``refusal_class`` names the kind of refusal when ``with_generation()`` refused.
    """

    method: MaskMethod
    template: ChatTemplate
    arguments: ArgumentEncoding
    reason: str | None = None
    tracking_exact: bool = True
    generation_prompt: str = ""
    original: ChatTemplate | None = None  # the template as given (``template`` is its patched copy)
    refusal_class: str | None = None
    #: with ``refusal_class``: whether per-turn rendering masks the probes (the refusal's own finding)
    turns_mask: bool | None = None
    #: tool-call ids as given, or rewritten into the 9 characters the template requires (``tool_ids.py``)
    tool_call_ids: IdForm = "as_given"
    #: content given as text parts as it is, or joined into one string for a template that concatenates
    #: strings (``text_parts.py``)
    content_parts: PartsForm = "as_given"
    #: the tokens that end generation (``turn_edges.stop_tokens``): one right after a turn is trained with it
    stop_tokens: tuple[str, ...] = ()

    def content_line(self, messages: list[dict[str, Any]], tools: Any, at: tuple[int, int]) -> int | None:
        """The line of the given template whose output holds text ``at`` of the row's rendering (error path)."""
        from whileai_datasets.chat_template.analysis.trace import TracedTemplate

        chat = self.original or self.template
        try:
            traced = TracedTemplate(chat.text, chat.name)
            trace = traced.run(messages, tools, False, dict(chat.special_tokens))
        except TemplateError:
            return None
        holding = [e for e in trace.executions if e.start <= at[0] < e.end]
        if not holding:
            return None
        return traced.unit(min(holding, key=lambda e: e.end - e.start).uid).line

    def render_row(self, messages: list[dict[str, Any]], tools: Any, loss_mask: Sequence[int],
                   now: datetime | None = None, *, method: MaskMethod | None = None,
                   tracked: bool = True) -> tuple[RenderedChat, list[tuple[int, int]]]:
        """One row rendered: its text with spans, and its supervised character spans.

        ``method="turns"`` uses per-turn rendering whatever the plan's method
        (the per-row fallback when a row's blocks fail the check);
        ``tracked=False`` renders it without span markers.
        """
        if (method or self.method) != "turns":
            rendered = self.template.render(messages, tools=tools, now=now)
            by_message = turn_spans_by_message(rendered, loss_mask)
            passes = [rendered.message_spans[k] for k in by_message] if self.tracking_exact else None
            return rendered, self.settled(rendered.text, list(by_message.values()), passes)
        turns = self.turn_renderer(tracked)
        moment = now or datetime.now()
        rendered = turns.render(messages, tools, moment)
        found = turns.spans(rendered, messages, tools, loss_mask, moment)
        return rendered, self.settled(rendered.text, [[span] for span in found])

    def settled(self, text: str, turns: list[list[tuple[int, int]]],
                passes: list[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
        """Each turn's spans under the trained-span rule: the prompt's prefill out, a stop token after it in;
        with ``passes`` (each turn's own loop pass), the turn starts where the text leaves the prompt."""
        return settle_turns(text, turns, prefill=prompt_prefill(self.generation_prompt),
                            stop_tokens=self.stop_tokens, passes=passes, role=role_line(self.generation_prompt))

    def plain(self, messages: list[dict[str, Any]], tools: Any) -> str | None:
        """``messages`` (shaped for this template) rendered with the template as given, as plain text; None
        where it refuses them."""
        chat = self.original or self.template
        try:
            return render_plain(chat.text, messages, tools=tools, kwargs=dict(chat.special_tokens), now=PINNED_NOW,
                                name=chat.name)
        except TemplateError:
            return None

    def rerender(self, tools: Any) -> Callable[[list[dict[str, Any]]], str | None]:
        """``plain`` with the row's tools: how ``dropped.py`` tells a turn's piece rendered elsewhere from
        one merely mentioned."""
        return partial(self.plain, tools=tools)

    def probe_render(self) -> Callable[[list[dict[str, Any]], Any], str | None]:
        """``plain`` of canonical probe messages (arguments as dicts), put in the template's argument
        encoding first (``turn_edges.opener_stops``)."""
        return lambda messages, tools: self.plain(encode_arguments(messages, self.arguments), tools)

    def turn_renderer(self, tracked: bool = True) -> TurnRenderer:
        chat = self.original or self.template
        return TurnRenderer(chat.text, chat.special_tokens, chat.name, self.generation_prompt,
                            self.tracking_exact and tracked)


def plan_masks(chat: ChatTemplate) -> MaskPlan:
    """The method for ``chat`` (see the module docstring).

    Raises:
        TemplateError: a syntax error, generation blocks that do not cover the assistant output, or a
            guard/classifier template (``ClassifierTemplate``).
    """
    report = chat._structure()
    if report.syntax_error:
        chat.with_generation()  # raises, naming the line
    analysis = chat._probe()
    refuse_classifier(analysis)  # no mask method fits a template whose assistant turns are judged input
    arguments = argument_encoding(chat.text, analysis.kwargs, chat.name)
    ids = tool_call_id_form(chat.text, analysis.kwargs, arguments, chat.name)
    forms = {"tool_call_ids": ids, "content_parts": text_parts_form(chat.text, analysis.kwargs, chat.name)}
    exact = report.span_tracking_exact is True  # unknown counts as not exact: plain renders are always right
    prompt = analysis.generation_prompt or ""
    if not exact:
        return MaskPlan("turns", chat, arguments, reason="span markers change this template's output",
                        tracking_exact=False, generation_prompt=prompt, **forms)
    if report.has_generation_block:
        return MaskPlan("template", chat, arguments, generation_prompt=prompt, **forms)
    try:
        patched = chat.with_generation()
    except TemplateError as err:
        reason = f"{err.location}: {err.problem}" if err.location else err.problem
        return MaskPlan("turns", chat, arguments, reason=reason, generation_prompt=prompt,
                        refusal_class=getattr(err, "refusal_class", "unclassified"),
                        turns_mask=not cannot_mask_turn_by_turn(err.hint or ""), **forms)
    return MaskPlan("patched", patched, arguments, generation_prompt=prompt, original=chat, **forms)
