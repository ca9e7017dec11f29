"""Rows that load but train nothing, counted as the builder reads them, so ``load_dataset`` says so.

A row with messages and no assistant turn, or whose ``loss_mask`` marks none of its turns, is a
valid row: the builder keeps it, exactly as whileai would. A trainer then sees it and learns
nothing from it. ``NoLoss`` counts such rows chunk by chunk (column-wise, from ``loss_mask`` and
the message roles) with the cause and the first one, and merges across the builder's jobs the
way ``BadRows`` does; the builder warns once per split with a ``NothingToTrainWarning``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["NoLoss"]


def _per_row(lists: pa.ChunkedArray | pa.Array, values: np.ndarray) -> np.ndarray:
    """The sum of ``values`` (one per list element) for each list of ``lists``."""
    parents = np.asarray(pc.list_parent_indices(lists).to_numpy(zero_copy_only=False), dtype=np.int64)
    return np.bincount(parents, weights=values, minlength=len(lists)).astype(np.int64)


@dataclass
class NoLoss:
    """Rows read that carry no loss: how many, why, and where the first was."""

    count: int = 0
    no_assistant: int = 0  # rows with messages but no assistant turn
    unmarked: int = 0  # rows whose loss_mask marks none of their assistant turns
    total: int = 0  # rows read
    first: str | None = None  # "run.jsonl row 4": the first such row, where it is known

    def add(self, table: pa.Table, file: str, first_row: int | None) -> None:
        """Count one table of canonical rows read from ``file``; ``first_row`` is the number of its first
        row in the file (None where skipped rows make the number uncertain)."""
        if "loss_mask" not in table.column_names or not table.num_rows:
            return
        self.total += table.num_rows
        mask = table.column("loss_mask").combine_chunks()
        marked = _per_row(mask, np.asarray(pc.list_flatten(mask).to_numpy(zero_copy_only=False), dtype=np.int64))
        empty = np.flatnonzero(marked == 0)
        if not len(empty):
            return
        messages = table.column("messages").combine_chunks()
        roles = pc.struct_field(pc.list_flatten(messages), "role")
        assistant = np.asarray(pc.fill_null(pc.equal(roles, "assistant"), False).to_numpy(zero_copy_only=False),
                               dtype=np.int64)
        assistants = _per_row(messages, assistant)[empty]
        self.count += len(empty)
        self.no_assistant += int((assistants == 0).sum())
        self.unmarked += int((assistants > 0).sum())
        if self.first is None:
            self.first = f"{file} row {first_row + int(empty[0])}" if first_row is not None else file

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "no_assistant": self.no_assistant, "unmarked": self.unmarked,
                "total": self.total, "first": self.first}

    def merge(self, report: dict[str, Any]) -> None:
        """Add another job's ``to_dict()`` (jobs merge in file order, so the first stays the first)."""
        for key in ("count", "no_assistant", "unmarked", "total"):
            setattr(self, key, getattr(self, key) + int(report.get(key, 0)))
        if self.first is None:
            self.first = report.get("first")

    def message(self, where: str) -> str:
        causes = []
        if self.no_assistant:
            causes.append(f"{self.no_assistant} have no assistant turn")
        if self.unmarked:
            causes.append(f"{self.unmarked} have assistant turns their loss_mask marks none of (mask_mode, or the "
                          "rows' own weight / loss / loss_mask flags)")
        return (f"{self.count} of {self.total} rows of {where} train nothing: {'; '.join(causes)}; first: "
                f"{self.first}. They are kept, as whileai keeps them; a trainer learns nothing from them. Run "
                "whileai_datasets.audit on the source to see every cause, or filter them out "
                "(ds.filter(lambda row: any(row['loss_mask']))).")
