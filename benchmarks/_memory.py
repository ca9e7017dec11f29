"""Peak memory of a benchmark process and every process it starts, together.

``ru_maxrss`` is one process's peak; a builder that parses with worker
processes needs the sum, so a thread samples the RSS of the process and all
its children every 0.1 s.
"""

from __future__ import annotations

import threading
import time


class TotalPeak:
    """Samples until the process exits; ``mb`` is the largest total seen."""

    def __init__(self, every: float = 0.1) -> None:
        import psutil

        self.peak = 0
        self.anon_peak = 0  # the same, anonymous memory only (no file pages such as a memory-mapped cache)
        self._process = psutil.Process()
        self._error = psutil.Error
        self._every = every
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                children = self._process.children(recursive=True)
                total = self._process.memory_info().rss + sum(c.memory_info().rss for c in children)
                anon = sum(_anon(p.pid) for p in (self._process, *children))
            except (self._error, OSError):  # a worker exited between listing and reading it
                continue
            self.peak = max(self.peak, total)
            self.anon_peak = max(self.anon_peak, anon)
            time.sleep(self._every)

    @property
    def mb(self) -> float:
        return self.peak / 2**20

    @property
    def anon_mb(self) -> float:
        return self.anon_peak / 2**20


def _anon(pid: int) -> int:
    """Resident anonymous memory of a process (Linux ``RssAnon``; 0 where /proc does not say)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except FileNotFoundError:
        return 0
    return 0
