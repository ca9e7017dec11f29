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
        self._process = psutil.Process()
        self._error = psutil.Error
        self._every = every
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                children = self._process.children(recursive=True)
                total = self._process.memory_info().rss + sum(c.memory_info().rss for c in children)
            except self._error:  # a worker exited between listing and reading it
                continue
            self.peak = max(self.peak, total)
            time.sleep(self._every)

    @property
    def mb(self) -> float:
        return self.peak / 2**20
