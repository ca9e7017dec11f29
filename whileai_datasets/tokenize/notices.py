"""What ``tokenize`` says about the rows it drops: none supervised (a ``NothingToTrainWarning``), or bad.

A dropped row never goes by in silence: each warning gives how many rows of the batch, why, and the
first one, and names the option that changes it in the words of the surface it is shown in
(``whileai_datasets.option_names``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from whileai_datasets import option_names
from whileai_datasets.errors import NothingToTrainWarning
from whileai_datasets.tokenize.row_failures import by_cause, dashed

__all__ = ["BadMaskRowsWarning", "PartialRenderWarning", "SalvagedRowsWarning", "UnsupervisedRowsWarning",
           "bad_rows_warning", "dropped_warning", "partial_warning", "salvaged_warning"]


class UnsupervisedRowsWarning(NothingToTrainWarning):
    """Rows with no supervised token were dropped from a tokenized batch (the message says why and which first)."""


class BadMaskRowsWarning(UserWarning):
    """Rows whose mask failed the check (or that did not render) were dropped, as asked (on_bad_row='skip')."""


class SalvagedRowsWarning(UserWarning):
    """Rows the template could not take whole train adapted to what it takes (parallel calls serialized, a turn
    it renders partly kept as context) or the turns before the one it cannot take (salvage=True)."""


class PartialRenderWarning(UserWarning):
    """Rows that train, but whose render is not what the model wrote: an earlier turn the template renders
    partially, or a trained turn it runs into the next (the message names the rows, by cause)."""


def dropped_warning(rows: Sequence[Any], indices: Sequence[int] | None) -> None:
    """Warn (``UnsupervisedRowsWarning``) when rows of a batch have no supervised token: how many, why (the
    mask marks nothing in the render, or ``max_length`` cut all of it) and the first such row."""
    empty = [i for i, row in enumerate(rows) if row is not None and row.supervised == 0]
    if not empty:
        return
    cut = sum(1 for i in empty if rows[i].supervised_lost)  # type: ignore[union-attr]
    first = empty[0] if indices is None else indices[empty[0]]
    first_cause = "max_length cut all of its supervision" if rows[empty[0]].supervised_lost else (  # type: ignore[union-attr]
        "its loss_mask marks no assistant turn the template renders")
    warnings.warn(
        f"dropped {len(empty)} of {len(rows)} rows in this batch: no token of theirs is supervised "
        f"({len(empty) - cut} with no assistant turn with loss in the render, {cut} whose supervision "
        f"max_length cut off); first: row {first} ({first_cause}). Training on an all-masked row "
        "teaches nothing and skews the loss average; whileai_datasets.audit lists every such row's cause.",
        UnsupervisedRowsWarning,
        stacklevel=3,
    )


def bad_rows_warning(bad: int, total: int, indices: Sequence[int] | None, failures: Sequence[Any] = ()) -> None:
    """Warn (``BadMaskRowsWarning``) when rows of a batch were dropped as bad: how many, and by cause
    (``failures``: ``row_failures.Failure`` of the batch), with each cause's first message."""
    if not bad:
        return
    causes = "; ".join(f"{len(items)} {dashed(cause)} (first: row {items[0].row}: {items[0].error.problem})"
                       for cause, items in by_cause(list(failures)).items())
    warnings.warn(
        f"dropped {bad} of {total} rows in this batch whose token mask failed the check or that the "
        f"template could not render ({option_names.spell('on_bad_row', 'skip')})" + (f": {causes}" if causes else "")
        + "; mask_report counts them as bad_rows_dropped, whileai_datasets.audit counts every cause over a dataset.",
        BadMaskRowsWarning,
        stacklevel=3,
    )


def salvaged_warning(salvaged: Sequence[Any], total: int) -> None:
    """Warn (``SalvagedRowsWarning``) when rows of a batch train only in part, or adapted (``salvage=True``): how
    many, and each row (the first ten) with its cause, the turns kept and cut and each step salvage took
    (``row_failures.Failure`` with ``salvage``, ``row_failures.SALVAGES``)."""
    if not salvaged:
        return
    named = "; ".join(f"row {f.row} ({dashed(f.cause)}): {f.salvage.describe()}" for f in salvaged[:10])
    more = f"; and {len(salvaged) - 10} more" if len(salvaged) > 10 else ""
    warnings.warn(
        f"{len(salvaged)} of {total} rows in this batch the template cannot take whole train adapted to what it "
        f"takes, or only their turns before one it cannot take ({option_names.spell('salvage', True)}): "
        f"{named}{more}; whileai_datasets.audit counts them (salvaged, and each step by name).",
        SalvagedRowsWarning,
        stacklevel=3,
    )


def partial_warning(total: int, notices: Sequence[Any]) -> None:
    """Warn (``PartialRenderWarning``) when rows of a batch train with a render that is not what the model
    wrote (``notices``: ``row_failures.Failure`` of the rows named, ``row_failures.NOTES``): how many, by
    cause, naming the rows and the first one's message."""
    if not notices:
        return
    causes = []
    for cause, items in by_cause(list(notices)).items():
        rows = sorted({f.row for f in items})
        shown = ", ".join(map(str, rows[:8])) + (", ..." if len(rows) > 8 else "")
        causes.append(f"{len(rows)} {dashed(cause)} (row{'s' if len(rows) > 1 else ''} {shown}; first: "
                      f"{items[0].error.problem})")
    named = len({f.row for f in notices})
    warnings.warn(
        f"{named} of {total} rows in this batch train with a render that is not what the model wrote: "
        + "; ".join(causes) + ". They are kept; whileai_datasets.audit counts them over a dataset.",
        PartialRenderWarning,
        stacklevel=3,
    )
