"""Keys the rows held that no row shape reads (``rows.unread_keys``), kept next to a prepared split so
that every load of it says so, as the rows that train nothing are said (both kept in ``split_facts``)."""

from __future__ import annotations

import re
import warnings
from typing import Any

from whileai_datasets.errors import UnreadKeysWarning
from whileai_datasets.rows.unread_keys import Unread


def warn_saved(reports: dict[str, Any], split: str, *, kept: bool, stacklevel: int) -> None:
    """One ``UnreadKeysWarning`` for ``split`` (a split name, or a read instruction naming several), from
    the reports kept per split (``Unread.to_dict()``); nothing when its rows' keys were all read."""
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
