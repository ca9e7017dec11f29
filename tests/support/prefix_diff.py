"""The quadratic prefix-diff method, as a reference for token masks.

This is how the whileai recipe bridged per-message masks to tokens: for every
assistant turn that carries loss, render and tokenize the conversation before
it (with the generation prompt) and through it; the tokens in between are the
turn's: what the model writes after the generation prompt, its end-of-turn
marker and whatever the template prints with it. It is correct only
where the template is prefix-preserving, and costs two extra renders and
tokenizations per turn.
"""

from __future__ import annotations

from typing import Any


def prefix_diff_mask(
    tokenizer: Any, template: str, messages: list[dict[str, Any]], loss_mask: list[int], tools: Any = None
) -> tuple[list[int], list[int]]:
    """(input_ids, mask) of ``messages`` by the prefix-diff method."""

    def ids(turns: list[dict[str, Any]], generation_prompt: bool) -> list[int]:
        text = tokenizer.apply_chat_template(
            turns, tools=tools, chat_template=template, tokenize=False, add_generation_prompt=generation_prompt
        )
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    full = ids(messages, False)
    mask = [0] * len(full)
    for k, (message, flag) in enumerate(zip(messages, loss_mask)):
        if not flag or message["role"] != "assistant":
            continue
        start = len(ids(messages[:k], True))
        stop = len(ids(messages[: k + 1], False))
        for i in range(start, min(stop, len(full))):
            mask[i] = 1
    return full, mask
