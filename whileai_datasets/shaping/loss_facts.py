"""Rows that train nothing, and rows that open with two system messages: found as the export writes them, said aloud.

whileai writes such rows without a word (a file whose conversations sit under a key it does not read
becomes rows holding only the system prompt, every one with ``trained_messages`` 0). The export keeps
writing exactly whileai's rows, and adds ``rows_without_loss`` to its report when there are any, with a
``NothingToTrainWarning`` (the count, the cause, the first row) and a ``DuplicateSystemWarning``.
``reports.TrainingStats`` counts ``rows_without_loss`` (so the Ray export's report has it too); the
causes and first rows, and the warnings, are the local export's (``LossFacts``).
``row_flags`` is the per-row test both this and ``whileai_datasets.audit`` use.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets.columnar import _arrow
from whileai_datasets.errors import DuplicateSystemWarning, NothingToTrainWarning


def row_flags(lists: pa.Array) -> dict[str, np.ndarray]:
    """Per conversation of a message-list array: ``no_messages``, ``only_system`` (only system messages),
    ``no_assistant`` (other messages but no assistant turn), ``duplicate_system`` (opens with two system
    messages), ``missing_system`` (does not open with one), ``has_system``, ``assistant_turns`` and
    ``last_assistant`` (its last message is the assistant's)."""
    flat = _arrow.flat(lists)
    parent = _arrow.parents(lists)
    lens = _arrow.lengths(lists)
    starts = _arrow.offsets_of(lens)[:-1]
    role = pc.struct_field(flat, "role")
    system = _arrow.to_numpy_bool(pc.equal(role, "system"))
    assistant = _arrow.to_numpy_bool(pc.equal(role, "assistant"))
    systems = np.bincount(parent[system], minlength=len(lens))
    assistants = np.bincount(parent[assistant], minlength=len(lens)).astype(np.int64)
    has = lens > 0
    first_system, second_system, last_assistant = (np.zeros(len(lens), dtype=bool) for _ in range(3))
    first_system[has] = system[starts[has]]
    two = lens > 1
    second_system[two] = system[starts[two] + 1]
    last_assistant[has] = assistant[(starts + lens - 1)[has]]
    return {
        "no_messages": ~has,
        "only_system": has & (systems == lens),
        "no_assistant": has & (systems < lens) & (assistants == 0),
        "duplicate_system": first_system & second_system,
        "missing_system": has & ~first_system,
        "has_system": systems > 0,
        "assistant_turns": assistants,
        "last_assistant": last_assistant,
    }


class LossFacts:
    """Counted chunk by chunk over the rows the export writes (``add``), said once at the end (``finish``)."""

    def __init__(self) -> None:
        self.counts = {"only_system": 0, "no_assistant": 0, "duplicate_system": 0}
        self.first: dict[str, int | None] = dict.fromkeys(self.counts)

    def add(self, rows: pa.Table, offset: int) -> None:
        """Count one chunk of report rows (``offset``: its first row's number)."""
        turns = [n for n in ("messages", "prompt") if n in rows.column_names]
        if not turns or not rows.num_rows:
            return
        flags = row_flags(_arrow.column(rows, turns[0]))
        # prompt/completion rows: the rows with no assistant turn were dropped (counted in the report)
        for name in self.counts if turns[0] == "messages" else ("duplicate_system",):
            hits = np.flatnonzero(flags[name])
            self.counts[name] += len(hits)
            if len(hits) and self.first[name] is None:
                self.first[name] = offset + int(hits[0])

    def finish(self, report: dict[str, Any], where: str) -> None:
        """Warn about the rows that train nothing (``report["rows_without_loss"]``: rows TRL's completion shape
        dropped count too) and about duplicated system messages."""
        dropped = int(report.get("no_completion_dropped", 0))
        empty = self.counts["only_system"] + self.counts["no_assistant"]
        if report.get("rows_without_loss"):
            warnings.warn(self._nothing_text(empty, dropped, report, where), NothingToTrainWarning, stacklevel=4)
        if self.counts["duplicate_system"]:
            warnings.warn(
                f"{self.counts['duplicate_system']} rows open with two system messages (first: row "
                f"{self.first['duplicate_system']} of {where}): system_prompt= was given for rows that carry "
                "their own, so the model is trained to expect both. Drop system_prompt= for those rows, or strip "
                "their own system message first.",
                DuplicateSystemWarning, stacklevel=4)

    def _nothing_text(self, empty: int, dropped: int, report: dict[str, Any], where: str) -> str:
        causes = []
        if self.counts["only_system"]:
            causes.append(f"{self.counts['only_system']} hold only a system message (first: row "
                          f"{self.first['only_system']}; their conversation may sit under a key this package does "
                          "not read, e.g. 'conversations' or 'question'/'reply')")
        if self.counts["no_assistant"]:
            causes.append(f"{self.counts['no_assistant']} have no assistant turn (first: row "
                          f"{self.first['no_assistant']})")
        if dropped:
            causes.append(f"{dropped} had no assistant turn and were dropped from TRL's prompt/completion rows")
        total = int(report.get("n", 0)) + dropped
        return (f"{empty + dropped} of {total} rows of {where} train nothing: " + "; ".join(causes)
                + ". The rows are whileai's, unchanged (report['rows_without_loss'] counts them); run "
                "whileai_datasets.audit on the source to see every cause.")
