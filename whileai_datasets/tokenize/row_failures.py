"""Why a row cannot be trained: a template's refusal, read into one of a few named causes, and counted.

A chat template refuses a row in its own words ("Conversation roles must alternate user/assistant/...",
"This model only supports single tool-calls at once!", jinja2's "can only concatenate str (not "list")
to str"); a mask the check refuses, or a render over its budget, is ours. ``cause_of`` reads each into
one name of ``CAUSES``, so ``tokenize`` can say how many rows of a batch fail and why, and the audit
can count every cause over a whole dataset (each a finding with a ``--fail-on`` name). ``RowFailures``
holds a batch's failures: the row, its cause and the template's own message.

``salvage_row`` is what ``tokenize(salvage=True)`` trains of a row the template cannot take whole: the row
adapted to what the template takes (``SALVAGES``: parallel calls serialized, a turn the template renders only
partly kept as context), else (or then) its longest prefix that passes; each step named per row (``Salvage``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from whileai_datasets.chat_template.masks.parallel_calls import serialize_parallel_calls
from whileai_datasets.errors import RenderBudgetError, TemplateError

__all__ = ["CAUSES", "NOTES", "SALVAGES", "Cause", "Failure", "RowFailures", "Salvage", "SalvageStep", "cause_of",
           "salvage_row", "tagged"]

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
SalvageStep = Literal["parallel_calls_serialized", "partial_turns_as_context", "prefix_salvaged"]
#: What ``salvage`` does to a row the template cannot take whole, in the order it tries (each named per row,
#: with the turns it concerns): what it means (the audit's description of its finding).
SALVAGES: dict[SalvageStep, str] = {
    "parallel_calls_serialized": "rows with an assistant turn of several tool calls the template cannot take "
                                 "(one call per turn), handed to it as consecutive turns of one call each, each "
                                 "followed by its own result (paired by id); each such turn trains, as a model "
                                 "that calls once per turn writes it (salvage=True)",
    "partial_turns_as_context": "rows with a trained assistant turn the template renders only partly (the text "
                                "beside a call dropped, one call of several dropped), kept as context (loss 0, "
                                "rendered as the template renders it) so the turns after it train: the model sees "
                                "the history the template gives it at inference (salvage=True)",
    "prefix_salvaged": "rows that train only the turns before one the template cannot take even so: the longest "
                       "prefix ending with a loss-carrying assistant turn that passes (salvage=True)",
}


class Salvage(NamedTuple):
    """What ``salvage`` trains of a row: its loss-carrying assistant turns that train (a serialized turn counted
    once) and those that do not (kept as context, or cut), and each step taken with the turns it concerns."""

    kept: int
    cut: int
    steps: tuple[tuple[SalvageStep, int], ...] = ()
    #: per marked message of the row as given (loss 1), whether it trains: the turns kept as context or cut are
    #: not always the last ones (the Hub route leaves out exactly these, ``hub.facts.turn_targets``)
    trained: tuple[bool, ...] = ()

    def describe(self) -> str:
        """``"2 assistant turn(s) kept, 1 cut (partial-turns-as-context 1)"``."""
        steps = ", ".join(f"{dashed(name)} {turns}" for name, turns in self.steps)
        return f"{self.kept} assistant turn(s) kept, {self.cut} cut" + (f" ({steps})" if steps else "")


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
    #: what ``salvage`` trains of it, or would (``salvage_row``); None where salvage trains nothing of it
    salvage: Salvage | None = None


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

    def add(self, position: int, row: int, err: TemplateError, salvage: Salvage | None = None) -> None:
        self.items.append(Failure(position, row, cause_of(err), err, salvage))

    def add_salvaged(self, position: int, row: int, err: TemplateError, salvage: Salvage) -> None:
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


#: checks a form of a row: its messages, loss mask and the turns salvage keeps as context in, what trains of it
#: out; raises ``TemplateError``
Check = Callable[[list[dict[str, Any]], list[int], frozenset[int]], Any]


def salvage_row(messages: Sequence[Mapping[str, Any]], mask: Sequence[int], error: TemplateError,
                check: Check) -> tuple[Any, list[dict[str, Any]], list[int], Salvage] | None:
    """What ``salvage`` trains of a row that failed whole with ``error``: ``check``'s result on the form of the
    row that passes, that form (messages and loss mask) and what was done (``Salvage``); None where no form
    with a loss-carrying assistant turn passes.

    The row is adapted while the template's refusal names a turn it can be adapted at: a template that takes
    one call per turn gets parallel calls serialized (``chat_template.masks.parallel_calls``); where the turn
    it refuses is one it renders only partly, every such trained turn (``error.partial``, set by the mask check
    with ``error.turn``) is kept as context at once.
    Where the template refuses the adapted row for another reason, its longest prefix that passes trains.
    """
    given, flags, origin = [dict(m) for m in messages], [int(f) for f in mask], list(range(len(messages)))
    steps: Counter[SalvageStep] = Counter()
    for _ in range(len(given) + 2):  # each step serializes a turn or takes a loss away: bounded
        step = _adapted(given, flags, origin, error)
        if step is None:
            break
        given, flags, origin, name, turns = step
        steps[name] += turns
        try:
            found = check(given, flags, _context(given, flags, origin, mask, len(given)))
            return _salvaged(found, given, flags, origin, mask, messages, steps, len(given))
        except TemplateError as err:
            error = err
    ends = [i for i, (message, flag) in enumerate(zip(given, flags)) if flag and message.get("role") == "assistant"]
    for kept in range(len(ends), 0, -1):
        end = ends[kept - 1] + 1
        if end == len(given):  # the row itself (as adapted): it failed
            continue
        try:
            found = check(given[:end], flags[:end], _context(given, flags, origin, mask, end))
        except TemplateError:
            continue
        return _salvaged(found, given, flags, origin, mask, messages, steps, end)
    return None


def _context(given: list[dict[str, Any]], flags: list[int], origin: list[int], mask: Sequence[int],
             end: int) -> frozenset[int]:
    """The assistant turns of ``given[:end]`` salvage keeps as context (their loss taken away)."""
    return frozenset(i for i in range(end) if not flags[i] and mask[origin[i]] and given[i].get("role") == "assistant")


def _adapted(given: list[dict[str, Any]], flags: list[int], origin: list[int], error: TemplateError
             ) -> tuple[list[dict[str, Any]], list[int], list[int], SalvageStep, int] | None:
    """The row adapted at what ``error`` refuses (``salvage_row``), or None where no adaptation fits."""
    cause = cause_of(error)
    turn = getattr(error, "turn", None)
    several = turn is not None and turn < len(given) and len(given[turn].get("tool_calls") or []) > 1
    if cause == "single_tool_call_only" or (cause == "template_drops_tool_calls" and several):
        serialized, mask, came, turns = serialize_parallel_calls(given, flags, origin)
        if turns:
            return serialized, mask, came, "parallel_calls_serialized", turns
    partial = [i for i in getattr(error, "partial", ()) if i < len(flags) and flags[i]]
    if cause in ("template_drops_content", "template_drops_tool_calls") and turn in partial:
        context = [0 if i in partial else flag for i, flag in enumerate(flags)]
        if any(flag and message.get("role") == "assistant" for flag, message in zip(context, given)):
            return given, context, origin, "partial_turns_as_context", len(partial)
    return None


def _salvaged(found: Any, given: list[dict[str, Any]], flags: list[int], origin: list[int], mask: Sequence[int],
              messages: Sequence[Mapping[str, Any]], steps: Counter[SalvageStep], end: int
              ) -> tuple[Any, list[dict[str, Any]], list[int], Salvage]:
    """``salvage_row``'s answer, ``given[:end]`` passing: the turns of the row as given that train (a turn
    serialized into several counted once), those that do not, and the steps (a prefix: the turns it cuts)."""

    def turns(start: int, stop: int) -> set[int]:
        return {origin[i] for i in range(start, stop) if flags[i] and given[i].get("role") == "assistant"}

    kept = turns(0, end)
    trained = sum(1 for m, f in zip(messages, mask) if f and m.get("role") == "assistant")
    named = dict(steps)
    if end < len(given):
        named["prefix_salvaged"] = len(turns(end, len(given)) - kept)
    order = tuple((name, named[name]) for name in SALVAGES if name in named)
    still = {origin[i] for i in range(end) if flags[i]}
    marked = tuple(i in still for i, flag in enumerate(mask) if flag)
    return found, given[:end], flags[:end], Salvage(len(kept), trained - len(kept), order, marked)
