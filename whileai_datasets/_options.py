"""The option checks every entry point shares, and ``TrainingOptions``.

Three kinds of check, one error class (``OptionError``) and one message form each, whichever entry point
(``loss_mask``, ``load_dataset``, ``export_dataset``, ``audit``, ``tokenize``, the command line) meets
the value:

* a choice comes from its ``Literal`` vocabulary in ``_typing`` (``typing.get_args``: the alias is the
  only list of the allowed values);
* a flag must be a real ``bool`` (``unroll="no"`` is a non-empty string, so Python reads it as true:
  refused rather than obeyed backwards);
* a count a real ``int`` (``True`` is an int to Python but not a count here; ``"10"`` and ``2.5`` are
  refused rather than converted, and a negative count is refused rather than clamped to 0).

Options are named as the user passes them where the error is shown (``option_names``).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from whileai_datasets import option_names
from whileai_datasets._typing import Engine, ExportFormat, MaskMode, MessageWeights, OnBadRow, Truncation, TrlKind
from whileai_datasets.errors import OptionError

#: What to do about a bad choice, per vocabulary (the message lists the allowed values already).
_CHOICE_HINTS: dict[Any, str] = {
    MaskMode: "'assistant' trains every assistant turn, 'final' only the last one of each row.",
    ExportFormat: "'openai' for OpenAI-style files, 'trl' for TRL's SFTTrainer, 'fireworks' for Fireworks.",
    MessageWeights: "'assistant' for OpenAI and Fireworks files, 'all' for Together's.",
    OnBadRow: "'raise' stops at the first bad row, 'skip' leaves bad rows out and counts them.",
    TrlKind: "'training' for whole conversations, 'completion' for prompt/completion, 'preference' for pairs.",
    Engine: "'local' runs in this process, 'ray' on Ray Data (a cluster, or a local runtime).",
}

#: What to pass instead of a bad count, for the counts more than one entry point takes.
_COUNT_HINTS = {
    "max_length": "Pass the trainer's max_length (a positive number of tokens, e.g. max_length=4096), or None to "
                  "keep whole rows.",
    "max_tool_output_chars": "Pass the number of characters a tool message keeps (0 keeps none), or None for no cut.",
}


def _shown(name: str) -> str:
    return option_names.spell(name).rstrip("=")


def choices(vocabulary: Any) -> tuple[str, ...]:
    """The values of a ``Literal`` vocabulary, in its order (what ``argparse`` offers too)."""
    return typing.get_args(vocabulary)


def one_of(vocabulary: Any) -> str:
    """``{a,b}``: how a command's help shows a flag's vocabulary. The command does not check the value
    itself (no argparse ``choices``): the keyword it is passed to does, so a bad one reads the same there."""
    return "{" + ",".join(choices(vocabulary)) + "}"


def check_choice(value: Any, name: str, vocabulary: Any, *, optional: bool = False, hint: str | None = None) -> Any:
    """``value`` when it is one of ``vocabulary``'s values (or None, when ``optional``); else ``OptionError``."""
    allowed = choices(vocabulary)
    if (value is None and optional) or (isinstance(value, str) and value in allowed):
        return value
    listed = ", ".join(map(repr, allowed)) + (" or None" if optional else "")
    raise OptionError(f"{_shown(name)} must be one of {listed}, got {value!r}",
                      hint=hint or _CHOICE_HINTS.get(vocabulary, "Pass one of those."))


def check_flag(value: Any, name: str) -> bool:
    """``value`` when it is ``True`` or ``False``; else ``OptionError`` naming the option."""
    if type(value) is not bool:
        raise OptionError(f"{_shown(name)} must be True or False, got {type(value).__name__} {value!r}",
                          hint=f"Pass {name}=True or {name}=False; a string such as 'no' is not read as False.")
    return value


def check_count(value: Any, name: str, *, minimum: int = 0, optional: bool = True,
                hint: str | None = None) -> int | None:
    """``value`` when it is an ``int`` of at least ``minimum`` (or None, when ``optional``); else ``OptionError``."""
    if value is None and optional:
        return None
    if type(value) is not int or value < minimum:
        allowed = f"a whole number, {minimum} or more" + (", or None" if optional else "")
        raise OptionError(f"{_shown(name)} must be {allowed}, got {type(value).__name__} {value!r}",
                          hint=hint or _COUNT_HINTS.get(name, f"Pass e.g. {name}={max(minimum, 2000)}."))
    return value


