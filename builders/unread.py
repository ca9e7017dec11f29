"""Keys the rows held that no row shape reads (``rows.unread_keys``), kept next to a prepared split so
that every load of it says so, as the rows that train nothing are said (``NO_LOSS_FILE``)."""

from __future__ import annotations

import json
import os
import re
import warnings
from typing import Any

from whileai_datasets.builders import inputs
from whileai_datasets.errors import UnreadKeysWarning
from whileai_datasets.rows.unread_keys import Unread

#: per split, the keys its rows held that were not read (``Unread.to_dict()``)
UNREAD_FILE = "whileai_unread_keys.json"


def save(output_dir: str, split: str, unread: Unread) -> None:
    inputs.update_json(os.path.join(output_dir, UNREAD_FILE), {split: unread.to_dict()})


def warn_saved(path: str, split: str, *, kept: bool, stacklevel: int) -> None:
    """One ``UnreadKeysWarning`` for ``split`` (a split name, or a read instruction naming several), from
    the reports ``save`` left in ``path``; nothing when its rows' keys were all read."""
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as handle:
        reports: dict[str, Any] = json.load(handle)
    found = Unread()
    for name, report in reports.items():
        if name == split or name in re.findall(r"[\w.-]+", split):
            found.merge(report)
    if found:
        warnings.warn(found.message(f"split {split!r}", kept=kept), UnreadKeysWarning, stacklevel=stacklevel + 1)


def warn(unread: Unread, where: str, *, kept: bool, stacklevel: int) -> None:
    """One ``UnreadKeysWarning`` for ``unread`` (rows read as a stream, or from memory), when it holds any."""
    if unread:
        warnings.warn(unread.message(where, kept=kept), UnreadKeysWarning, stacklevel=stacklevel + 1)
