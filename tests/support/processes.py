"""Stopping the helper processes tests start (the local hub, Chromium, the docs examples' runner)."""

from __future__ import annotations

import subprocess
from typing import Any


def stop(process: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL if it has not exited within 10 s; always reaped."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