@dataclass(frozen=True, kw_only=True)
class TrainingOptions:
    """What turns canonical rows into training rows and tokens, checked once, when it is made.

    The defaults are what ``load_dataset("whileai/export", ...)`` + ``tokenize`` do: ``<think>`` kept,
    each row's tools kept, loss on every assistant turn, no unrolling, no cut; ``audit`` and
    ``show-mask`` take them too, so they count and show what that path trains. ``export_dataset`` (and
    the commands that export or push rollouts) start from :meth:`whileai_export` instead (whileai's own
    defaults: think stripped), so an export is byte-equal to whileai's. Change a field with ``dataclasses.replace``; record it with
    :meth:`to_dict` and read it back with :meth:`from_dict`.

    Attributes:
        system_prompt: Prepended to rows that do not open with it; None adds nothing.
        tools: Tool schemas put on every row, in place of its own, as whileai's ``tools=`` does (a tuple
            of dicts; any sequence is taken); None: each row keeps its own.
        strip_think: Remove ``<think>`` blocks and reasoning from assistant turns.
        mask_mode: ``"assistant"`` (loss on every assistant turn) or ``"final"`` (the last one only).
        unroll: One training sample per assistant turn.
        max_tool_output_chars: Characters a tool message keeps (0 keeps none); None: no cut.
        format: The written shape: ``"openai"``, ``"trl"`` or ``"fireworks"``.
        weights: ``format="openai"`` only: also write each message's ``weight`` (``"assistant"`` or
            ``"all"``); None writes none.
        validate: Refuse rows whose tool-call arguments are not structured or that leak ``privileged``.
        max_length: Tokens a row is cut to when tokenized; None: no cut.
        salvage: When tokenized, a conversation the template cannot take whole (one assistant turn it
            refuses, or renders without that turn's output) trains what the template takes of it, named per
            row, instead of being dropped: parallel calls serialized into one call per turn, a turn the
            template renders only partly kept as context (loss 0), else its longest prefix ending with a
            loss-carrying assistant turn that the template takes (docs/token-masks.md, "Salvage"). Off: such
            a row is dropped, and the audit says what salvage would keep.
        truncation: How a longer row is cut: ``"cut"`` at ``max_length``, ``"whole_turns"`` after the last
            trained turn that ends within it, or ``"split_turns"`` into several rows at its user turns, each
            carrying the system prompt and tools (recorded by :meth:`to_dict` only when not ``"cut"``).
    Raises:
        OptionError: a field has a value it cannot take (named, with the allowed values).
    Example:
        >>> TrainingOptions.whileai_export(format="trl").strip_think
        True
    """

    system_prompt: str | None = None
    tools: tuple[dict[str, Any], ...] | None = field(default=None, hash=False)
    strip_think: bool = False
    mask_mode: MaskMode = "assistant"
    unroll: bool = False
    max_tool_output_chars: int | None = None
    format: ExportFormat = "openai"
    weights: MessageWeights | None = None
    validate: bool = True
    max_length: int | None = None
    salvage: bool = False
    truncation: Truncation = "cut"

    def __post_init__(self) -> None:
        for name in ("strip_think", "unroll", "validate", "salvage"):
            check_flag(getattr(self, name), name)
        check_choice(self.mask_mode, "mask_mode", MaskMode)
        check_choice(self.format, "format", ExportFormat)
        check_choice(self.truncation, "truncation", Truncation)
        check_choice(self.weights, "weights", MessageWeights, optional=True)
        check_count(self.max_tool_output_chars, "max_tool_output_chars")
        check_count(self.max_length, "max_length", minimum=1)
        if self.weights is not None and self.format != "openai":
            raise OptionError(f"weights apply to format='openai' files, got format={self.format!r}",
                              location=_shown("weights"),
                              hint="Fireworks rows already carry weight on assistant turns; TRL reads no "
                                   "per-message weight.")
        if self.tools is not None and not isinstance(self.tools, tuple):
            object.__setattr__(self, "tools", _tool_tuple(self.tools))

    @classmethod
    def whileai_export(cls, **changes: Any) -> TrainingOptions:
        """whileai's export defaults (``strip_think=True``; the rest as the class's), with ``changes``."""
        return cls(**{"strip_think": True, **changes})

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TrainingOptions:
        """The options :meth:`to_dict` recorded (missing keys take the defaults; unknown keys are refused)."""
        known = {item.name for item in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise OptionError(f"unknown training option(s) {', '.join(map(repr, unknown))}",
                              hint=f"Known: {', '.join(sorted(known))}.")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """Every field by name, JSON-ready (``tools`` as a list)."""
        values = {item.name: getattr(self, item.name) for item in dataclasses.fields(self)}
        values["tools"] = list(self.tools) if self.tools is not None else None
        if values["truncation"] == "cut":  # today's cut: records written before the option read the same
            del values["truncation"]
        return values


def _tool_tuple(tools: Any) -> tuple[dict[str, Any], ...]:
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence) \
            or not all(isinstance(tool, Mapping) for tool in tools):
        raise OptionError(f"tools must be a list of tool schemas (dicts), got {type(tools).__name__}",
                          hint='Pass tools=[{"type": "function", "function": {...}}, ...], or None.')
    return tuple(tools)
