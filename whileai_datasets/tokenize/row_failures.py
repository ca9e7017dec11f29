"""Why a row cannot be trained: a template's refusal, read into one of a few named causes, and counted.

A chat template refuses a row in its own words ("Conversation roles must alternate user/assistant/...",
"This model only supports single tool-calls at once!", jinja2's "can only concatenate str (not "list")
to str"); a mask the check refuses, or a render over its budget, is ours. ``cause_of`` reads each into
one name of ``CAUSES``, so ``tokenize`` can say how many rows of a batch fail and why, and the audit
can count every cause over a whole dataset (each a finding with a ``--fail-on`` name). ``RowFailures``
holds a batch's failures: the row, its cause and the template's own message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from whileai_datasets.errors import RenderBudgetError, TemplateError

__all__ = ["CAUSES", "NOTES", "Cause", "Failure", "RowFailures", "cause_of", "tagged"]

Cause = Literal["roles_must_alternate", "single_tool_call_only", "tool_call_id_format", "content_type",
                "template_drops_tool_calls", "template_drops_content", "render_budget", "mask_mismatch",
                "template_error", "history_partly_rendered", "turn_runs_on"]
#: Each cause: what it means (the audit's description of its finding).
CAUSES: dict[Cause, str] = {
    "roles_must_alternate": "rows the template refuses because their roles do not alternate as it requires "
                            "(user/assistant only, e.g. a tool turn, two user turns in a row)",
    "single_tool_call_only": "rows the template refuses because an assistant turn makes several tool calls and it "
                             "takes one per turn",
    "tool_call_id_format": "rows the template refuses because a tool-call id is not of the form it requires "
                           "(e.g. 9 letters and digits)",
    "content_type": "rows the template fails on because a value has another type than it expects (content "
                    "given as a list of parts where it concatenates strings)",
    "template_drops_tool_calls": "rows with a trained turn whose tool calls (names or arguments) the template "
                                 "does not render: the turn would train its end marker without them",
    "template_drops_content": "rows with a trained turn whose content the template does not render: the turn "
                              "would train without it",
    "render_budget": "rows whose render went over the render budget (RenderBudget: output size or time)",
    "mask_mismatch": "rows whose token mask fails the check: no mask method finds the turns the loss_mask "
                     "marks in the render",
    "template_error": "rows the template raises on for another reason (its own message is shown)",
}
#: What a row that trains is named for (a notice, not a failure: the row is kept; tokenize warns with
#: ``PartialRenderWarning``, the audit counts each): what it means.
NOTES: dict[Cause, str] = {
    "history_partly_rendered": "rows that train, but whose render lacks a tool call or the text beside a call of "
                               "an earlier assistant turn without loss (the template drops it from the history): "
                               "the model is shown a history it did not write",
    "turn_runs_on": "rows with a trained turn whose text the template writes straight into the next message's, "
                    "with no end of its own (Gemma 4's v5 template after a call): what trains there is not what "
                    "the model writes at inference",
}
#: The template's words for each cause (lower case, searched in the error's text), first match wins.
_WORDS: tuple[tuple[Cause, re.Pattern[str]], ...] = (
    ("roles_must_alternate", re.compile(r"must alternate|alternating|roles? (?:must|should) be")),
    ("single_tool_call_only", re.compile(r"single tool[- ]?calls?|one tool[- ]?call|multiple tool[- ]?calls")),
    ("tool_call_id_format", re.compile(r"tool[ _-]?call[ _-]?id|\bid of \d+ char|\b\d+ characters? id")),
    ("content_type", re.compile(r"can only concatenate|unsupported operand type|not \"?(?:list|dict)\"?\b|"
                                r"'(?:list|dict)' object|content must be a string|expected str|content type")),
)


def tagged(err: TemplateError, cause: Cause) -> TemplateError:
    """``err`` marked with its cause where the raiser knows it (the mask check)."""
    err.cause = cause  # type: ignore[attr-defined]
    return err


def cause_of(err: BaseException) -> Cause:
    """The named cause of a row's render or mask failure."""
    known = getattr(err, "cause", None)
    if known in CAUSES or known in NOTES:
        return known  # type: ignore[no-any-return]
    if isinstance(err, RenderBudgetError):
        return "render_budget"
    text = (getattr(err, "problem", None) or str(err)).lower()
    for cause, words in _WORDS:
        if words.search(text):
            return cause
    return "template_error"


def dashed(cause: str) -> str:
    """A cause as ``--fail-on`` and the reports spell it."""
    return cause.replace("_", "-")


@dataclass(frozen=True)
class Failure:
    """One row that failed: its place in the batch, its number (the dataset's when known), why."""

    position: int
    row: int
    cause: Cause
    error: TemplateError
    #: (assistant turns a prefix of the row trains, turns cut with the one the template cannot take): what
    #: ``salvage`` trains of it, or would; None where no prefix trains
    salvage: tuple[int, int] | None = None


class RowFailures:
    """The failures of the batch being tokenized; ``take`` hands them over and starts afresh.

    Pickles empty (as ``PieceEncoder``), so a transform holding it hashes the same before and after use.
    """

    def __init__(self) -> None:
        self.items: list[Failure] = []
        #: rows that failed whole and train a prefix instead (``salvage=True``), each with its cause
        self.salvaged: list[Failure] = []

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def add(self, position: int, row: int, err: TemplateError, salvage: tuple[int, int] | None = None) -> None:
        self.items.append(Failure(position, row, cause_of(err), err, salvage))

    def add_salvaged(self, position: int, row: int, err: TemplateError, salvage: tuple[int, int]) -> None:
        self.salvaged.append(Failure(position, row, cause_of(err), err, salvage))

    def take(self) -> list[Failure]:
        items, self.items = self.items, []
        return items

    def take_salvaged(self) -> list[Failure]:
        items, self.salvaged = self.salvaged, []
        return items


def by_cause(failures: list[Failure]) -> dict[Cause, list[Failure]]:
    """The failures grouped by cause, the most frequent first."""
    groups: dict[Cause, list[Failure]] = {}
    for failure in failures:
        groups.setdefault(failure.cause, []).append(failure)
    return dict(sorted(groups.items(), key=lambda item: -len(item[1])))


def summary(failures: list[Failure], total: int) -> str:
    """``"3 of 40 rows of this batch fail: 2 roles-must-alternate (rows 1, 5), 1 content-type (row 9)"``."""
    parts = []
    for cause, items in by_cause(failures).items():
        rows = [f.row for f in items[:3]]
        more = ", ..." if len(items) > 3 else ""
        parts.append(f"{len(items)} {dashed(cause)} (row{'s' if len(items) > 1 else ''} "
                     f"{', '.join(map(str, rows))}{more})")
    return f"{len(failures)} of {total} rows of this batch fail: {', '.join(parts)}"
