"""The audit's counters: each stays the same size however many rows go by.

A ``Finding`` is a count of rows (plus an optional amount: tokens lost, turns
lost, characters cut) and the first few row numbers; a ``Histogram`` is a
fixed set of bins over a per-row figure; ``Worst`` keeps the few rows with the
lowest score. Every ``add`` takes a whole chunk as numpy arrays, so memory is
flat in the row count and no Python loop runs per row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Row numbers kept per finding (the first in source order; each ``add`` gets its rows in order).
FIRST_LOCATIONS = 5
#: Rows kept per "worst" list.
WORST_ROWS = 10
#: Edges of the count histograms: 0 to 8 one by one, then four bins per doubling up to 2**17 (a bin holds
#: ``edges[i] <= value < edges[i + 1]``), so row lengths near a ``max_length`` fall in bins a few percent wide.
COUNT_EDGES = tuple(sorted({*range(9), *(round(2 ** (k / 4)) for k in range(13, 69))}))
#: Edges of the share histograms (0-1 in twentieths; the last bin holds exactly 1.0 too).
SHARE_EDGES = tuple(round(i / 20, 2) for i in range(21))


@dataclass
class Finding:
    """Rows that have one problem (or one property): how many, an amount, and where the first ones are."""

    name: str
    description: str
    problem: bool = True  # counted by ``--fail-on`` / shown as a problem; False: a plain figure
    rows: int = 0
    amount: int = 0
    unit: str = ""  # what ``amount`` counts ("" when there is none)
    first: list[int] = field(default_factory=list)
    #: locations given as they are (rows the reader left out have no row number in the rows read)
    where: list[dict[str, Any]] = field(default_factory=list)
    first_error: str | None = None

    def add(self, flags: np.ndarray, row_numbers: np.ndarray, amounts: np.ndarray | None = None) -> None:
        """Count the rows ``flags`` marks; ``row_numbers`` are their numbers in the source."""
        hits = np.flatnonzero(flags)
        self.rows += len(hits)
        if amounts is not None:
            self.amount += int(np.asarray(amounts)[hits].sum())
        if len(hits):  # a chunk may count a finding twice (zero_loss: rows with no message, then the others)
            met = np.concatenate([self.first, row_numbers[hits[:FIRST_LOCATIONS]]]).astype(np.int64)
            self.first = [int(r) for r in np.sort(met, kind="stable")[:FIRST_LOCATIONS]]


@dataclass
class Histogram:
    """Counts of a per-row figure in fixed bins, with its sum, minimum and maximum."""

    edges: tuple[float, ...]
    counts: np.ndarray = field(init=False)
    total: float = 0.0
    low: float | None = None
    high: float | None = None
    n: int = 0

    def __post_init__(self) -> None:
        self.counts = np.zeros(len(self.edges) - 1, dtype=np.int64)

    def add(self, values: np.ndarray) -> None:
        values = np.asarray(values, dtype=np.float64)
        if not len(values):
            return
        bins = np.clip(np.searchsorted(np.asarray(self.edges), values, side="right") - 1, 0, len(self.counts) - 1)
        self.counts += np.bincount(bins, minlength=len(self.counts))
        self.total += float(values.sum())
        self.n += len(values)
        self.low = float(values.min()) if self.low is None else min(self.low, float(values.min()))
        self.high = float(values.max()) if self.high is None else max(self.high, float(values.max()))

    def merge(self, other: Histogram) -> None:
        """Add the counts of ``other`` (the same edges), as if its values had been added here."""
        self.counts += other.counts
        self.total += other.total
        self.n += other.n
        lows = [v for v in (self.low, other.low) if v is not None]
        highs = [v for v in (self.high, other.high) if v is not None]
        self.low, self.high = (min(lows) if lows else None), (max(highs) if highs else None)

    def to_dict(self) -> dict[str, Any]:
        return {"edges": list(self.edges), "counts": self.counts.tolist(), "n": self.n,
                "min": self.low, "max": self.high, "mean": (self.total / self.n) if self.n else None}


@dataclass
class Worst:
    """The ``WORST_ROWS`` rows with the lowest score (ties: the earlier row), with their figures;
    ``highest`` keeps the highest instead."""

    score: str
    highest: bool = False
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    scores: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    def add(self, scores: np.ndarray, row_numbers: np.ndarray, **figures: np.ndarray) -> None:
        rows = np.concatenate([self.rows, row_numbers.astype(np.int64)])
        signed = -np.asarray(scores, np.float64) if self.highest else np.asarray(scores, np.float64)
        values = np.concatenate([self.scores, signed])
        merged = {name: np.concatenate([self.extra.get(name, np.zeros(0, np.int64)), np.asarray(v, np.int64)])
                  for name, v in figures.items()}
        order = np.lexsort((rows, values))[:WORST_ROWS]
        self.rows, self.scores = rows[order], values[order]
        self.extra = {name: v[order] for name, v in merged.items()}

    def to_list(self) -> list[dict[str, Any]]:
        def shown(score: float) -> float | int:
            return int(-score) if self.highest else float(score)  # a highest-kept score is a count here

        return [{"row": int(r), self.score: shown(s), **{k: int(v[i]) for k, v in self.extra.items()}}
                for i, (r, s) in enumerate(zip(self.rows, self.scores))]
