"""Rows that hold their conversation under ``conversations``, tools given as JSON text, and rows
that hold no conversation at all.

whileai reads none of these: a row without ``messages`` or a rollout (``prompt`` + ``steps``)
becomes an empty conversation there, which trains nothing. The shapes are the ones LLaMA-Factory,
axolotl and many Hub datasets write:

* ``conversations`` of OpenAI messages (``role`` / ``content``): read as they are;
* ``conversations`` of ShareGPT turns (``from`` / ``value``), mapped as LLaMA-Factory's sharegpt
  converter maps them: ``human`` -> user, ``gpt`` -> assistant, ``system``, ``function_call`` ->
  an assistant turn with tool calls (the value is the JSON of ``{"name", "arguments"}`` or a list
  of them, after an optional ``<think>`` block or text with the calls in ``<tool_call>`` tags, as
  this package's ``sharegpt`` config writes them), ``observation`` -> a tool result (one per call
  of the turn before, when it holds that many joined the way LLaMA-Factory joins them). The role
  names themselves (``user``, ``assistant``, ``tool``) are read under ``from`` too. The row's
  ``system`` text is the system message unless the first turn is one.

Tool calls get no ids here: the message columns number them ``call_0000``, ... and link the tool
results to them in order, as they do for every call written without an id (whileai's rule).
"""

from __future__ import annotations

import json
import re
from typing import Any

from whileai_datasets import option_names
from whileai_datasets.rows import unread_keys
from whileai_datasets.rows.normalize import RowContext, type_name

#: ShareGPT ``from`` -> role; ``function_call`` and ``observation`` are read by their own rules
SHAREGPT_ROLES = {"human": "user", "gpt": "assistant", "system": "system",
                  "user": "user", "assistant": "assistant", "tool": "tool"}
FUNCTION_CALL, OBSERVATION = "function_call", "observation"
_TAGS = ("human", "gpt", "system", FUNCTION_CALL, OBSERVATION)
#: How LLaMA-Factory's OpenAI converter (and this package's ``sharegpt`` config) joins the results
#: of parallel calls into one observation (``hub.trainer_formats.OBSERVATION_JOIN``).
OBSERVATION_JOIN = "\n</tool_response>\n<tool_response>\n"
#: A ``function_call`` value: an optional leading ``<think>`` block, then the call JSON or text
#: with the call JSON in LLaMA-Factory's ``<tool_call>`` tags.
_THINK = re.compile(r"\s*<think>.*?</think>\s*", re.DOTALL)
_TAGGED = re.compile(r"(?P<text>.*?)<tool_call>(?P<calls>.*)</tool_call>\s*$", re.DOTALL)
#: keys that hold a conversation in some row shape this package reads
CONVERSATION_KEYS = ("messages", "conversations", "conversation", "prompt", "steps", "final_text", "opener",
                     "tool_trace",
                     "completion", "messages_json", "steps_json")


def conversation_key(row: dict[str, Any]) -> str | None:
    """The key a row holds its turns under when it has no ``messages``: ``conversations``, or
    ms-swift's ``conversation``; None when it has neither."""
    for key in CONVERSATIONS:
        if key in row:
            return key
    return None


def from_conversations(row: dict[str, Any], ctx: RowContext) -> list[dict[str, Any]] | None:
    """The messages of a row's ``conversations`` (or ``conversation``), one per OpenAI message or
    ShareGPT turn (an observation may be several tool results), two per ms-swift
    ``{human, assistant}`` pair; None when it has none."""
    key = conversation_key(row) or CONVERSATIONS[0]
    turns = row.get(key)
    if not turns:
        return None
    if not isinstance(turns, list):
        raise ctx.error(key, f"expected a list of messages, got {type_name(turns)}", "Fix the row.")
    first = turns[0]
    if isinstance(first, dict) and SWIFT_PAIR[0] in first and "from" not in first and "role" not in first:
        return _swift_pairs(turns, ctx, key)
    return as_messages(turns, ctx, key)


#: the keys a row's turns are under when it has no ``messages``
CONVERSATIONS = ("conversations", "conversation")
#: ms-swift's ShareGPT dialect: ``conversation`` holds ``{"human": ..., "assistant": ...}`` pairs
SWIFT_PAIR = ("human", "assistant")


