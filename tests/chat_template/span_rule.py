"""The trained-span rule (docs/token-masks.md), computed from transformers' renders alone.

For assistant turn k of a rendering ``T``: the model is prompted with ``P = render(messages[:k],
add_generation_prompt=True)`` and writes until ``A = render(messages[:k+1])`` ends. Where ``T`` starts
with the history ``render(messages[:k])`` and with ``A``, the trained span is exact:

* start: where ``T`` leaves ``P`` (all of ``P`` when ``T`` starts with it), backed off to the end of a
  whole tag or line of ``P``, so a prefilled ``<think>`` stays prompt and the ``<t`` of a ``<tool_call>``
  stays the model's;
* end: the end of ``A`` (the whole text for the row's last message), without trailing whitespace
  (whitespace after a turn's end is neither required nor refused), plus a stop token that ``T`` writes
  right there (GLM's next opener).

Elsewhere (a template that renders a turn differently as history: Qwen3 drops earlier reasoning) the
turn's pieces are checked: its content and tool calls supervised where ``T`` holds them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tests.chat_template import mask_oracle

Span = tuple[int, int]
_RENDERS: dict[tuple[int, str, str, bool], str | None] = {}


def render(tokenizer: Any, template: str, messages: list[dict[str, Any]], tools: Any, agp: bool) -> str | None:
    """``mask_oracle.render``, remembered (the rule renders the same prefixes for every turn and mode)."""
    key = (id(tokenizer), template, json.dumps([messages, tools], sort_keys=True), agp)
    if key not in _RENDERS:
        if len(_RENDERS) > 4096:
            _RENDERS.clear()
        _RENDERS[key] = mask_oracle.render(tokenizer, template, messages, tools, agp)
    return _RENDERS[key]


def _common(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _start(prompt: str, history: str, text: str, header: str) -> int:
    start = _common(prompt, text)
    if start < len(prompt):
        while start > len(history) and prompt[start - 1] not in ">\n":
            start -= 1
    if header and text.startswith(header, start):  # a role header the prompt left out (after a tool result)
        start += len(header)
    return start


def role_header(tokenizer: Any, template: str, messages: list[dict[str, Any]], tools: Any) -> str:
    """The first line of what the generation prompt writes after the first user message: the role header."""
    first = next(i for i, m in enumerate(messages) if m["role"] == "user") + 1
    plain = render(tokenizer, template, messages[:first], tools, False) or ""
    prompt = render(tokenizer, template, messages[:first], tools, True) or ""
    added = prompt[len(plain):] if prompt.startswith(plain) else ""
    lead = len(added) - len(added.lstrip())
    newline = added.find("\n", lead)
    return added if newline < 0 else added[: newline + 1]


def pieces(message: dict[str, Any]) -> list[str]:
    out = [message["content"].strip()] if (message.get("content") or "").strip() else []
    for call in message.get("tool_calls") or []:
        out.append(call["function"]["name"])
        out += [str(v) for v in json.loads(call["function"]["arguments"]).values()]
    return out


def turn_rule(tokenizer: Any, template: str, messages: list[dict[str, Any]], tools: Any, text: str, k: int,
              stops: Sequence[str]) -> tuple[Span, Span] | None:
    """``(required, allowed)`` for turn k: the exact span, and it with the whitespace after it (None: the
    turn renders differently as history, so only its pieces are checked)."""
    history = render(tokenizer, template, messages[:k], tools, False) if k else ""
    prompt = render(tokenizer, template, messages[:k], tools, True)
    alone = render(tokenizer, template, messages[: k + 1], tools, False)
    if history is None or prompt is None or alone is None or not text.startswith(history):
        return None
    if k < len(messages) - 1 and not text.startswith(alone):
        return None
    start = _start(prompt, history, text, role_header(tokenizer, template, messages, tools))
    end = len(alone.rstrip()) if k < len(messages) - 1 else len(text.rstrip())
    stop = next((s for s in sorted(stops, key=len, reverse=True) if text.startswith(s, end)), "")
    end += len(stop)
    after = end
    while after < len(text) and text[after].isspace():
        after += 1
    return (start, end), (start, after)


def rule_problems(tokenizer: Any, template: str, messages: list[dict[str, Any]], flags: list[int], tools: Any,
                  text: str, supervised: set[int], stops: Sequence[str]) -> tuple[list[str], int]:
    """What of ``supervised`` (character positions of ``text``) breaks the rule, and how many turns were
    checked exactly."""
    required: set[int] = set()
    allowed: set[int] = set()
    problems, exact = [], 0
    for k, (message, flag) in enumerate(zip(messages, flags)):
        if not flag or message["role"] != "assistant":
            continue
        rule = turn_rule(tokenizer, template, messages, tools, text, k, stops)
        if rule is None:
            region = _turn_region(tokenizer, template, messages, tools, text, k)
            problems += _piece_problems(text, message, k, supervised, region[0])
            allowed |= set(range(*region))
            continue
        exact += 1
        required |= set(range(*rule[0]))
        allowed |= set(range(*rule[1]))
    if missing := sorted(required - supervised):
        problems.append(f"not supervised: {_show(text, missing)}")
    if extra := sorted(supervised - allowed):
        problems.append(f"supervised beyond the rule: {_show(text, extra)}")
    return problems, exact


def _piece_problems(text: str, message: dict[str, Any], k: int, supervised: set[int], start: int) -> list[str]:
    out = []
    for piece in pieces(message):
        at = text.find(piece, start)
        if at >= 0 and not set(range(at, at + len(piece))) <= supervised:
            out.append(f"message {k}: {piece!r} is not supervised")
    return out


def _turn_region(tokenizer: Any, template: str, messages: list[dict[str, Any]], tools: Any, text: str,
                 k: int) -> Span:
    """Where a turn checked piece by piece may be trained: from where the text leaves its prompt to the
    first later message's content written after the turn's own pieces (the whole rest for the last)."""
    history = render(tokenizer, template, messages[:k], tools, False) if k else ""
    prompt = render(tokenizer, template, messages[:k], tools, True) or ""
    start = _start(prompt, history or "", text, role_header(tokenizer, template, messages, tools))
    found = [text.find(p, start) for p in pieces(messages[k])]
    after = max([at + len(p) for at, p in zip(found, pieces(messages[k])) if at >= 0], default=start)
    for later in messages[k + 1:]:
        at = text.find((later.get("content") or "").strip(), after) if (later.get("content") or "").strip() else -1
        if at >= 0:
            return start, at
    return start, len(text)


def _show(text: str, positions: list[int]) -> str:
    runs: list[list[int]] = []
    for p in positions:
        if runs and runs[-1][1] == p:
            runs[-1][1] = p + 1
        else:
            runs.append([p, p + 1])
    return ", ".join(repr(text[a:e]) for a, e in runs[:6])
