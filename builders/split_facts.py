"""What the builder learns about a dataset while it prepares it, in one file beside its Arrow files.

``{"splits": {name: {"leaks": ..., "no_loss": ..., "unread": ...}}, "bad_rows": ...}``: per split, the leak
facts of its raw rows (``LeakScan.state()``), its rows that carry no loss (``NoLoss.to_dict()``) and the keys
its rows held that no shape reads (``Unread.to_dict()``); and the rows ``on_bad_row="skip"`` left out
(``BadRows.to_dict()``). Each load from the cache says again what the file holds.
"""

from __future__ import annotations

import json
import os
from typing import Any

#: the one file of facts beside a prepared dataset
FACTS_FILE = "whileai_split_facts.json"


def read(folder: str) -> dict[str, Any]:
    """The facts kept in `folder` (empty when none were)."""
    path = os.path.join(folder, FACTS_FILE)
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as handle:
        facts: dict[str, Any] = json.load(handle)
    return facts


def per_split(folder: str, kind: str) -> dict[str, Any]:
    """``{split: its facts of this kind}`` for the splits that have them."""
    return {name: found[kind] for name, found in read(folder).get("splits", {}).items() if kind in found}


def save(folder: str, split: str | None = None, **facts: Any) -> None:
    """Add `facts` to the file: a split's own, or the dataset's when `split` is None."""
    data = read(folder)
    if split is None:
        data.update(facts)
    else:
        data.setdefault("splits", {}).setdefault(split, {}).update(facts)
    with open(os.path.join(folder, FACTS_FILE), "w", encoding="utf-8") as handle:
        json.dump(data, handle)
