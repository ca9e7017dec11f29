"""Probe conversations, and what a correct generation span is for each assistant turn.

The expected span of assistant turn ``k`` is defined by what the model would
produce at inference: it is prompted with ``render(messages[:k],
add_generation_prompt=True)`` and generates until ``render(messages[:k+1])``
ends. In the full rendering ``R`` that gives

* start ``a``: the end of the prompt when ``R`` starts with all of it (the
  model writes everything after it, the prefix-diff rule). Otherwise where ``R``
  leaves the prompt (the longest common prefix), taken as the minimum over the
  turn and a copy of it whose content and reasoning start with a different
  character, so that template text that merely happens to agree with the
  prompt (``<t`` of ``<tool_call>`` against ``<think>``) is not counted as header;
* end ``e``: the end of ``R`` for the last message; otherwise where ``R``
  stops agreeing with ``render(messages[:k+1])``, clamped to the end of the
  message's own loop iteration.

Text the template renders for the turn outside ``[a, e)`` but inside the turn
(a tool response a template folds into the assistant turn, say) is
*allowed* in a span but not required; whitespace just before ``a`` is
allowed too (``<|im_start|>assistant`` then ``\\n<tool_call>`` in one string),
though the patcher first tries to start exactly at ``a`` (``prompt_split.py``).
Text that repeats another message's content (a tool result) is never allowed.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from whileai_datasets.errors import TemplateError

ToolCall = dict[str, Any]
PINNED_NOW = datetime(2025, 1, 15, 12, 0, 0)  # strftime_now in every probe render
MARK = "\u0416"  # a letter no template emits after a role header

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}


def _call(call_id: str, city: str) -> ToolCall:
    return {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": {"city": city}}}


def _tool(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "content": text, "tool_call_id": call_id, "name": "get_weather"}


@dataclass(frozen=True)
class Probe:
    """One probe conversation and how to render it."""

    name: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    add_generation_prompt: bool = False


def _base_probes() -> list[Probe]:
    user = {"role": "user", "content": "What is the capital of France?"}
    return [
        Probe("system", [{"role": "system", "content": "You are a terse assistant."}, user,
                         {"role": "assistant", "content": "Paris."}]),
        Probe("multi_turn", [{"role": "user", "content": "Hi there"},
                             {"role": "assistant", "content": "Hello! How can I help?"},
                             {"role": "user", "content": "Tell me a joke"},
                             {"role": "assistant", "content": "Why did the chicken cross the road?"}]),
        Probe("tool_call", [{"role": "user", "content": "Weather in Paris?"},
                            {"role": "assistant", "content": "", "tool_calls": [_call("call_1", "Paris")]},
                            _tool("call_1", "Sunny, 18 degrees"),
                            {"role": "assistant", "content": "It is 18 degrees in Paris."}], [WEATHER_TOOL]),
        Probe("tool_call_with_content", [
            {"role": "system", "content": "Use tools when needed."},
            {"role": "user", "content": "Is it cold in Oslo?"},
            {"role": "assistant", "content": "Let me check.", "tool_calls": [_call("call_2", "Oslo")]},
            _tool("call_2", "Snow, minus 3 degrees"),
            {"role": "assistant", "content": "Yes, -3 degrees."}], [WEATHER_TOOL]),
        Probe("parallel_tool_calls", [
            {"role": "user", "content": "Rome and Lima?"},
            {"role": "assistant", "content": "", "tool_calls": [_call("call_3", "Rome"), _call("call_4", "Lima")]},
            _tool("call_3", "Clear, 25 degrees"), _tool("call_4", "Fog, 15 degrees"),
            {"role": "assistant", "content": "Rome 25, Lima 15."}], [WEATHER_TOOL]),
        Probe("tools_no_call", [user, {"role": "assistant", "content": "Paris."}], [WEATHER_TOOL]),
        Probe("empty_content", [{"role": "user", "content": "Say nothing."}, {"role": "assistant", "content": ""}]),
        Probe("think", [{"role": "user", "content": "What is 3+4?"},
                        {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\nIt is 7."},
                        {"role": "user", "content": "And 5+2?"},
                        {"role": "assistant", "content": "Also 7.", "reasoning_content": "Add again."}]),
        Probe("generation_prompt", [user], add_generation_prompt=True),
        Probe("generation_prompt_multi", [{"role": "system", "content": "Be brief."}, user,
                                          {"role": "assistant", "content": "Paris."},
                                          {"role": "user", "content": "And Spain?"}], add_generation_prompt=True),
    ]


def _as_parts(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if not isinstance(content, str):
        return message
    return {**message, "content": [{"type": "text", "text": content}] if content else []}


def _string_arguments(message: dict[str, Any]) -> dict[str, Any]:
    calls = message.get("tool_calls")
    if not calls:
        return message
    new_calls = [{**c, "function": {**c["function"], "arguments": json.dumps(c["function"]["arguments"])}}
                 for c in calls]
    return {**message, "tool_calls": new_calls}


def with_parts(probe: Probe) -> Probe:
    """The probe with every string content as a list of text parts."""
    return replace(probe, messages=[_as_parts(m) for m in probe.messages])


def with_string_arguments(probe: Probe) -> Probe:
    """The probe with tool-call arguments as JSON text instead of dicts."""
    return replace(probe, messages=[_string_arguments(m) for m in probe.messages])


def probe_set(content_format: str = "string") -> list[Probe]:
    """The probes, with content as strings or as lists of text parts."""
    probes = _base_probes()
    return [with_parts(p) for p in probes] if content_format == "parts" else probes


def marked(message: dict[str, Any]) -> dict[str, Any]:
    """A copy of an assistant message whose content and reasoning start with MARK."""
    out = copy.deepcopy(message)
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = [{"type": "text", "text": MARK}, *content]
    else:
        out["content"] = MARK + (content or "")
    for key in ("reasoning_content", "thinking", "reasoning"):
        if isinstance(out.get(key), str):
            out[key] = MARK + out[key]
    return out


# ---------------------------------------------------------------- expectations


@dataclass(frozen=True)
class TurnExpectation:
    """Where assistant message ``message`` must and may be covered."""

    message: int
    must: tuple[int, int]
    allowed: tuple[tuple[int, int], ...]


@dataclass
class ProbeRun:
    """A probe rendered with the original template."""

    probe: Probe
    text: str = ""
    message_spans: list[tuple[int, int]] = field(default_factory=list)
    error: str | None = None
    turns: list[TurnExpectation] = field(default_factory=list)


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    limit = min(len(a), len(b))
    index = 0
    while index < limit and a[index] == b[index]:
        index += 1
    return index


Renderer = Callable[[list[dict[str, Any]], bool], str]


def _try(render: Renderer, messages: list[dict[str, Any]], agp: bool) -> str | None:
    try:
        return render(messages, agp)
    except TemplateError:
        return None


def role_line(prompt_suffix: str) -> str:
    """The first line of a generation prompt (all of it when it has no line break)."""
    lead = len(prompt_suffix) - len(prompt_suffix.lstrip())
    newline = prompt_suffix.find("\n", lead)
    return prompt_suffix if newline < 0 else prompt_suffix[: newline + 1]


def _turn_start(run: ProbeRun, k: int, render: Renderer, prompt_suffix: str, in_own_pass: bool) -> int | None:
    messages, text = run.probe.messages, run.text
    start_k, end_k = run.message_spans[k]
    prompt = _try(render, messages[:k], True)
    if prompt is None:
        return None
    header = common_prefix(prompt, text)
    variant = _try(render, [*messages[:k], marked(messages[k])], False) if header < len(prompt) else None
    if variant is not None:  # the prompt is not all there: text agreeing with it by chance is the model's
        header = min(header, common_prefix(prompt, variant))
    if header < len(prompt):
        header = _outside_tag(prompt, header, start_k)
    if header < start_k and end_k > start_k:
        # the history renders differently once the turn exists (gpt-oss drops an
        # analysis message when a final one follows): fall back to the prompt's suffix
        if not prompt_suffix:
            return _generated_in_turn(run, k, render, prompt) if in_own_pass else None
        header = start_k + common_prefix(prompt_suffix, text[start_k:end_k])
    line = role_line(prompt_suffix)
    if line and end_k > start_k and text.startswith(line, start_k):
        header = max(header, start_k + len(line))
    return header


def _outside_tag(prompt: str, at: int, floor: int) -> int:
    """``at`` moved back to the start of the tag of ``prompt`` it cuts into, not before ``floor``.

    Where the history leaves the prompt inside one of its tags (DeepSeek-V3.2's history writes ``</think>``
    where the prompt writes ``<think></think>``: both go on with ``<``), the ``<`` they share is the start
    of the turn's own tag, not prompt. A cut after plain text (no ``<`` since the last ``>`` or line break)
    stays where it is.
    """
    opening = prompt.rfind("<", floor, at)
    if opening < 0 or any(mark in prompt[opening:at] for mark in ">\n"):
        return at
    return opening


def _generated_in_turn(run: ProbeRun, k: int, render: Renderer, prompt: str) -> int | None:
    """Where the turn's own loop pass writes what the model generates after ``prompt`` (None: not once).

    For a template whose history moves text between turns (Mistral's system note goes to the last user
    turn) and whose generation prompt adds nothing: the model writes ``render(messages[:k+1])`` past the
    prompt, and that text, found exactly once at the end of the turn's pass, is where the span starts.
    """
    start_k, end_k = run.message_spans[k]
    alone = _try(render, run.probe.messages[: k + 1], False)
    if alone is None or not alone.startswith(prompt) or len(alone) == len(prompt) or end_k <= start_k:
        return _whole_pass(run, k, render, prompt) if end_k > start_k else None
    generated, own = alone[len(prompt) :], run.text[start_k:end_k]
    if own.count(generated) != 1 or not own.endswith(generated):
        return None
    return end_k - len(generated)


def _whole_pass(run: ProbeRun, k: int, render: Renderer, prompt: str) -> int | None:
    """Where the model's text starts in the turn's pass, found from the prompt's end (None: not found).

    The history renders differently with and without the turn (Mistral writes the system note only into
    a last user message; Hermes closes a last tool message differently), so the prompt is not a prefix
    of the render. The prompt's end is still the start of the turn's pass: the longest end of the prompt
    that the pass starts with is the header the prompt supplies, and it must reach the content (found
    where the probe with this content starting with another letter leaves the render) but for
    whitespace, so no text between them is left unattributed.
    """
    start_k, end_k = run.message_spans[k]
    messages = run.probe.messages
    variant = _try(render, [*messages[:k], marked(messages[k]), *messages[k + 1 :]], run.probe.add_generation_prompt)
    if variant is None:
        return None
    content_at = common_prefix(run.text, variant)
    if not start_k <= content_at < end_k:
        return None
    own = run.text[start_k:content_at]
    supplied = next(n for n in range(len(own), -1, -1) if prompt.endswith(own[:n]))
    return start_k + supplied if not own[supplied:].strip() else None


def _turn_end(run: ProbeRun, k: int, render: Renderer, header: int, foreign: list[tuple[int, int]]) -> int:
    messages, text = run.probe.messages, run.text
    start_k, end_k = run.message_spans[k]
    if k == len(messages) - 1 and not run.probe.add_generation_prompt:
        return len(text)
    alone = _try(render, messages[: k + 1], False)
    if alone is not None and text.startswith(alone):
        end = len(alone)  # prefix-preserving: the turn ends where its own rendering ends
    elif end_k > start_k:
        end = end_k  # the turn renders differently as history: take its whole loop pass
    else:
        end = common_prefix(alone, text) if alone is not None else header
    if end_k > start_k:
        end = min(end, end_k)
    return min([end, *(a for a, _ in foreign if header <= a < end)])


def expect_turn(run: ProbeRun, k: int, render: Renderer, prompt_suffix: str = "",
                foreign: list[tuple[int, int]] | None = None, in_own_pass: bool = False) -> TurnExpectation | None:
    """The expectation for assistant message ``k`` of ``run`` (None when undecidable).

    ``prompt_suffix`` is what the generation prompt appends after a user
    message. A turn that starts with its role line never has that line inside
    the span, even where the template's own prompt leaves the line out (a turn
    right after a tool result, say). ``foreign`` text (other messages'
    content) ends the expected span and is never allowed. With ``in_own_pass`` (patch verification), a
    turn whose history renders differently and that has no generation prompt to fall back on is found
    where its own loop pass writes what the model generates (``_generated_in_turn``); per-turn masking
    leaves it undecided, as the text there is not conditioned on what the model saw.
    """
    header = _turn_start(run, k, render, prompt_suffix, in_own_pass)
    if header is None:
        return None
    foreign = foreign or []
    start_k, end_k = run.message_spans[k]
    end = max(_turn_end(run, k, render, header, foreign), header)
    low = _role_line_end(run.text, max(start_k, 0), header)
    while low > start_k and run.text[low - 1].isspace():
        low -= 1
    return TurnExpectation(k, (header, end), without(((low, max(end, end_k)),), foreign))


def _role_line_end(text: str, start: int, header: int) -> int:
    """End of the first line of the turn's header, if the header runs past it.

    A prompt that pre-fills more than the role line (an empty ``<think></think>``
    after ``<|im_start|>assistant\\n``) may be covered by a span or not.
    """
    lead = start
    while lead < header and text[lead].isspace():
        lead += 1
    newline = text.find("\n", lead, header)
    return header if newline < 0 else newline + 1


def foreign_spans(run: ProbeRun) -> list[tuple[int, int]]:
    """Where the text repeats the content of a message that is not the assistant's."""
    spans = []
    for message in run.probe.messages:
        if message.get("role") == "assistant":
            continue
        content = message.get("content")
        texts = [content] if isinstance(content, str) else [
            part.get("text", "") for part in content or [] if isinstance(part, dict)]
        for piece in texts:
            piece = piece.strip()
            start = run.text.find(piece) if len(piece) >= 4 else -1
            while start >= 0:
                spans.append((start, start + len(piece)))
                start = run.text.find(piece, start + 1)
    return spans


def without(spans: tuple[tuple[int, int], ...], holes: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """``spans`` minus ``holes``."""
    out = list(spans)
    for hole_start, hole_end in holes:
        cut = []
        for start, end in out:
            if hole_end <= start or end <= hole_start:
                cut.append((start, end))
                continue
            if start < hole_start:
                cut.append((start, hole_start))
            if hole_end < end:
                cut.append((hole_end, end))
        out = cut
    return tuple(out)
