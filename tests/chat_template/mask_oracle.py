"""An oracle for token masks that does not use our span code.

Rows carry contents that occur nowhere else, so a content's rendered place is
found by search in transformers' own rendering of the original template. The
end-of-turn marker of turn k is what the template writes after the turn's
content when the conversation ends there (``render(messages[:k+1])``), and the
role header is what the generation prompt writes (``render(messages[:k],
add_generation_prompt=True)``), both compared with the full rendering only where
it starts with them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from tests.support.hf_chat import apply_chat_template

TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def _call(call_id: str, city: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}


#: Markers a template writes at the end of an assistant turn in the same output as the next message's
#: header; the patcher leaves them out (see chat_template/patching/plan.py, ``_cuts``): gemma 4's tool response opener.
EXCUSED_TAILS = ("<|tool_response>",)


def plain_rows() -> list[list[dict[str, Any]]]:
    """Conversations without tools (canonical shape: arguments are JSON text)."""
    return [
        [{"role": "system", "content": "Sysprompt quokka rules."},
         {"role": "user", "content": "Userask walrus one?"},
         {"role": "assistant", "content": "Reply narwhal first."},
         {"role": "user", "content": "Userask ibex two?"},
         {"role": "assistant", "content": "Reply pangolin final."}],
        [{"role": "user", "content": "Userask okapi only?"},
         {"role": "assistant", "content": "Reply axolotl single."}],
    ]


def think_rows() -> list[list[dict[str, Any]]]:
    return [[{"role": "user", "content": "Userask tapir think?"},
             {"role": "assistant", "content": "Reply gecko early."},
             {"role": "user", "content": "Userask lemur think?"},
             {"role": "assistant", "content": "Reply jackal late.", "reasoning_content": "Ponder marmot."}]]


def tool_rows() -> list[list[dict[str, Any]]]:
    return [[{"role": "user", "content": "Userask weather heron?"},
             {"role": "assistant", "content": "", "tool_calls": [_call("call_1", "Zanzibarcity")]},
             {"role": "tool", "content": "Toolresult sunny bison.", "tool_call_id": "call_1", "name": "get_weather"},
             {"role": "assistant", "content": "Reply weather mongoose."}]]


def loss_mask(messages: Sequence[dict[str, Any]], mode: str) -> list[int]:
    flags = [int(m["role"] == "assistant") for m in messages]
    if mode == "final":
        last = max(i for i, f in enumerate(flags) if f)
        flags = [int(i == last) for i in range(len(flags))]
    return flags


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content)
    return content or ""


def as_parts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation with each content as a list of text parts (for templates that only render those)."""
    return [{**m, "content": [{"type": "text", "text": m["content"]}] if m.get("content") else []}
            for m in messages]


def _occurrences(text: str, piece: str) -> list[tuple[int, int]]:
    out, at = [], text.find(piece)
    while piece and at >= 0:
        out.append((at, at + len(piece)))
        at = text.find(piece, at + 1)
    return out


def _template_messages(messages: Sequence[dict[str, Any]], string_arguments: bool) -> list[dict[str, Any]]:
    out = copy.deepcopy(list(messages))
    if not string_arguments:
        for message in out:
            for call in message.get("tool_calls") or []:
                call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out


def render(tokenizer: Any, template: str, messages: list[dict[str, Any]], tools: Any, agp: bool) -> str | None:
    for string_arguments in (False, True):
        try:
            return str(apply_chat_template(
                tokenizer, _template_messages(messages, string_arguments), tools=tools, chat_template=template,
                tokenize=False, add_generation_prompt=agp))
        except Exception:  # noqa: BLE001 - the template refuses this shape
            continue
    return None


def mask_problems(tokenizer: Any, template: str, messages: list[dict[str, Any]], flags: list[int],
                  tools: Any, ids: list[int], mask: list[int], declared: bool = False) -> list[str]:
    """What is wrong with ``mask`` for one row; ``declared``: the template has its own generation blocks
    (they decide whether the role header is trained)."""
    text = render(tokenizer, template, messages, tools, False)
    if text is None:
        return ["the original template does not render this row"]
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    if list(encoded["input_ids"]) != list(ids):
        return ["input_ids differ from the tokenized rendering of the original template"]
    supervised = {i for (a, e), m in zip(encoded["offset_mapping"], mask) if m for i in range(a, e)}
    problems = []
    for k, (message, flag) in enumerate(zip(messages, flags)):
        content = _text(message.get("content")).strip()
        pieces = [content] if content else []
        pieces += [json.loads(c["function"]["arguments"])["city"] for c in message.get("tool_calls") or []]
        for piece in pieces:
            found = _occurrences(text, piece)
            if flag and message["role"] == "assistant":
                if found and not all(i in supervised for i in range(*found[-1])):
                    problems.append(f"message {k} ({message['role']}) {piece!r} is not supervised")
            elif any(i in supervised for a, e in found for i in range(a, e)):
                problems.append(f"message {k} ({message['role']}, loss {flag}) {piece!r} is supervised")
        if flag and message["role"] == "assistant":
            problems += _turn_edges(tokenizer, template, messages, tools, text, supervised, k, pieces, declared)
    return problems


def _turn_edges(tokenizer: Any, template: str, messages: list[dict[str, Any]], tools: Any, text: str,
                supervised: set[int], k: int, pieces: list[str], declared: bool) -> list[str]:
    problems = []
    alone = render(tokenizer, template, messages[: k + 1], tools, False)
    found = [_occurrences(alone or "", p) for p in pieces]
    if alone is not None and text.startswith(alone) and all(found):
        after = max(f[-1][1] for f in found)
        tail = [i for i in range(after, len(alone)) if not alone[i].isspace()]
        excused = next((m for m in EXCUSED_TAILS if alone.rstrip().endswith(m)), "")
        tail = [i for i in tail if i < len(alone.rstrip()) - len(excused)]
        if tail and not all(i in supervised for i in tail):
            problems.append(f"message {k}: end of turn {alone[after:].strip()!r} is not supervised")
    prompt = render(tokenizer, template, messages[:k], tools, True)
    before = render(tokenizer, template, messages[:k], tools, False) if k else ""
    if not declared and prompt and before is not None and text.startswith(prompt) and len(prompt) > len(before):
        line = _role_line(prompt[len(before):])
        if line.strip() and len(before) + len(line.rstrip()) - 1 in supervised:
            problems.append(f"message {k}: the role header {line!r} is supervised")
    return problems


def _role_line(suffix: str) -> str:
    """The generation prompt's first line: the role header (a prompt may pre-fill more, like `<think>`)."""
    lead = len(suffix) - len(suffix.lstrip())
    newline = suffix.find("\n", lead)
    return suffix if newline < 0 else suffix[: newline + 1]
