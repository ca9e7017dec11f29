"""A process that imports the package once and forks a real ``whileai-datasets``
command per request, so the fault tests can run (and kill) many exports
without paying the imports each time (tests/test_faults_io.py).

Protocol, one JSON object a line: the test writes ``{"op": "start", "argv":
[...], "cache": DIR, "log": PATH}`` and reads ``{"pid": N}``; ``{"op": "wait",
"pid": N}`` answers ``{"code": C}`` (negative: killed by signal -C). A child
runs ``cli.main.main(argv)`` with the datasets cache at ``cache`` and its
stdout and stderr in ``log``, and exits the ordinary way (the interpreter's
own shutdown runs, as after a console command). Files of at least
``PARSE_MIN_BYTES`` are parsed by worker processes (the package's threshold
is 16 MiB; the tests' files are smaller).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import datasets

import whileai_datasets.rows.parallel as parallel
from whileai_datasets.cli.main import main

PARSE_MIN_BYTES = 256 << 10


def _child(request: dict[str, object]) -> None:
    log = os.open(str(request["log"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    datasets.config.HF_DATASETS_CACHE = Path(str(request["cache"]))
    code = main([str(arg) for arg in request["argv"]])  # type: ignore[union-attr]
    sys.stdout.flush()
    sys.exit(code)


def serve() -> None:
    parallel.AUTO_MIN_BYTES = PARSE_MIN_BYTES
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "start":
            pid = os.fork()
            if pid == 0:
                _child(request)
            answer: dict[str, int] = {"pid": pid}
        else:
            _, status = os.waitpid(int(request["pid"]), 0)
            answer = {"code": os.waitstatus_to_exitcode(status)}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    serve()
