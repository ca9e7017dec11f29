"""File and line of the few rows an audit names, found once at the end.

The canonical rows carry no line numbers (only the ``raw`` config does), and the audit keeps only the
first few row numbers of each finding, so the lines are found by one pass over the JSONL files that
counts non-blank lines up to the last row asked for. Parquet rows have a row number only.
"""

from __future__ import annotations

import glob
import gzip
import os
from collections.abc import Iterable
from typing import Any


def source_files(source: Any) -> list[str]:
    """The JSONL files a path source names, in the order the builder reads them (a glob: sorted)."""
    if not isinstance(source, (str, os.PathLike)):
        return []
    path = os.fspath(source)
    files = sorted(glob.glob(path)) if glob.has_magic(path) else [path]
    return [f for f in files if f.endswith((".jsonl", ".jsonl.gz", ".json"))]


def _open(path: str) -> Any:
    return gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")


def locate(source: Any, rows: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Per row number: ``{"row", "file", "line"}`` (file and line None where unknown)."""
    wanted = sorted(set(int(r) for r in rows))
    found: dict[int, dict[str, Any]] = {r: {"row": r, "file": None, "line": None} for r in wanted}
    files = source_files(source)
    if not wanted or not files:
        return found
    pending = iter(wanted)
    target = next(pending, None)
    row = 0
    for path in files:
        with _open(path) as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                while target is not None and target == row:
                    found[target] = {"row": target, "file": path, "line": number}
                    target = next(pending, None)
                row += 1
                if target is None:
                    return found
    return found
