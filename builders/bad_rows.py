"""Reports kept next to a prepared dataset."""

from __future__ import annotations

import os
from typing import Any

from datasets import Dataset

from whileai_datasets.builders import split_facts


def bad_rows(ds: Dataset) -> dict[str, Any]:
    """The rows ``on_bad_row="skip"`` skipped while ``ds`` was built:
    ``{"count", "first_error", "locations"}`` (count 0 when none were)."""
    for cache in ds.cache_files:
        report: dict[str, Any] | None = split_facts.read(os.path.dirname(cache["filename"])).get("bad_rows")
        if report is not None:
            return report
    return {"count": 0, "first_error": None, "locations": []}


def leak_facts(ds: Dataset) -> dict[str, Any] | None:
    """The leak facts the builder took from ``ds``'s raw rows as it read them
    (``rows.leaks.LeakScan.state()`` of its split), or None when ``ds`` was
    not prepared by this builder's default config (or is in memory)."""
    split = str(ds.split) if ds.split is not None else None
    for cache in ds.cache_files:
        if split is not None:
            facts: dict[str, Any] | None = split_facts.per_split(os.path.dirname(cache["filename"]), "leaks").get(split)
            return facts
    return None