def _swift_pairs(turns: list[Any], ctx: RowContext, column: str) -> list[dict[str, Any]]:
    """ms-swift's pairs, each one user turn and one assistant turn."""
    messages = []
    for i, pair in enumerate(turns):
        texts = [pair.get(key) for key in SWIFT_PAIR] if isinstance(pair, dict) else None
        if texts is None or not all(isinstance(text, str) for text in texts) or set(pair) - set(SWIFT_PAIR):
            got = type_name(pair) if texts is None else json.dumps(pair)[:80]
            raise ctx.error(
                f"{column}[{i}]", f'expected a {{"human": ..., "assistant": ...}} pair of texts, got {got}',
                "ms-swift's conversation holds one pair of texts per exchange; fix the row, or skip bad rows with "
                f"{option_names.spell('on_bad_row', 'skip')}.",
            )
        messages += [{"role": "user", "content": texts[0]}, {"role": "assistant", "content": texts[1]}]
    return messages


def as_messages(turns: list[Any], ctx: RowContext, column: str) -> list[Any]:
    """``turns`` as messages: OpenAI messages as they are, ShareGPT ``from`` / ``value`` turns mapped
    (under ``messages`` too: the same turns read the same under either key)."""
    first = next((t for t in turns if isinstance(t, dict)), {})
    return list(turns) if "role" in first or "from" not in first else _sharegpt(turns, ctx, column)


def row_system(row: dict[str, Any], messages: list[Any], ctx: RowContext) -> str:
    """The row's own ``system`` text, to lead ``messages`` ("" when it has none, or when the
    conversation opens with a system message already, which LLaMA-Factory reads first)."""
    system = row.get("system")
    if system is None:
        return ""
    if not isinstance(system, str):
        raise ctx.error("system", f"expected the system prompt as text, got {type_name(system)}", "Fix the row.")
    leading = messages and isinstance(messages[0], dict) and messages[0].get("role") == "system"
    return "" if leading else system


#: the row key some agent exports (Hermes) hold the agent's system prompt under, beside ``messages``
SYSTEM_PROMPT_KEY = "system_prompt"


def row_system_prompt(row: dict[str, Any], messages: list[Any], own: str, ctx: RowContext) -> str:
    """The system text that leads ``messages``: the row's ``system_prompt`` (``own``, the row's
    ``system``, when the conversation opens with that very text already)."""
    text = row[SYSTEM_PROMPT_KEY]
    if not isinstance(text, str):
        raise ctx.error(SYSTEM_PROMPT_KEY, f"expected the system prompt as text, got {type_name(text)}",
                        "Fix the row.")
    first = messages[0] if messages else None
    if not text or isinstance(first, dict) and first.get("role") == "system" and first.get("content") == text:
        return own
    if own and own != text:
        raise ctx.error(SYSTEM_PROMPT_KEY, "expected one system prompt, got two different ones: 'system' and "
                        "'system_prompt'", "Keep one of the two keys (or merge their texts), then load the file again.")
    return text


