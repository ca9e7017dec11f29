"""What of an assistant turn's own output a template does not render: tool calls, content, reasoning.

A template that renders no tool call (Llama 3.0, Phi-3, Qwen2.5-VL, ...) turns a
tool-call turn into an empty turn: its mask trains the end-of-turn marker
only, and a content check finds nothing wrong because there is no content to
check. So each turn's output is looked up in the rendering, piece by piece:

* content: the text itself, stripped, or the part after a ``</think>``, with
  runs of whitespace compared as one space (a template that trims or
  re-spaces a content still renders it);
* each tool call: its function name, and each argument value (a string as
  written or JSON-escaped, a number as written);
* reasoning (``reasoning_content``, ``thinking`` or ``reasoning``): the same
  way as content. Many templates drop the reasoning of earlier turns on
  purpose, so a missing reasoning is reported, never a refusal by itself.

Each piece is looked up in the message's own rendered pass first, then in the
whole text (a template may write a turn's text in another pass: the mask check
then decides whether it is trained where it is). ``dropped_output`` is what the
mask check (``mask_check.check_row``), ``tokenize`` and the audit share.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from whileai_datasets.chat_template.rendering.spans import RenderedChat
from whileai_datasets.rows.parts import part_text

DropKind = Literal["tool_calls", "content", "reasoning"]
#: the kinds that make a turn's mask wrong (a row with one is refused); reasoning is reported only
REFUSED_KINDS: tuple[DropKind, ...] = ("tool_calls", "content")
REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class DroppedOutput:
    """One piece of a turn's own output that its rendering lacks."""

    message: int
    kind: DropKind
    what: str  # the piece, shortened (a call as ``name(argument)``)

    def describe(self) -> str:
        noun = {"tool_calls": "tool call", "content": "content", "reasoning": "reasoning"}[self.kind]
        return f"the template does not render its {noun} {self.what!r}"


def content_text(message: Mapping[str, Any]) -> str:
    """A message's content as text (the text of list-of-parts content joined,
    wherever each part holds it: ``text``, ``value`` or ``content``)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part_text(dict(part)) or "" for part in content if isinstance(part, Mapping))
    return ""


def squeeze(text: str) -> str:
    """``text`` with every run of whitespace one space, stripped (how trims and re-spacing compare)."""
    return _SPACES.sub(" ", text).strip()


def _forms(text: str) -> list[str]:
    forms = [text, json.dumps(text, ensure_ascii=False)[1:-1], json.dumps(text)[1:-1]]
    if "</think>" in text:
        forms.append(text.rsplit("</think>", 1)[1])
    return [f for f in (squeeze(form) for form in forms) if f]


class _Haystack:
    """The rendered text of one row, whole and per message pass, whitespace squeezed."""

    def __init__(self, rendered: RenderedChat, spans_known: bool) -> None:
        self.text = rendered.text
        self.whole = squeeze(rendered.text)
        self.spans = list(rendered.message_spans) if spans_known else []

    def has(self, index: int, piece: str) -> bool:
        forms = _forms(piece)
        if not forms:
            return True
        if index < len(self.spans) and self.spans[index][1] > self.spans[index][0]:
            own = squeeze(self.text[self.spans[index][0]:self.spans[index][1]])
            if any(form in own for form in forms):
                return True
        return any(form in self.whole for form in forms)


def _leaves(value: Any) -> Iterator[str]:
    """The scalar values of a tool call's arguments, as text (booleans and nulls left out: rendered
    too many ways to look up)."""
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, str):
        if value.strip():
            yield value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield json.dumps(value)


def _arguments(function: Mapping[str, Any]) -> Any:
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def _call_drops(haystack: _Haystack, index: int, call: Mapping[str, Any]) -> str | None:
    function = call.get("function") if isinstance(call.get("function"), Mapping) else call
    name = str(function.get("name") or "")
    missing = [name] if name and not haystack.has(index, name) else []
    missing += [leaf for leaf in _leaves(_arguments(function)) if not haystack.has(index, leaf)]
    if not missing:
        return None
    return f"{name}({', '.join(m[:30] for m in missing if m != name)})" if missing != [name] else name


def call_pieces(message: Mapping[str, Any]) -> list[str]:
    """The function names and argument values of a message's tool calls, as text."""
    out: list[str] = []
    for call in message.get("tool_calls") or []:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function") if isinstance(call.get("function"), Mapping) else call
        name = str(function.get("name") or "")
        out += [name] if name else []
        out += list(_leaves(_arguments(function)))
    return out


def reasoning_text(message: Mapping[str, Any]) -> str:
    """A message's reasoning, under whichever key it has."""
    value = next((message.get(key) for key in REASONING_KEYS if isinstance(message.get(key), str)), "")
    return value or ""


def dropped_output(rendered: RenderedChat, messages: Sequence[Mapping[str, Any]], loss_mask: Sequence[int],
                   *, spans_known: bool = True) -> list[DroppedOutput]:
    """Every piece of a loss-carrying assistant turn's output that ``rendered`` does not hold.

    ``spans_known`` False: the message spans of ``rendered`` were not tracked (each piece is looked up
    in the whole text).
    """
    haystack = _Haystack(rendered, spans_known)
    out: list[DroppedOutput] = []
    for index, (message, flag) in enumerate(zip(messages, loss_mask)):
        if not flag or message.get("role") != "assistant":
            continue
        content = content_text(message)
        if content.strip() and not haystack.has(index, content):
            out.append(DroppedOutput(index, "content", content.strip()[:50]))
        for call in message.get("tool_calls") or []:
            missing = _call_drops(haystack, index, call) if isinstance(call, Mapping) else None
            if missing:
                out.append(DroppedOutput(index, "tool_calls", missing))
        reasoning = reasoning_text(message)
        if reasoning.strip() and not haystack.has(index, reasoning):
            out.append(DroppedOutput(index, "reasoning", reasoning.strip()[:50]))
    return out
