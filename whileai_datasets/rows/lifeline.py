"""How the parse workers (``rows.parallel``) live and die with the process that started them.

A worker blocked on its work queue would wait forever once its parent is gone
(killed by the OOM killer or ``kill -9``): the queue's pipe is never closed,
since every worker holds a copy of its write end. So each worker also reads a
pipe of its own whose only write end the parent holds, and exits at its EOF;
on Linux the kernel also signals it when the parent dies (``DEATH_SIGNAL``),
which also covers a write end that another child of the parent inherited. An orphaned
worker removes the pieces' folder before it exits. That folder is named with
its owner (``_files.owner_tag``): one that a kill of everything left behind is
removed by the next parse that starts (``scratch_folder``).
"""

from __future__ import annotations

import gc
import os
import select
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

from whileai_datasets import _files

#: how long a worker waits, after the parent-death signal, for the parent to be gone
DEATH_WAIT_SECONDS = 5.0
#: the signal the kernel sends a worker when its parent dies (SIGTERM is the pool's own)
DEATH_SIGNAL = signal.SIGUSR1


@dataclass(frozen=True)
class Lifeline:
    """How a worker notices that the process that started it is gone (the
    OOM killer, ``kill -9``): the read end of a pipe whose only write end that
    process holds (EOF when it dies), and on Linux a parent-death signal.
    Either way the worker removes the pieces' folder and exits, instead of
    waiting forever for work on a queue nobody writes."""

    parent: int
    read_fd: int
    write_fd: int
    scratch: str
    #: ask the kernel for ``DEATH_SIGNAL`` on the parent's death (only when the
    #: pool is started from the main thread: the signal follows the forking thread)
    death_signal: bool


def worker_start(lifeline: Lifeline | None = None) -> None:
    """A forked worker shares the parent's heap page by page until it writes
    to a page; the cyclic GC's passes over the inherited objects would write
    (and so copy) all of them. Frozen, they are never scanned. Then it ties
    its life to its parent's (``Lifeline``)."""
    gc.freeze()
    if lifeline is None:
        return
    os.close(lifeline.write_fd)  # this process's copy: the parent's is then the only one
    signal.signal(signal.SIGTERM, partial(_on_term, lifeline))
    if lifeline.death_signal:
        signal.signal(DEATH_SIGNAL, partial(_on_parent_death, lifeline))
        _set_death_signal(DEATH_SIGNAL)
    threading.Thread(target=_watch, args=(lifeline,), daemon=True, name="whileai-lifeline").start()
    if os.getppid() != lifeline.parent:  # it died before the watch began
        _orphaned(lifeline)


def _set_death_signal(signum: int) -> None:
    """``prctl(PR_SET_PDEATHSIG, signum)`` on Linux; nothing elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signum, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return  # the pipe's EOF still ends the worker


def _watch(lifeline: Lifeline) -> None:
    while True:
        try:
            if not os.read(lifeline.read_fd, 1):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    _orphaned(lifeline)


def _on_term(lifeline: Lifeline, signum: int, frame: Any) -> None:
    """SIGTERM: the pool stops its workers this way when one of them broke."""
    if _parent_gone(lifeline, 0.0):
        _orphaned(lifeline)
    os._exit(128 + signum)


def _on_parent_death(lifeline: Lifeline, signum: int, frame: Any) -> None:
    """The kernel's parent-death signal. It comes when the thread that
    started the worker ends, which may be a moment before the whole parent
    is gone: wait for that (re-parenting, or the pipe's EOF) a little."""
    if _parent_gone(lifeline, DEATH_WAIT_SECONDS):
        _orphaned(lifeline)


def _parent_gone(lifeline: Lifeline, wait: float) -> bool:
    """Whether the parent is gone (within ``wait`` seconds): the worker was
    re-parented, or the pipe is at EOF (nobody writes to it, so readable
    means EOF)."""
    deadline = time.monotonic() + wait
    while True:
        if os.getppid() != lifeline.parent:
            return True
        readable, _, _ = select.select([lifeline.read_fd], [], [], min(0.05, max(0.0, deadline - time.monotonic())))
        if readable:
            return True
        if time.monotonic() >= deadline:
            return False


def _orphaned(lifeline: Lifeline) -> None:
    """The parent is gone: remove the pieces' folder (nobody will read it) and exit now."""
    shutil.rmtree(lifeline.scratch, ignore_errors=True)
    os._exit(1)


#: The name of a pieces folder before its owner tag (``_files.owner_tag``).
SCRATCH_PREFIX = "whileai-parse-"


def scratch_folder(root: str | None) -> str:
    """A new pieces folder under ``root`` (shared memory, or the temp dir for
    None), named with this process's owner tag; folders of dead owners that a
    kill left there are removed first."""
    base = root or tempfile.gettempdir()
    _files.sweep(base, SCRATCH_PREFIX)
    return tempfile.mkdtemp(prefix=SCRATCH_PREFIX + _files.owner_tag(), dir=base)
