"""Type aliases and the TypedDicts of the rows this package reads and writes."""

from __future__ import annotations

from typing import Any, Literal, TypedDict, Union

import pyarrow as pa

Role = Literal["system", "user", "assistant", "tool"]
MaskMode = Literal["assistant", "final"]
OnBadRow = Literal["raise", "skip"]
#: How a row longer than ``max_length`` is cut: at ``max_length`` (``"cut"``), or after the last whole trained turn
#: that fits (``"whole_turns"``: the longest prefix that ends on a complete turn), or split into several rows at
#: user turns, each row carrying the leading system messages and the tools (``"split_turns"``)
Truncation = Literal["cut", "whole_turns", "split_turns"]
ExportFormat = Literal["openai", "trl", "fireworks"]
#: Which messages of an OpenAI export carry ``weight``: assistant turns only (OpenAI, Fireworks) or every
#: message, context at 0 (Together, where any weight makes it read the weights of every message).
MessageWeights = Literal["assistant", "all"]
TrlKind = Literal["training", "completion", "preference"]
#: Where ``audit`` counts: this process, or Ray Data actors.
Engine = Literal["local", "ray"]
#: What a publish does with a secret it finds: stop before any upload, replace it with a placeholder, or publish it.
SecretsPolicy = Literal["refuse", "redact", "allow"]

Batch = Union[pa.Table, dict[str, list[Any]]]

ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")


class FunctionCall(TypedDict):
    name: str
    arguments: str


class ToolCall(TypedDict):
    id: str
    type: str
    function: FunctionCall


class ContentPart(TypedDict, total=False):
    """One content part: ``type`` plus ``text`` or a media reference (``image``,
    ``url``, ``path``, ``image_url``, ``video``, ...), as it was written."""

    type: str
    text: str


class _MessageBase(TypedDict):
    role: str
    content: str | list[ContentPart]


class Message(_MessageBase, total=False):
    reasoning_content: str
    tool_calls: list[ToolCall]
    tool_call_id: str
    name: str
