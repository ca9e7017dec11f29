"""How the parse workers (``rows.parallel``) live and die with the process that started them.

A worker blocked on its work queue would wait forever once its parent is gone
(killed by the OOM killer or ``kill -9``): the queue's pipe is never closed,
since every worker holds a copy of its write end. So each worker also reads a
pipe of its own whose only write end the parent holds, and exits at its EOF.
Every child this process forks closes the write ends at once (an at-fork
hook), and spawn / forkserver children are handed only the read end, so the
EOF comes when the parent dies, under every start method. On Linux the kernel
also signals a worker when its parent dies (``DEATH_SIGNAL``, caught: it only
asks whether the parent is gone).

The pieces' folder is removed by the last process to use it, on every way
out it controls: by the parent when it stops its pool, by every worker that
finds its parent gone, and by every worker at its ordinary exit, which comes
only when the parent stops the pool (nothing is in flight then): a parent
killed while it stops its pool leaves no folder behind. The first piece
written makes the folder (``creating``), and a worker never makes a file
after its own removal began, so no piece outlives the last removal. A folder
that a kill of every process left behind is named with its owner
(``_files.owner_tag``) and removed by the next parse that starts
(``scratch_folder``).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import secrets
import select
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing import util as mp_util
from multiprocessing.connection import Connection
from typing import Any

from whileai_datasets import _files

#: the signal the kernel sends a worker when its parent dies (SIGTERM is the pool's own)
DEATH_SIGNAL = signal.SIGUSR1
#: start methods under which a worker's parent is the process that started the pool
DIRECT_METHODS = ("fork", "spawn")


@dataclass(frozen=True)
class Lifeline:
    """How a worker notices that the process that started it is gone (the
    OOM killer, ``kill -9``): the read end of a pipe whose only write end that
    process holds (EOF when it dies; it pickles to spawn and forkserver
    children as a copy of the descriptor), and on Linux a parent-death signal.
    Either way the worker removes the pieces' folder and exits, instead of
    waiting forever for work on a queue nobody writes."""

    parent: int
    read_end: Connection
    scratch: str
    #: the worker's parent is ``parent`` (fork, spawn; not forkserver), so being re-parented means it is gone
    direct: bool


# ------------------------------------------------------------ the parent's side

#: the write ends of the lifelines this process holds: a forked child closes them at once
_WRITE_ENDS: dict[int, int] = {}
_WRITE_ENDS_LOCK = threading.Lock()
#: held while a file is made in the pieces' folder, and from a worker's removal of it to its exit
_CREATE_LOCK = threading.RLock()


def _after_fork_in_child() -> None:
    """A forked child closes the lifelines' write ends this process held, and
    starts with locks of its own (the parent's threads may have held them)."""
    global _WRITE_ENDS_LOCK, _CREATE_LOCK
    for write_fd in _WRITE_ENDS.values():
        with contextlib.suppress(OSError):
            os.close(write_fd)
    _WRITE_ENDS.clear()
    _WRITE_ENDS_LOCK = threading.Lock()  # held by the parent's forking thread when it forked
    _CREATE_LOCK = threading.RLock()


os.register_at_fork(
    before=lambda: _WRITE_ENDS_LOCK.acquire(),
    after_in_parent=lambda: _WRITE_ENDS_LOCK.release(),
    after_in_child=_after_fork_in_child,
)


def open_lifeline(scratch: str, start_method: str) -> Lifeline:
    """A new lifeline for the workers of a pool started with ``start_method``."""
    read_fd, write_fd = os.pipe()
    with _WRITE_ENDS_LOCK:
        _WRITE_ENDS[read_fd] = write_fd
    return Lifeline(os.getpid(), Connection(read_fd, writable=False), scratch, start_method in DIRECT_METHODS)


def close_lifeline(lifeline: Lifeline) -> None:
    """Close this process's ends (once its workers are stopped)."""
    with _WRITE_ENDS_LOCK:
        write_fd = _WRITE_ENDS.pop(lifeline.read_end.fileno(), None)
        if write_fd is not None:
            os.close(write_fd)
        lifeline.read_end.close()


#: The name of a pieces folder before its owner tag (``_files.owner_tag``).
SCRATCH_PREFIX = "whileai-parse-"
_SCRATCH_COUNT = itertools.count(1)


def scratch_folder(root: str | None) -> str:
    """The path of a new pieces folder under ``root`` (shared memory, or the
    temp dir for None), named with this process's owner tag; not made yet
    (the first piece written makes it: ``creating``). Folders of dead owners
    that a kill left there are removed first."""
    base = root or tempfile.gettempdir()
    _files.sweep(base, SCRATCH_PREFIX)
    name = f"{SCRATCH_PREFIX}{_files.owner_tag()}{next(_SCRATCH_COUNT)}-{secrets.token_hex(4)}"
    return os.path.join(base, name)


def remove_scratch(folder: str) -> None:
    """Remove the pieces' folder; again while it is still there (a worker
    that had not yet seen its parent die may have written a piece into it
    in the meantime, and removes the folder again itself as it exits)."""
    for _ in range(100):
        shutil.rmtree(folder, ignore_errors=True)
        if not os.path.lexists(folder):
            return


#: held (blocked) while the pool starts a worker, until the worker has its own handlers
HELD_SIGNALS = frozenset({signal.SIGTERM})


@contextlib.contextmanager
def starting_workers() -> Iterator[None]:
    """Around a call that may start workers (the pool's ``submit``): the
    signals in ``HELD_SIGNALS`` are held in this thread, so a new worker
    (which starts with this thread's signal mask) cannot run this process's
    handlers (the commands' SIGTERM raises SystemExit) before
    ``worker_start`` puts its own in place. In the main thread their
    handlers are deferred to the end of the call too: raised in the middle
    (another thread may take the signal), SystemExit could leave a worker
    the pool never learnt of, or vanish into an at-fork hook."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    came: list[int] = []
    handlers = _defer_handlers(came) if threading.current_thread() is threading.main_thread() else {}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        for signum in came:
            signal.raise_signal(signum)  # now, to the handler it was meant for


def _defer_handlers(came: list[int]) -> dict[int, Any]:
    """Put a handler that only records the signal in place of each Python
    handler of ``HELD_SIGNALS``; the handlers replaced."""
    replaced = {}
    for signum in HELD_SIGNALS:
        handler = signal.getsignal(signum)
        if callable(handler):  # not SIG_DFL / SIG_IGN, nor one installed outside Python (None)
            replaced[signum] = signal.signal(signum, lambda number, frame: came.append(number))
    return replaced


# ------------------------------------------------------------ the worker's side

@contextlib.contextmanager
def creating(folder: str) -> Iterator[None]:
    """Around making a file in the pieces' ``folder``: makes the folder if
    it is not there, and keeps this process's removal of it (``_leave``)
    from running in between, so that nothing is made after the removal."""
    with _CREATE_LOCK:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        yield


def worker_start(lifeline: Lifeline | None = None) -> None:
    """A forked worker shares the parent's heap page by page until it writes
    to a page; the cyclic GC's passes over the inherited objects would write
    (and so copy) all of them. Frozen, they are never scanned. Then it ties
    its life to its parent's (``Lifeline``)."""
    gc.freeze()
    if lifeline is None:
        return
    signal.signal(signal.SIGTERM, lambda signum, frame: _on_term(lifeline, signum))
    signal.signal(DEATH_SIGNAL, lambda signum, frame: _on_parent_death(lifeline))
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD_SIGNALS)  # held since the pool started it
    _set_death_signal(DEATH_SIGNAL)
    # the ordinary exit: the pool sends it only when nothing is in flight, as its parent stops it
    mp_util.Finalize(None, _leave, args=(lifeline.scratch,), exitpriority=100)
    threading.Thread(target=_watch, args=(lifeline,), daemon=True, name="whileai-lifeline").start()
    if _parent_gone(lifeline):  # it died before the watch began
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
            if not os.read(lifeline.read_end.fileno(), 1):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    _orphaned(lifeline)


