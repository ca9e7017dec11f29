"""Parallel tool calls as a template that takes one call per turn is handed them: one turn per call.

Llama 3.1 (as Meta ships it) raises "This model only supports single tool-calls at once!" on an assistant
turn with two calls, and a coding agent's session often makes several at once (read two files, then edit).
What a single-call model does with the same work is call, read the result, call again: so under salvage
such a turn is handed to the template as consecutive assistant turns, one call each, each followed by its
own result (paired by ``tool_call_id``; results with no id at all are paired in order when there is one per
call). The first of them keeps the turn's text and reasoning; the later ones carry the call alone. Each takes
the turn's loss flag: a serialized call turn trains, as it is what the single-call model writes.

A turn is left as it is (and the template's refusal stands) when its calls and the results after it do not
pair one to one: a call with no result, a result no call asked for, two calls with one id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from whileai_datasets.chat_template.masks.dropped import REASONING_KEYS

__all__ = ["Serialized", "serialize_parallel_calls"]

#: (messages, loss mask, the index of the message each came from, turns serialized)
Serialized = tuple[list[dict[str, Any]], list[int], list[int], int]


def serialize_parallel_calls(messages: Sequence[Mapping[str, Any]], mask: Sequence[int],
                             origin: Sequence[int] | None = None) -> Serialized:
    """``messages`` with each assistant turn of several tool calls whose results follow it, one per call,
    serialized (see the module docstring), their loss mask, where each message came from (an index into
    ``origin`` when given, else into ``messages``), and how many turns were serialized (0: none could be)."""
    origin = list(range(len(messages))) if origin is None else list(origin)
    out: list[dict[str, Any]] = []
    flags: list[int] = []
    came: list[int] = []
    serialized = 0
    index = 0
    while index < len(messages):
        message = messages[index]
        end = index + 1
        while end < len(messages) and messages[end].get("role") == "tool":
            end += 1
        pairs = _pairs(message, messages[index + 1:end]) if message.get("role") == "assistant" else None
        if pairs is None:
            out.append(dict(message))
            flags.append(int(mask[index]))
            came.append(origin[index])
            index += 1
            continue
        serialized += 1
        for number, (call, answer) in enumerate(pairs):
            at = index + 1 + answer
            out += [_one_call(message, call, first=number == 0), dict(messages[at])]
            flags += [int(mask[index]), int(mask[at])]
            came += [origin[index], origin[at]]
        index = end
    return out, flags, came, serialized


def _pairs(message: Mapping[str, Any], results: Sequence[Mapping[str, Any]]
           ) -> list[tuple[Mapping[str, Any], int]] | None:
    """Each call of ``message`` with the position of its result in ``results`` (the tool messages right after
    it), in the calls' order; None unless it has several calls and they pair one to one with ``results``."""
    calls = [call for call in message.get("tool_calls") or [] if isinstance(call, Mapping)]
    if len(calls) < 2 or len(calls) != len(message.get("tool_calls") or []) or len(results) != len(calls):
        return None
    answered = [result.get("tool_call_id") for result in results]
    if all(value is None for value in answered):  # no ids at all: the results answer the calls in order
        return list(zip(calls, range(len(results))))
    ids = [call.get("id") for call in calls]
    if None in ids or len(set(ids)) != len(ids) or sorted(map(str, answered)) != sorted(map(str, ids)):
        return None
    by_id = {str(value): position for position, value in enumerate(answered)}
    return [(call, by_id[str(call.get("id"))]) for call in calls]


def _one_call(message: Mapping[str, Any], call: Mapping[str, Any], *, first: bool) -> dict[str, Any]:
    """``message`` with ``call`` as its only call; after the first, without its text and reasoning."""
    turn = dict(message)
    turn["tool_calls"] = [dict(call)]
    if not first:
        for key in REASONING_KEYS:
            turn.pop(key, None)
        if "content" in turn:
            turn["content"] = ""
    return turn