def _sharegpt(turns: list[Any], ctx: RowContext, column: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    calls_before = 0
    for i, turn in enumerate(turns):
        path = f"{column}[{i}]"
        if not isinstance(turn, dict):
            raise ctx.error(path, f"expected a turn object, got {type_name(turn)}", "Fix or drop the row.")
        tag, value = turn.get("from"), turn.get("value")
        if not isinstance(value, str):
            raise ctx.error(f"{path}.value", f"expected the turn's text, got {type_name(value)}", "Fix the row.")
        if tag == FUNCTION_CALL:
            content, calls = _function_call(value, ctx, f"{path}.value")
            messages.append({"role": "assistant", "content": content, "tool_calls": calls})
            calls_before = len(calls)
            continue
        if tag == OBSERVATION:
            results = value.split(OBSERVATION_JOIN) if calls_before > 1 else [value]
            if len(results) != calls_before:
                results = [value]
            messages.extend({"role": "tool", "content": result} for result in results)
        elif type(tag) is str and tag in SHAREGPT_ROLES:
            messages.append({"role": SHAREGPT_ROLES[tag], "content": value})
        else:
            got = "no 'from'" if tag is None else repr(tag)
            raise ctx.error(
                f"{path}.from", f"expected one of {', '.join(map(repr, _TAGS))}, got {got}",
                "Fix the row (ShareGPT turns are {\"from\": ..., \"value\": ...}), or skip bad rows with "
                f"{option_names.spell('on_bad_row', 'skip')}.",
            )
        calls_before = 0
    return messages


def _function_call(value: str, ctx: RowContext, path: str) -> tuple[str, list[dict[str, Any]]]:
    """A ``function_call`` turn's text (a think block, or text beside the calls) and its calls."""
    think = _THINK.match(value)
    text, payload = (value[: think.end()], value[think.end() :]) if think else ("", value)
    tagged = _TAGGED.match(payload)
    if tagged:
        text, payload = text + tagged["text"], tagged["calls"]
    try:
        parsed = json.loads(payload)
    except ValueError as err:
        raise _bad_call(ctx, path, f"unparseable text ({err}) starting {payload[:40]!r}") from err
    calls = parsed if isinstance(parsed, list) else [parsed]
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise _bad_call(ctx, path, f"JSON {json.dumps(parsed)[:60]}")
    return text, [{"name": call["name"], "arguments": call.get("arguments")} for call in calls]


def _bad_call(ctx: RowContext, path: str, got: str) -> Exception:
    return ctx.error(
        path, f'expected the JSON of {{"name": ..., "arguments": {{...}}}} or a list of them, got {got}',
        "LLaMA-Factory's function_call turns hold the call as JSON; fix the row.",
    )


#: where a prompt/response row (TRL's standard prompt-completion rows, many SFT sets) holds the reply
REPLY_KEYS = ("response", "completion")
#: a rollout's own keys: a row with any of them is a whileai rollout, read as one
_ROLLOUT_KEYS = ("steps", "final_text", "opener", "tool_trace")


def prompt_reply(row: dict[str, Any]) -> dict[str, Any]:
    """A row of ``prompt`` text and its reply as text (``response`` or ``completion``) as the rollout
    it is: the ask and the agent's final text, so one user and one assistant turn. Other rows as they are."""
    if type(row.get("prompt")) is not str or any(row.get(key) for key in _ROLLOUT_KEYS):
        return row
    for key in REPLY_KEYS:
        if type(row.get(key)) is str:
            return {**{k: v for k, v in row.items() if k != key}, "final_text": row[key]}
    return row


def tools_of(own: Any, ctx: RowContext) -> list[Any] | None:
    """A row's ``tools``: a list of tool schemas, or JSON text of one (LLaMA-Factory writes them so);
    None when it has none (absent, empty, blank text or ``"[]"``)."""
    if own is None or own == [] or isinstance(own, str) and not own.strip():
        return None
    if isinstance(own, str):
        try:
            parsed = json.loads(own)
        except ValueError as err:
            raise ctx.error("tools", f"expected JSON text of a list of tool schemas, got unparseable text ({err})",
                            "Fix the row.") from err
        if isinstance(parsed, list) and all(isinstance(tool, dict) for tool in parsed):
            return parsed or None
        raise ctx.error("tools", f"expected JSON text of a list of tool schemas, got JSON {json.dumps(parsed)[:60]}",
                        "Fix the row.")
    if not isinstance(own, list):
        raise ctx.error("tools", f"expected a list of tool schemas (or JSON text of one), got {type_name(own)}",
                        "Fix the row.")
    return own


def no_conversation_error(row: dict[str, Any], ctx: RowContext) -> Exception:
    """The error for a row that holds no conversation under any key this package reads."""
    held = [key for key in CONVERSATION_KEYS if key in row]
    keys = ", ".join(repr(str(key)) for key in list(row)[:12]) + (", ..." if len(row) > 12 else "")
    found = f"the row has {keys}" if row else "the row is an empty object"
    if held:
        found += f" ({', '.join(held)} empty)"
    pair = [str(key) for key in row if key in unread_keys.PAIR_SIDE_KEYS]
    if pair:
        sides = ", ".join(map(repr, pair))
        return ctx.error("", f"no conversation to train on: {found}",
                         f"The row is a preference pair ({sides}): {option_names.preference_hint()}.")
    near = [(str(key), unread_keys.did_you_mean(str(key), unread_keys.ROW_KEYS)) for key in row
            if key not in held and key not in unread_keys.WHILEAI_ROW_KEYS]
    guesses = " ".join(f"Did you mean {guess!r} for {key!r}?" for key, guess in near if guess)
    return ctx.error(
        "", f"no conversation to train on: {found}", (guesses + " " if guesses else "") +
        "A trainable row holds `messages` (role/content messages), `conversations` (role/content or ShareGPT "
        "from/value turns) or a whileai rollout (`prompt` with `steps` or `final_text`); rename the key that "
        f"holds the conversation, or pass {option_names.spell('on_bad_row', 'skip')} to leave such rows out.",
    )
