"""Command line: `python tests/hub_server --port 0 --port-file F --token SECRET:alice ...`."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path

from .app import State, make_server
from .auth import Auth
from .faults import FaultPlan, FaultRule
from .requestlog import RequestLog
from .routes import ROUTES
from .store import Store


def _pair(spec: str, what: str) -> tuple[str, str]:
    left, sep, right = spec.partition(":")
    if not sep or not left or not right:
        raise argparse.ArgumentTypeError(f"{what} must look like LEFT:RIGHT, got {spec!r}")
    return left, right


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="hub_server", description="A local stand-in for the Hugging Face Hub.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (see --port-file)")
    parser.add_argument("--port-file", type=Path, help="written with the port once the server listens")
    parser.add_argument("--token", action="append", default=[], type=lambda s: _pair(s, "--token"),
                        metavar="SECRET:USER", help="repeatable; also $LOCAL_HUB_TOKENS='s1:alice;s2:bob'")
    parser.add_argument("--org", action="append", default=[], type=lambda s: _pair(s, "--org"),
                        metavar="ORG:USER1,USER2")
    parser.add_argument("--data-dir", type=Path, help="where repos live (default: a temp dir removed on exit)")
    parser.add_argument("--log", type=Path, help="JSON lines, one per request")
    parser.add_argument("--fault", action="append", default=[], type=FaultRule.parse,
                        metavar="ROUTE:MODE[:TIMES[:SKIP]]", help="e.g. lfs-upload:500:1 or commit:drop")
    parser.add_argument("--verbose", action="store_true", help="print one line per request on stderr")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tokens = dict(args.token)
    for spec in filter(None, os.environ.get("LOCAL_HUB_TOKENS", "").split(";")):
        secret, user = _pair(spec, "LOCAL_HUB_TOKENS entry")
        tokens[secret] = user
    orgs = {org: tuple(m for m in members.split(",") if m) for org, members in args.org}
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="local-hub-"))
    state = State(store=Store(data_dir), auth=Auth(tokens, orgs), faults=FaultPlan(args.fault),
                  log=RequestLog(args.log))
    server = make_server(args.host, args.port, state, ROUTES, verbose=args.verbose)
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file.with_suffix(".tmp")
        tmp.write_text(str(port))
        os.replace(tmp, args.port_file)  # readers never see a half-written port
    print(f"local hub on http://{args.host}:{port} (data in {data_dir})", file=sys.stderr, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    stop.wait()
    server.shutdown()
    server.server_close()
    if args.data_dir is None:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0