def _on_term(lifeline: Lifeline, signum: int) -> None:
    """SIGTERM: the pool stops its workers this way when one of them broke;
    then its parent still reads the pieces done before and removes the folder."""
    if _parent_gone(lifeline):
        _leave(lifeline.scratch)
    os._exit(128 + signum)


def _on_parent_death(lifeline: Lifeline) -> None:
    """The kernel's parent-death signal. It comes when the thread that
    started the worker ends, which may be a moment before the whole parent
    is gone or while it lives on: the watch sees the pipe's EOF then."""
    if _parent_gone(lifeline):
        _orphaned(lifeline)


def _parent_gone(lifeline: Lifeline) -> bool:
    """Whether the parent is gone: the pipe is at EOF (nobody writes to it,
    so readable means EOF), or the worker was re-parented."""
    if lifeline.direct and os.getppid() != lifeline.parent:
        return True
    readable, _, _ = select.select([lifeline.read_end.fileno()], [], [], 0)
    return bool(readable)


def _orphaned(lifeline: Lifeline) -> None:
    """The parent is gone: remove the pieces' folder (nobody will read it) and exit now."""
    _leave(lifeline.scratch)
    os._exit(1)


def _leave(folder: str) -> None:
    """Remove the pieces' folder as this worker leaves; the lock is never
    released (the process exits), so this worker makes no file after it."""
    _CREATE_LOCK.acquire()
    remove_scratch(folder)
