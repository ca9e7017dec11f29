"""Reports kept next to a prepared dataset."""

from __future__ import annotations

import json
import os
from typing import Any

from datasets import Dataset

from whileai_datasets.builders.whileai_export import BAD_ROWS_FILE, LEAKS_FILE


def bad_rows(ds: Dataset) -> dict[str, Any]:
    """The rows ``on_bad_row="skip"`` skipped while ``ds`` was built:
    ``{"count", "first_error", "locations"}`` (count 0 when none were)."""
    for cache in ds.cache_files:
        path = os.path.join(os.path.dirname(cache["filename"]), BAD_ROWS_FILE)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                report: dict[str, Any] = json.load(handle)
                return report
    return {"count": 0, "first_error": None, "locations": []}


def leak_facts(ds: Dataset) -> dict[str, Any] | None:
    """The leak facts the builder took from ``ds``'s raw rows as it read them
    (``rows.leaks.LeakScan.state()`` of its split), or None when ``ds`` was
    not prepared by this builder's default config (or is in memory)."""
    split = str(ds.split) if ds.split is not None else None
    for cache in ds.cache_files:
        path = os.path.join(os.path.dirname(cache["filename"]), LEAKS_FILE)
        if split is not None and os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                facts: dict[str, Any] | None = json.load(handle).get(split)
            return facts
    return None
