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

Each piece is looked up in the message's own rendered pass first. A piece
found only elsewhere is no proof: a call's function name is in the tool list
the template writes, its argument often in the user's question (Granite 3 and
LFM2 render no call, and such a turn would train its end marker alone). So
where a ``rerender`` is given, the row is rendered once more with each such
turn's pieces swapped for unique stand-ins: a piece is rendered when its
stand-in is in that text (anywhere: a template may write a turn's text in
another pass, the mask check then decides whether it is trained where it is).
Without one, a piece found anywhere counts as rendered.

A turn with no loss is looked at too (``history=True``): a template that drops
a call or the text beside it from an earlier turn (gpt-oss, Llama 3.1) renders
the row partially, which trains nothing wrong but shows the model a history
it did not write; tokenize names such rows. ``runs_on`` finds a turn whose
text the template runs into the next message with no end of its own (Gemma 4's
v5 template writes the text beside a call after the tool results, joined to the
next turn's text).

``dropped_output`` is what the mask check (``mask_check.check_row``),
``tokenize`` and the audit share.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
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
    #: whether the turn carries loss (a turn without is only rendered partially: named, not refused)
    trained: bool = True

    def describe(self) -> str:
        noun = {"tool_calls": "tool call", "content": "content", "reasoning": "reasoning"}[self.kind]
        return f"the template does not render its {noun} {self.what!r}"


#: renders a row's messages (shaped as the template takes them) to plain text; None: the template refuses
Rerender = Callable[[list[dict[str, Any]]], "str | None"]


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
    escaped = json.dumps(text, ensure_ascii=False)[1:-1]
    forms = [text, escaped, escaped if text.isascii() else json.dumps(text)[1:-1]]
    if "</think>" in text:
        forms.append(text.rsplit("</think>", 1)[1])
    return [f for f in (squeeze(form) for form in forms) if f]


class _Haystack:
    """The rendered text of one row, whole and per message pass, whitespace squeezed; with ``rerender``,
    the stand-in render that tells a piece rendered elsewhere from one that is merely mentioned."""

    def __init__(self, rendered: RenderedChat, spans_known: bool, messages: Sequence[Mapping[str, Any]],
                 rerender: Rerender | None = None) -> None:
        self.text = rendered.text
        self._whole: str | None = None  # the whole text squeezed, made when a piece is not in its own pass
        self.spans = list(rendered.message_spans) if spans_known else []
        self.messages = messages
        self.rerender = rerender
        self._stand_ins: tuple[dict[tuple[int, str], str], str] | None = None
        self._passes: dict[int, str] = {}

    def has(self, index: int, piece: str) -> bool:
        if index < len(self.spans) and piece.strip():  # the piece as written inside its own pass: squeezed,
            start, end = self.spans[index]                # it is inside the squeezed pass too
            if end > start and self.text.find(piece, start, end) >= 0:
                return True
        forms = _forms(piece)
        if not forms:
            return True
        own = self._own(index)
        if own and any(form in own for form in forms):
            return True
        if not any(form in self.whole for form in forms):
            return False
        return self._stand_in_rendered(index, piece)

    @property
    def whole(self) -> str:
        """The whole text, whitespace squeezed (made once, when first looked in)."""
        if self._whole is None:
            self._whole = squeeze(self.text)
        return self._whole

    def _own(self, index: int) -> str:
        """Message ``index``'s own pass, whitespace squeezed ('' where untracked), computed once."""
        if index not in self._passes:
            start, end = self.spans[index] if index < len(self.spans) else (0, 0)
            self._passes[index] = squeeze(self.text[start:end]) if end > start else ""
        return self._passes[index]

    def _stand_in_rendered(self, index: int, piece: str) -> bool:
        """Whether the stand-in of ``piece`` (a piece of message ``index`` found outside its own pass)
        reaches the render; True where no stand-in render can tell (no rerender, or it fails)."""
        if self.rerender is None:
            return True
        if self._stand_ins is None:
            swapped, names = with_stand_ins(self.messages)
            text = self.rerender(swapped)
            self._stand_ins = (names, squeeze(text) if text is not None else "")
        names, text = self._stand_ins
        stand_in = names.get((index, piece))
        return stand_in is None or not text or stand_in in text


def with_stand_ins(messages: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], dict[tuple[int, str], str]]:
    """The messages with each assistant turn's content, call names and argument values swapped for unique
    stand-ins (``(message, piece)`` -> stand-in, as rendered), the rest as given. A number stays a number
    (a template may format it), of digits no row is likely to hold."""
    names: dict[tuple[int, str], str] = {}

    def stand_in(index: int, piece: str, kind: str) -> str:
        if (index, piece) not in names:
            names[(index, piece)] = f"917{len(names)}3{index}9" if kind == "n" else f"Zq{index}{kind}{len(names)}x"
        return names[(index, piece)]

    def swap(index: int, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {key: swap(index, item) for key, item in value.items()}
        if isinstance(value, list):
            return [swap(index, item) for item in value]
        if isinstance(value, str) and value.strip():
            return stand_in(index, value, "a")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(stand_in(index, json.dumps(value), "n"))
        return value

    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        message = dict(message)
        if message.get("role") == "assistant":
            content = content_text(message)
            if isinstance(message.get("content"), str) and content.strip():
                message["content"] = stand_in(index, content, "c")
            calls = [_swap_call(call, index, swap, stand_in) if isinstance(call, Mapping) else call
                     for call in message.get("tool_calls") or []]
            if calls:
                message["tool_calls"] = calls
        out.append(message)
    return out, names


def _swap_call(call: Mapping[str, Any], index: int, swap: Callable[[int, Any], Any],
               stand_in: Callable[[int, str, str], str]) -> dict[str, Any]:
    nested = isinstance(call.get("function"), Mapping)
    function = dict(call["function"] if nested else call)
    name = str(function.get("name") or "")
    if name:
        function["name"] = stand_in(index, name, "f")
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            function["arguments"] = json.dumps(swap(index, json.loads(arguments)), ensure_ascii=False)
        except ValueError:
            function["arguments"] = swap(index, arguments)
    else:
        function["arguments"] = swap(index, arguments)
    return {**call, "function": function} if nested else function


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
                   *, spans_known: bool = True, rerender: Rerender | None = None,
                   history: bool = False) -> list[DroppedOutput]:
    """Every piece of a loss-carrying assistant turn's output that ``rendered`` does not hold.

    ``spans_known`` False: the message spans of ``rendered`` were not tracked (each piece is looked up
    in the whole text). ``rerender``: how to render the row's messages again (see the module docstring).
    ``history``: the assistant turns without loss too (their content and tool calls, not their
    reasoning, which many templates drop from the history on purpose), as ``trained=False``.
    """
    haystack = _Haystack(rendered, spans_known, messages, rerender)
    out: list[DroppedOutput] = []
    for index, (message, flag) in enumerate(zip(messages, loss_mask)):
        if message.get("role") != "assistant" or not (flag or history):
            continue
        trained = bool(flag)
        content = content_text(message)
        if content.strip() and not haystack.has(index, content):
            out.append(DroppedOutput(index, "content", content.strip()[:50], trained))
        for call in message.get("tool_calls") or []:
            missing = _call_drops(haystack, index, call) if isinstance(call, Mapping) else None
            if missing:
                out.append(DroppedOutput(index, "tool_calls", missing, trained))
        reasoning = reasoning_text(message) if trained else ""
        if reasoning.strip() and not haystack.has(index, reasoning):
            out.append(DroppedOutput(index, "reasoning", reasoning.strip()[:50]))
    return out


