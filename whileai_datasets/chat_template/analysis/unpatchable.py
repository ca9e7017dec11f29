"""Why a template cannot be patched: one exception class per kind of refusal.

``refusal_class`` names the kind (BENCHMARKS.md counts patch refusals per class),
and every message ends with it: ``[refusal class: mixed-header]``.
"""

from __future__ import annotations

from whileai_datasets.errors import TemplateError


class Unpatchable(TemplateError):
    """The template's structure does not allow a safe patch (reason in the message).

    ``refusal_class`` names the kind of refusal (BENCHMARKS.md counts them per class)."""

    refusal_class = "other"

    def __str__(self) -> str:
        return f"{super().__str__()} [refusal class: {self.refusal_class}]"


class MixedHeader(Unpatchable):
    """A unit writes the role header in some turns and generated text in others."""

    refusal_class = "mixed-header"
    unit_start: int = -1
    #: what the unit writes before the assistant text, per generated execution ('' where it starts with it)
    prefixes: frozenset[str] = frozenset()
    #: the assistant text starts past the output's first operand (which writes only header text)
    past_first_operand: bool = False


class MixedOperands(Unpatchable):
    """An output mixes assistant text with other text and cannot be split between operands."""

    refusal_class = "mixed-header"
    unit_start: int = -1
    #: what the output writes before the assistant text in the execution that was refused
    prefixes: frozenset[str] = frozenset()


class SharedOutput(Unpatchable):
    """One output writes assistant text in some turns and other text in others, with no test between them."""

    refusal_class = "shared-output"


class TraceChanged(Unpatchable):
    """Tracing (the unit markers) changes what the template renders."""

    refusal_class = "trace-changes-output"


class NoTopLevelOutput(Unpatchable):
    """No top-level output writes the assistant text (a macro or a capture does)."""

    refusal_class = "no-top-level-output"


class VerificationFailed(Unpatchable):
    """The patched template renders differently or its blocks miss or overreach."""

    refusal_class = "verification"


class EmptyContentVerification(VerificationFailed):
    """Verification fails on a probe whose assistant content is empty."""

    refusal_class = "empty-assistant-content"


class NotAChat(Unpatchable):
    """No probe renders, or none renders an assistant turn to learn."""

    refusal_class = "no-assistant-turn"
