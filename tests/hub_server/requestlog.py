"""One JSON line per request, so a test can assert what was (and was not) sent."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any


class RequestLog:
    """Appends entries to `path` (or keeps nothing when `path` is None); flushed per line."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()

    def write(self, entry: dict[str, Any]) -> None:
        if self.path is None:
            return
        line = json.dumps(entry, sort_keys=True) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)
