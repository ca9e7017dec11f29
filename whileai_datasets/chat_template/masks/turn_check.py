"""What a patch refusal says about masks: whether ``tokenize`` can still mask the template turn by turn.

A template ``with_generation()`` refuses is masked by per-turn rendering
(``turns.py``), whose result every row passes through ``mask_check.py``. So
the refusal can say which of the two holds, found the same way: each probe
conversation that renders is masked turn by turn, every assistant turn with
loss, and checked. Either every one passes (``tokenize`` masks the template
turn by turn) or the first failure is named (per-turn rendering cannot mask
it either, and why).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from whileai_datasets.chat_template.analysis.probes import PINNED_NOW
from whileai_datasets.chat_template.masks.mask_check import check_row
from whileai_datasets.chat_template.masks.turns import TurnRenderer
from whileai_datasets.errors import TemplateError

if TYPE_CHECKING:
    from whileai_datasets.chat_template.analysis.analysis import Analysis

TURNS_MASK = "tokenize masks it turn by turn instead (mask method 'turns', checked on {n} probe conversations)."
NO_TURNS_MASK = "tokenize cannot mask it turn by turn either: {why}."


def cannot_mask_turn_by_turn(hint: str) -> bool:
    """Whether a refusal's hint (written with ``NO_TURNS_MASK``) says per-turn rendering fails too."""
    return NO_TURNS_MASK.split("{", 1)[0] in hint


def _loss_mask(messages: list[dict[str, Any]]) -> list[int]:
    return [int(m.get("role") == "assistant") for m in messages]


def _first_failure(turns: TurnRenderer, analysis: Analysis, now: datetime) -> tuple[int, str | None]:
    """How many probes per-turn rendering masks right, and the first it does not (None: none)."""
    checked = 0
    for result in analysis.ok:
        probe = result.run.probe
        if not result.meaningful or probe.add_generation_prompt or not any(t.must[1] > t.must[0]
                                                                             for t in result.run.turns):
            continue
        mask = _loss_mask(probe.messages)
        try:
            rendered = turns.render(probe.messages, probe.tools, now)
            spans = turns.spans(rendered, probe.messages, probe.tools, mask, now)
        except TemplateError as err:
            return checked, f"probe {probe.name!r} does not render turn by turn ({err.problem})"
        violation = check_row(rendered, probe.messages, mask, spans, spans_known=turns.tracking_exact)
        if violation is not None:
            return checked, f"on probe {probe.name!r}, messages[{violation.message}]: {violation.problem}"
        checked += 1
    return checked, None if checked else "no probe conversation has an assistant turn to mask"


def turn_by_turn_note(text: str, kwargs: dict[str, Any], name: str, analysis: Analysis,
                      tracking_exact: bool) -> str:
    """One sentence for a patch refusal's hint: per-turn masking works, or why it does not."""
    turns = TurnRenderer(text, kwargs, name, analysis.generation_prompt or "", tracking_exact)
    checked, failure = _first_failure(turns, analysis, PINNED_NOW)
    return NO_TURNS_MASK.format(why=failure) if failure else TURNS_MASK.format(n=checked)
