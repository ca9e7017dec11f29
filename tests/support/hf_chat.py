"""transformers' ``apply_chat_template`` with the messages prepared as transformers 5.21 and later prepare them.

From 5.21, transformers hands a message's reasoning (``reasoning_content``, ``thinking`` or ``reasoning``) to
the template under both ``reasoning_content`` and ``thinking``, and ``ChatTemplate.render`` does the same. Older
releases (the trainers' pins: axolotl 0.19 5.16.1, Unsloth <=5.17, oumi 0.9 <5.17, ms-swift 4.6 <5.20) pass
the message as given, so a template that reads only ``thinking`` (gpt-oss) or only ``reasoning_content``
renders no reasoning for the other key. The tests that use this compare how a template executes, so on those
releases the same aliasing is applied here first; README "Supported releases" says what a trainer sees.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from packaging.version import Version

#: the first transformers release that aliases a message's reasoning keys itself
ALIASES_REASONING = Version("5.21")
_REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")


def aliased(messages: Any) -> Any:
    """``messages`` with each message's reasoning under both names (what transformers 5.21+ gives templates)."""
    out = []
    for message in messages:
        if isinstance(message, dict):
            reasoning = next((message[key] for key in _REASONING_KEYS if message.get(key) is not None), None)
            if reasoning is not None:
                message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        out.append(message)
    return out


def apply_chat_template(tokenizer: Any, messages: Any, **kwargs: Any) -> Any:
    if Version(version("transformers")) < ALIASES_REASONING:
        messages = aliased(messages)
    return tokenizer.apply_chat_template(messages, **kwargs)
