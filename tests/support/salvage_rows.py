"""Rows a template cannot take whole, and tokenizers for the templates that refuse them, for the salvage tests of
every route (show-mask, export, publish, the Ray engine).

Llama 3.1 (as shipped) refuses an assistant turn that writes text beside its tool call (it renders the call and
drops the text); Gemma 3 refuses the tool role. Each tool row opens with a plain exchange. With ``salvage=True``,
Llama 3.1's rows keep the call turn as context (rendered without its text) and train the answer after it; Gemma 3's
train their first exchange and cut the rest.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.tiny_lm import LLAMA3_TOKENS, train_tokenizer

SCHEMA = {"type": "function", "function": {"name": "track", "description": "Track a parcel.",
                                           "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}}}}


def _row(i: int, *, beside: bool) -> dict[str, Any]:
    call = {"id": f"call_{i}", "type": "function", "function": {"name": "track", "arguments": json.dumps({"id": i})}}
    return {"tools": [SCHEMA], "messages": [
        {"role": "user", "content": f"parcel {i} is late"},
        {"role": "assistant", "content": f"sorry about parcel {i}"},
        {"role": "user", "content": f"where is parcel {i} now?"},
        {"role": "assistant", "content": "checking the depot" if beside else "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": f"parcel {i} is at depot {i + 3}"},
        {"role": "assistant", "content": f"parcel {i} waits at depot {i + 3}"}]}


#: Tool rows (text beside the call in the even ones), then a plain row every template takes.
ROWS = [_row(i, beside=i % 2 == 0) for i in range(4)] + [
    {"messages": [{"role": "user", "content": "a plain question"}, {"role": "assistant", "content": "a plain answer"}]}]
#: Per template: the rows it cannot take whole (read off the templates, see the module docstring).
REFUSED = {"llama3_1": [0, 2], "gemma3": [0, 1, 2, 3]}
#: Per template: what salvage makes of each refused row (``Salvage.describe()``: assistant turns kept and cut, and
#: the step), and the text of the row's turns that trains after the first exchange ("" where none does).
SALVAGED = {"llama3_1": ("2 assistant turn(s) kept, 1 cut (partial-turns-as-context 1)", "waits at depot"),
            "gemma3": ("1 assistant turn(s) kept, 2 cut (prefix-salvaged 2)", "")}
#: Per template: the loss-carrying turns each refused row does not train with salvage.
CUT = {"llama3_1": 1, "gemma3": 2}


def salvage_tokenizer(name: str) -> Any:
    """A small fast tokenizer trained on ``ROWS`` with the shipped template ``name`` (Llama 3's special tokens for
    ``llama3_1``)."""
    from whileai_datasets import ChatTemplate

    tokens: dict[str, Any] = {k: v for k, v in LLAMA3_TOKENS.items() if k != "additional"} if name == "llama3_1" else {}
    extra = LLAMA3_TOKENS["additional"] if name == "llama3_1" else None
    return train_tokenizer([json.dumps(r) for r in ROWS] * 5, chat_template=ChatTemplate.shipped(name).text,
                           vocab_size=400, additional=extra, **tokens)
