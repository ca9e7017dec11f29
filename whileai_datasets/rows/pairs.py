"""Preference pairs of every common layout, as two whole conversations, or refused by name.

The ``preference`` config holds each side as the whole conversation (the prompt turns, then the
side's own turns). The layouts read here, besides whileai's own (pairs of rollouts, and what
``export_preference`` writes):

* TRL conversational: ``prompt`` as a message list, ``chosen`` / ``rejected`` the turns after it
  (explicit prompt), or both sides whole conversations (implicit prompt). UltraFeedback-style
  sets are the latter, with the ask as ``prompt`` text beside them.
* TRL standard: ``prompt``, ``chosen`` and ``rejected`` as text: one user turn, one assistant turn
  per side.
* OpenAI and Fireworks DPO files: ``input.messages`` (and ``input.tools``), then
  ``preferred_output`` / ``non_preferred_output`` message lists.
* LLaMA-Factory ShareGPT: ``conversations`` (``from`` / ``value`` turns, ``system`` beside them),
  ``chosen`` / ``rejected`` one ``{from, value}`` turn each or a list of them; LLaMA-Factory
  Alpaca: ``instruction`` (+ ``input``, ``system``), ``chosen`` / ``rejected`` as text.
* ms-swift: ``messages`` whose last assistant turn is the chosen one, with ``rejected_response``
  (text) or ``rejected_messages`` (the whole rejected conversation); ``messages`` as the prompt
  with ``chosen`` / ``rejected`` text is read the same way.

A side that comes out with no assistant turn (nothing to prefer) is refused naming the row and
the side: a pair with an empty side trains DPO on nothing, and no layout writes one on purpose.
"""

from __future__ import annotations

from typing import Any

from whileai_datasets import option_names
from whileai_datasets.rows import conversations, normalize
from whileai_datasets.rows.normalize import RowContext, type_name

#: the keys a side is found under, per layout: (chosen, rejected)
_SIDES = (("chosen", "rejected"), ("preferred_output", "non_preferred_output"))
#: ms-swift's rejected side beside ``messages``
SWIFT_REJECTED = ("rejected_response", "rejected_messages")


def holds_pair(row: dict[str, Any]) -> bool:
    """Whether ``row`` holds a preference pair in one of the layouts ``read_pair`` reads (an empty
    side, ``{}`` or ``[]``, is no side: whileai's exporter says so of such an entry, and so does ours)."""
    return any(all(_has_side(row.get(side)) for side in sides) for sides in _SIDES) or (
        "rejected" not in row and any(key in row for key in SWIFT_REJECTED))



def _has_side(value: Any) -> bool:
    return value is not None and not (isinstance(value, (dict, list)) and not value)

def read_pair(row: dict[str, Any], ctx: RowContext) -> dict[str, Any]:
    """``row`` with ``chosen`` and ``rejected`` as whole conversations (message lists, or rollout
    objects that ``normalize.conversation`` rebuilds), whatever layout it came in."""
    if isinstance(row.get("input"), dict) and ("preferred_output" in row or "non_preferred_output" in row):
        for side in _SIDES[1]:
            if not isinstance(row.get(side), list):
                raise ctx.error(side, f"expected the {side} side as a message list, got "
                                f"{type_name(row[side]) if side in row else 'none'}",
                                "OpenAI and Fireworks pairs hold both preferred_output and non_preferred_output; "
                                "fix the row.")
        pair = normalize.join_preference(row)  # OpenAI / Fireworks
        need_assistant(pair["chosen"], ctx, "preferred_output")
        need_assistant(pair["rejected"], ctx, "non_preferred_output")
        return pair
    if any(key in row for key in SWIFT_REJECTED) and "rejected" not in row:
        return _swift(row, ctx)
    chosen, rejected = row.get("chosen"), row.get("rejected")
    if chosen is None or rejected is None:
        missing = "chosen" if chosen is None else "rejected"
        raise ctx.error(
            missing, f"expected a {missing} side, got {'none' if missing not in row else 'null'}",
            "A preference row holds both sides (chosen/rejected, preferred_output/non_preferred_output, or ms-swift's "
            "messages with rejected_response); load rows of one conversation with the default config, or skip "
            f"this row with {option_names.spell('on_bad_row', 'skip')}.",
        )
    if isinstance(chosen, dict) and isinstance(rejected, dict) and not _is_turn(chosen) and not _is_turn(rejected):
        return row  # whileai's pairs of rollouts: each side is rebuilt from its rollout
    prefix = _prefix(row, ctx)
    out = dict(row)
    if isinstance(row.get("prompt"), list):  # TRL's explicit prompt: the prompt column holds its text
        out["prompt"] = row.get("prompt_text")
    for name, side in (("chosen", chosen), ("rejected", rejected)):
        out[name] = _whole(prefix, _turns(side, ctx, name), ctx, name)
    return out


def _prefix(row: dict[str, Any], ctx: RowContext) -> list[Any]:
    """The turns before the sides: TRL's prompt list, LLaMA-Factory's conversations (and system) or
    instruction, ms-swift's (or any) ``messages``, or a text ``prompt`` as one user turn."""
    prompt = row.get("prompt")
    if isinstance(prompt, list):
        return conversations.as_messages(prompt, ctx, "prompt")
    turns = conversations.from_conversations(row, ctx)
    if turns is None and isinstance(row.get("messages"), list):
        turns = conversations.as_messages(row["messages"], ctx, "messages")
    if turns is None and isinstance(row.get("instruction"), str):
        turns = _alpaca(row, ctx)
    if turns is None and isinstance(prompt, str) and prompt:
        return [{"role": "user", "content": prompt}]
    if turns is None:
        return []
    system = conversations.row_system(row, turns, ctx)
    return [{"role": "system", "content": system}, *turns] if system else turns