def runs_on(rendered: RenderedChat, messages: Sequence[Mapping[str, Any]], loss_mask: Sequence[int]) -> list[int]:
    """The loss-carrying assistant turns whose text the template runs straight into a later message's
    text, with no end of their own between (only whitespace): what trains there is not what the model
    writes at inference, where the turn ends before the next one starts."""
    text, spans = rendered.text, rendered.message_spans
    out: list[int] = []
    stripped: list[str] | None = None  # each message's text stripped, made once per row when a turn needs it
    for index, (message, flag) in enumerate(zip(messages, loss_mask)):
        if not flag or message.get("role") != "assistant" or index >= len(spans):
            continue
        if stripped is None:
            stripped = [content_text(m).strip() for m in messages]
        content = stripped[index]
        if not content:
            continue
        start, end = spans[index]
        at = text.rfind(content, start, end) if end > start else -1
        if at < 0:
            continue
        after = at + len(content)
        while after < len(text) and text[after].isspace():
            after += 1
        later = tuple(piece for piece in stripped[index + 1:] if piece)
        if later and text.startswith(later, after):
            out.append(index)
    return out


def partly_rendered(message: Mapping[str, Any], dropped: Sequence[DroppedOutput]) -> bool:
    """Whether an assistant turn's render keeps some of its output (its text, one of its calls) and lacks
    the rest (``dropped``: ``dropped_output`` of that turn): the text beside a call that Llama 3.1 drops."""
    pieces = int(bool(content_text(message).strip())) + len(message.get("tool_calls") or [])
    lost = sum(1 for d in dropped if d.kind in REFUSED_KINDS)
    return 0 < lost < pieces


#: what a row that trains is named for: a turn without loss rendered partially, a trained turn run into the next
NoteKind = Literal["history_partly_rendered", "turn_runs_on"]


def row_notes(rendered: RenderedChat, messages: Sequence[Mapping[str, Any]], loss_mask: Sequence[int],
              dropped: Sequence[DroppedOutput]) -> list[tuple[NoteKind, str]]:
    """What a row that passes the mask check trains with that is not what the model wrote: each turn
    without loss whose tool call or content the render lacks (``dropped_output(history=True)``), each
    trained turn that runs into the next message (``runs_on``); as (kind, sentence naming the message)."""
    notes: list[tuple[NoteKind, str]] = []
    partial = [d for d in dropped if not d.trained and d.kind in REFUSED_KINDS]
    for index in sorted({d.message for d in partial}):
        said = "; ".join(d.describe() for d in partial if d.message == index)
        notes.append(("history_partly_rendered", f"messages[{index}] (assistant, no loss): {said}, so the "
                      "history the model is shown lacks what that turn did"))
    for index in runs_on(rendered, messages, loss_mask):
        notes.append(("turn_runs_on", f"messages[{index}] (assistant): the template writes its text straight "
                      "into the next message's with no end of its own, so what trains there is not what the "
                      "model writes at inference"))
    return notes
