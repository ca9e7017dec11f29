"""Peak memory of a benchmark process and every process it starts, together.

``ru_maxrss`` is one process's peak; a builder that parses with worker
processes needs the sum, so a thread samples the RSS of the process and all
its children every 0.1 s. It also keeps the total over time (``timeline``:
is the memory flat over a run?) and the CPU seconds (user + system) of
every process of the tree it saw, each as last sampled (``cpu_seconds``).
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
        self.pss_peak = 0  # the same, proportional (shared pages split among the processes mapping them: Ray's
        # object store is mapped by every worker, and RSS counts it once per process), sampled every 10th time
        self.samples: list[tuple[float, int]] = []  # (seconds since start, total RSS)
        self._cpu: dict[tuple[int, float], float] = {}  # (pid, create time) -> user + system seconds
        self._start = time.monotonic()
        self._process = psutil.Process()
        self._error = psutil.Error
        self._every = every
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        tick = 0
        while True:
            tick += 1
            try:
                children = self._process.children(recursive=True)
                total = self._process.memory_info().rss + sum(c.memory_info().rss for c in children)
                anon = sum(_anon(p.pid) for p in (self._process, *children))
                for proc in (self._process, *children):
                    times = proc.cpu_times()
                    self._cpu[proc.pid, proc.create_time()] = times.user + times.system
            except (self._error, OSError):  # a worker exited between listing and reading it
                continue
            if tick % 10 == 1:
                try:
                    pss = sum(p.memory_full_info().pss for p in (self._process, *children))
                except (self._error, OSError, AttributeError):
                    pss = 0
                self.pss_peak = max(self.pss_peak, pss)
            self.peak = max(self.peak, total)
            self.anon_peak = max(self.anon_peak, anon)
            self.samples.append((time.monotonic() - self._start, total))
            time.sleep(self._every)

    def mark(self) -> None:
        """Start the timeline (and the CPU count) again from now."""
        self.samples.clear()
        self._start = time.monotonic()
        self._cpu_base = self.cpu_seconds

    @property
    def cpu_seconds(self) -> float:
        """User + system seconds of the tree since `mark` (the process's own read now, the others as last seen)."""
        own = self._process.cpu_times()
        others = sum(v for (pid, _), v in list(self._cpu.items()) if pid != self._process.pid)
        return own.user + own.system + others - getattr(self, "_cpu_base", 0.0)

    def timeline(self, parts: int = 10) -> list[float]:
        """The largest total RSS (MB) in each of `parts` equal stretches of the run since `mark`."""
        samples = list(self.samples)
        if not samples:
            return []
        end = samples[-1][0] or 1.0
        peaks = [0] * parts
        for at, total in samples:
            index = min(parts - 1, int(at / end * parts))
            peaks[index] = max(peaks[index], total)
        return [round(p / 2**20) for p in peaks]

    @property
    def mb(self) -> float:
        return self.peak / 2**20

    @property
    def pss_mb(self) -> float:
        return self.pss_peak / 2**20

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