def _alpaca(row: dict[str, Any], ctx: RowContext) -> list[dict[str, Any]]:
    """LLaMA-Factory's Alpaca preference row: ``history`` pairs, then ``instruction`` and its
    ``input`` joined by a newline as the user turn (as LLaMA-Factory joins them)."""
    ask = row["instruction"]
    extra = row.get("input")
    if isinstance(extra, str) and extra:
        ask = f"{ask}\n{extra}"
    turns: list[dict[str, Any]] = []
    history = row.get("history")
    if isinstance(history, list):
        for i, pair in enumerate(history):
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(t, str) for t in pair)):
                raise ctx.error(f"history[{i}]", f"expected a [question, answer] pair of texts, got {type_name(pair)}",
                                "Fix the row (LLaMA-Factory's history is a list of [question, answer] pairs).")
            turns += [{"role": "user", "content": pair[0]}, {"role": "assistant", "content": pair[1]}]
    return [*turns, {"role": "user", "content": ask}]


def _is_turn(value: dict[str, Any]) -> bool:
    return "from" in value or "role" in value


def _turns(side: Any, ctx: RowContext, name: str) -> list[Any] | dict[str, Any]:
    """One side's turns: a list of messages or ShareGPT turns, one turn object, text (one assistant
    turn), or a rollout object (kept for ``normalize.conversation``)."""
    if isinstance(side, str):
        return [{"role": "assistant", "content": side}]
    if isinstance(side, dict):
        return conversations.as_messages([side], ctx, name) if _is_turn(side) else side
    if isinstance(side, list):
        return conversations.as_messages(side, ctx, name)
    raise ctx.error(
        name, f"expected the {name} side as a message list, one message, text or a rollout object, got "
        f"{type_name(side)}", "Fix the row.",
    )


def _whole(prefix: list[Any], side: list[Any] | dict[str, Any], ctx: RowContext, name: str) -> Any:
    """The side as a whole conversation: a side that opens the conversation itself (its first turn
    is a system or user turn, as UltraFeedback and whileai write them) stands alone, any other
    follows the prefix."""
    if isinstance(side, dict):
        return side
    first = side[0] if side else None
    opens = isinstance(first, dict) and first.get("role") in ("system", "user", "developer")
    whole = side if opens or not prefix else [*prefix, *side]
    need_assistant(whole, ctx, name)
    return whole


def need_assistant(turns: list[Any], ctx: RowContext, name: str) -> None:
    if any(isinstance(t, dict) and t.get("role") == "assistant" for t in turns):
        return
    got = "no turns" if not turns else f"{len(turns)} turn(s), none from the assistant"
    raise ctx.error(
        name, f"expected the {name} side to hold an assistant turn, got {got}",
        "A preference pair compares two replies; give both sides their reply, or skip this row with "
        f"{option_names.spell('on_bad_row', 'skip')}.",
    )


def _swift(row: dict[str, Any], ctx: RowContext) -> dict[str, Any]:
    """ms-swift's pair: ``messages`` ending in the chosen assistant turn, and ``rejected_response``
    (the rejected reply to the same turns) or ``rejected_messages`` (the whole rejected conversation)."""
    messages = row.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ctx.error("messages", f"expected the chosen conversation beside {' / '.join(SWIFT_REJECTED)}, got "
                        f"{type_name(messages) if 'messages' in row else 'none'}",
                        "ms-swift pairs hold messages (ending in the chosen reply) and rejected_response; fix the row.")
    chosen = conversations.as_messages(messages, ctx, "messages")
    system = conversations.row_system(row, chosen, ctx)
    if system:
        chosen = [{"role": "system", "content": system}, *chosen]
    need_assistant(chosen, ctx, "messages")
    if "rejected_messages" in row:
        given = row["rejected_messages"]
        if not isinstance(given, list):
            raise ctx.error("rejected_messages", f"expected a message list, got {type_name(given)}", "Fix the row.")
        rejected = conversations.as_messages(given, ctx, "rejected_messages")
        need_assistant(rejected, ctx, "rejected_messages")
    else:
        reply = row.get("rejected_response")
        if not isinstance(reply, str):
            raise ctx.error("rejected_response", f"expected the rejected reply as text, got {type_name(reply)}",
                            "Fix the row.")
        last = chosen[-1]
        if not (isinstance(last, dict) and last.get("role") == "assistant"):
            got = repr(last.get("role")) if isinstance(last, dict) else type_name(last)
            raise ctx.error("messages", "expected the last message to be the chosen assistant reply beside "
                            f"rejected_response, got a {got} message last", "Fix the row: end messages with the chosen reply.")
        rejected = [*chosen[:-1], {"role": "assistant", "content": reply}]
    rest = {k: v for k, v in row.items() if k not in ("messages", *SWIFT_REJECTED)}
    return {**rest, "chosen": chosen, "rejected": rejected}
