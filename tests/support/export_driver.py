"""A process that imports the package once and forks a real ``whileai-datasets``
command per request, so the fault tests can run (and kill) many exports
without paying the imports each time (tests/export/test_faults_io.py).

Protocol, one JSON object a line: the test writes ``{"op": "start", "argv":
[...], "cache": DIR, "log": PATH}`` (optionally ``"start_method"``: fork,
spawn or forkserver for the parse workers, and ``"piece_bytes"``: the largest
piece) and reads ``{"pid": N}``; ``{"op": "wait", "pid": N}`` answers
``{"code": C}`` (negative: killed by signal -C); ``{"op": "orphans"}``
answers ``{"alive": [...]}``, the processes this driver adopted (below) that
still run, after reaping those that ended. A child runs
``cli.main.main(argv)`` with the datasets cache at ``cache`` and its stdout
and stderr in ``log``, and exits the ordinary way (the interpreter's own
shutdown runs, as after a console command). Files of at least
``PARSE_MIN_BYTES`` are parsed by worker processes (the package's threshold
is 16 MiB; the tests' files are smaller).

On Linux the driver is a child subreaper: a process left behind by a killed
command (a parse worker, a forkserver) becomes this driver's child instead of
init's, so the test can see that none is left.
"""

from __future__ import annotations

import ctypes
import json
import multiprocessing
import os
import sys
from pathlib import Path

import datasets

import whileai_datasets.reading.parallel as parallel
from whileai_datasets.cli.main import main

PARSE_MIN_BYTES = 256 << 10
PR_SET_CHILD_SUBREAPER = 36


def _child(request: dict[str, object]) -> None:
    log = os.open(str(request["log"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    datasets.config.HF_DATASETS_CACHE = Path(str(request["cache"]))
    method = request.get("start_method")
    if method is not None:
        parallel._context = lambda: multiprocessing.get_context(str(method))
    if request.get("piece_bytes") is not None:
        parallel.PIECE_MAX_BYTES = int(str(request["piece_bytes"]))
    code = main([str(arg) for arg in request["argv"]])  # type: ignore[union-attr]
    sys.stdout.flush()
    sys.exit(code)


def _reap(started: set[int], ended: dict[int, int]) -> list[int]:
    """Reap every child that ended (keeping the codes of started commands for
    ``wait``); the adopted ones still running."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        if pid in started:
            ended[pid] = os.waitstatus_to_exitcode(status)
    alive = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in started:
            try:
                with open(f"/proc/{name}/stat", encoding="ascii") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid() and fields[0] != "Z":  # ppid, state
                alive.append(int(name))
    return alive


def serve() -> None:
    parallel.AUTO_MIN_BYTES = PARSE_MIN_BYTES
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    started: set[int] = set()
    ended: dict[int, int] = {}
    for line in sys.stdin:
        request = json.loads(line)
        answer: dict[str, object]
        if request["op"] == "start":
            pid = os.fork()
            if pid == 0:
                _child(request)
            started.add(pid)
            answer = {"pid": pid}
        elif request["op"] == "orphans":
            answer = {"alive": _reap(started, ended)}
        else:
            pid = int(request["pid"])
            if pid not in ended:
                _, status = os.waitpid(pid, 0)
                ended[pid] = os.waitstatus_to_exitcode(status)
            answer = {"code": ended.pop(pid)}
            started.discard(pid)
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    serve()
