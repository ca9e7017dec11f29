"""What the fault tests share (tests/export/test_faults_io.py, tests/export/test_faults_kill.py):
sample files, the writers' temp files, and a client of tests/support/export_driver.py,
which forks a real ``whileai-datasets`` command per run."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from whileai_datasets.cli.demo import sample_rows

ROOT = Path(__file__).resolve().parents[2]


def sample_file(path: Path, size: int) -> Path:
    """The bundled sample's rollouts repeated to about ``size`` bytes, each
    copy's first message with a random tail (so Parquet cannot compress the
    repeats away)."""
    rows, rng = sample_rows(), random.Random(0)
    with open(path, "w", encoding="utf-8") as handle:
        written = 0
        while written < size:
            for row in rows:
                tail = " " + rng.randbytes(1000).hex()
                first = {**row["messages"][0], "content": row["messages"][0]["content"] + tail}
                line = json.dumps({**row, "messages": [first, *row["messages"][1:]]}) + "\n"
                handle.write(line)
                written += len(line)
    return path


def temps(folder: Path) -> list[str]:
    """The writers' temp files in ``folder``."""
    return sorted(name for name in os.listdir(folder) if ".whileai-" in name)


def export_argv(source: Path, out: Path, *extra: str) -> list[str]:
    return ["export", str(source), str(out), "--no-validate", "--unroll", *extra]


class Driver:
    """tests/support/export_driver.py: forks a real ``whileai-datasets`` command per run."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "support" / "export_driver.py")], cwd=ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        return answer

    def start(self, argv: list[str], cache: Path, log: Path, **options: Any) -> int:
        """Start a command; ``options``: ``start_method``, ``piece_bytes`` (tests/support/export_driver.py)."""
        pid: int = self._ask({"op": "start", "argv": argv, "cache": str(cache), "log": str(log), **options})["pid"]
        return pid

    def wait(self, pid: int) -> int:
        code: int = self._ask({"op": "wait", "pid": pid})["code"]
        return code

    def orphans(self) -> list[int]:
        """The processes a killed command left that still run (the driver adopted them)."""
        alive: list[int] = self._ask({"op": "orphans"})["alive"]
        return alive

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()
