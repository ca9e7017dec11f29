"""Reading agent sessions vs reading the same conversations already written as ``messages`` JSONL (issue 48).

A folder of generated Claude Code and Codex CLI sessions (tool calls with outputs of a few KB, split assistant
records, reasoning, a subagent and a compaction per few sessions) is loaded with
``load_dataset("whileai/export", data_files=<folder>/**)``; the conversations it yields are written once as
whileai ``messages`` rows and loaded the same way. Each load runs in a fresh subprocess with a cold cache
(its own peak RSS; with its parse workers, their RSS summed and their PSS), the order rotating each round; the
report is the median per method, seconds per MB of input, CPU seconds of the load (the process and its workers,
imports left out), and the ratio (target: sessions cost at most 1.5x messages per MB; a 100 MB folder loads in
bounded memory). ``--one-process`` also reads the folder with ``parse_workers=1``; ``--baseline DIR`` reads it
with another checkout's package (a tree of main).

    python benchmarks/bench_sessions.py --mb 100 --repeat 3 --one-process --baseline /tmp/main-tree
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / ".data" / "sessions"

CHILD = r"""
import json, os, resource, sys, tempfile, time
os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
sys.path.insert(0, sys.argv[2])
from benchmarks._memory import TotalPeak
total = TotalPeak()  # this process and its parse workers: RSS summed every 0.1 s (a forked worker's pages shared
# with this process counted in both), PSS every 1 s (shared pages split among the processes)
import warnings; warnings.simplefilter("ignore")
import datasets, whileai_datasets  # noqa: F401
extra = {} if sys.argv[3] == "default" else {"parse_workers": int(sys.argv[3])}
def cpu():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
start, cpu_start = time.perf_counter(), cpu()
ds = datasets.load_dataset("whileai/export", data_files=sys.argv[1], split="train", cache_dir=tempfile.mkdtemp(),
                          **extra)
seconds = time.perf_counter() - start
own = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": seconds, "rows": ds.num_rows, "peak_mb": own.ru_maxrss / 1024, "total_mb": total.mb,
                  "pss_mb": total.pss_mb,
                  "cpu": cpu() - cpu_start,  # the load's, with its workers (joined by then)
                  "package": whileai_datasets.__file__}))
"""


def _words(rng: random.Random, n: int) -> str:
    vocab = ["cart", "total", "tax", "test", "config", "parse", "value", "file", "import", "return", "error",
             "line", "module", "fixture", "assert", "update", "session", "build", "path", "check"]
    return " ".join(rng.choice(vocab) for _ in range(n))


def _claude(rng: random.Random, index: int, turns: int) -> list[dict]:
    session = {"sessionId": f"s{index:06d}", "cwd": "/work/app", "version": "2.0.14", "userType": "external"}
    out, parent, n = [], None, 0

    def record(kind: str, message: dict, **extra: object) -> None:
        nonlocal parent, n
        n += 1
        uuid = f"{index}-{n}"
        out.append({"parentUuid": parent, "isSidechain": False, **session, "type": kind, "message": message,
                    "uuid": uuid, "timestamp": "2026-11-02T10:00:00Z", **extra})
        parent = uuid

    record("user", {"role": "user", "content": _words(rng, 30)})
    for turn in range(turns):
        mid = f"msg_{index}_{turn}"
        record("assistant", {"id": mid, "role": "assistant", "model": "claude-sonnet-4-5",
                             "content": [{"type": "thinking", "thinking": _words(rng, 40), "signature": "Ep" * 20}]})
        record("assistant", {"id": mid, "role": "assistant", "model": "claude-sonnet-4-5",
                             "content": [{"type": "text", "text": _words(rng, 25)}]})
        call = f"toolu_{index}_{turn}"
        record("assistant", {"id": mid, "role": "assistant", "model": "claude-sonnet-4-5", "content": [
            {"type": "tool_use", "id": call, "name": rng.choice(["Bash", "Read", "Grep"]),
             "input": {"command": _words(rng, 6)}}]})
        record("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call,
                                                     "content": _words(rng, rng.randint(100, 600))}]},
               toolUseResult={"stdout": "..."})
        if turn == turns // 2 and index % 4 == 0:
            record("user", {"role": "user", "content": "Summary: " + _words(rng, 60)}, isCompactSummary=True)
    record("assistant", {"id": f"msg_{index}_end", "role": "assistant", "model": "claude-sonnet-4-5",
                         "content": [{"type": "text", "text": _words(rng, 40)}]})
    return out


def _codex(rng: random.Random, index: int, turns: int) -> list[dict]:
    def line(kind: str, payload: dict) -> dict:
        return {"timestamp": "2026-11-03T09:00:00Z", "type": kind, "payload": payload}

    out = [line("session_meta", {"id": f"c{index:06d}", "cwd": "/work/app", "base_instructions": {"text": _words(rng, 80)}}),
           line("response_item", {"type": "message", "role": "user",
                                  "content": [{"type": "input_text", "text": _words(rng, 30)}]})]
    for turn in range(turns):
        call = f"call_{index}_{turn}"
        out.append(line("response_item", {"type": "reasoning", "summary": [{"type": "summary_text",
                                                                            "text": _words(rng, 20)}],
                                          "encrypted_content": "gAAAA" * 30}))
        out.append(line("response_item", {"type": "function_call", "name": "shell", "call_id": call,
                                          "arguments": json.dumps({"command": ["bash", "-lc", _words(rng, 5)]})}))
        out.append(line("response_item", {"type": "function_call_output", "call_id": call,
                                          "output": _words(rng, rng.randint(100, 600))}))
        out.append(line("event_msg", {"type": "token_count", "info": None}))
    out.append(line("response_item", {"type": "message", "role": "assistant",
                                      "content": [{"type": "output_text", "text": _words(rng, 40)}]}))
    return out


def make_folder(mb: int) -> tuple[Path, Path]:
    """The session folder of about ``mb`` MB, and the same conversations as messages JSONL (made once)."""
    folder, messages = DATA / f"folder-{mb}mb", DATA / f"messages-{mb}mb.jsonl"
    if folder.is_dir() and messages.is_file():
        return folder, messages
    rng, size, index = random.Random(48), 0, 0
    folder.mkdir(parents=True, exist_ok=True)
    while size < mb << 20:
        agent = "claude" if index % 2 == 0 else "codex"
        records = (_claude if agent == "claude" else _codex)(rng, index, rng.randint(40, 160))
        path = folder / agent / f"{index:06d}.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        size += path.stat().st_size
        index += 1
    sys.path.insert(0, str(ROOT))
    from whileai_datasets.sessions import detect

    with messages.open("w") as out:
        for path in sorted(folder.rglob("*.jsonl")):
            with path.open("rb") as handle:
                session = detect.detect(path.name, handle)
                for _, row in detect.rows(session, handle, path.name):
                    out.write(json.dumps({"messages": row["messages"], "tools": row["tools"]}) + "\n")
    return folder, messages


def _run(path: str, root: Path, workers: str) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, path, str(root), workers], capture_output=True, text=True,
                          check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["package"].startswith(str(root)), (result["package"], root)  # the tree asked for
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--one-process", action="store_true",
                        help="also read the session folder with parse_workers=1 (one process, as before the workers)")
    parser.add_argument("--baseline", type=Path, help="another checkout: its session read is run too, alternating")
    args = parser.parse_args()
    folder, messages = make_folder(args.mb)
    sessions = (str(folder / "**" / "*.jsonl"), sum(p.stat().st_size for p in folder.rglob("*.jsonl")))
    methods = {"sessions": (*sessions, ROOT, "default"), "messages": (str(messages), messages.stat().st_size, ROOT,
                                                                      "default")}
    if args.one_process:
        methods["sessions, parse_workers=1"] = (*sessions, ROOT, "1")
    if args.baseline is not None:
        methods["sessions, baseline"] = (*sessions, args.baseline.resolve(), "default")
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {_load()} at the start")
    runs: dict[str, list[dict]] = {name: [] for name in methods}
    names = list(methods)
    for round_ in range(args.repeat):
        for name in names[round_ % len(names):] + names[: round_ % len(names)]:  # who goes first rotates
            path, _, root, workers = methods[name]
            runs[name].append(_run(path, root, workers))
    per_mb = {}
    print(f"{'input':27s} {'MB':>6s} {'rows':>5s} {'seconds':>8s} {'ms/MB':>7s} {'CPU s':>6s} {'peak RSS':>9s} "
          f"{'RSS, all':>9s} {'PSS, all':>9s}  x messages/MB")
    cpu_per_mb = {}
    for name, (path, size, root, workers) in methods.items():
        seconds = statistics.median(r["seconds"] for r in runs[name])
        per_mb[name] = seconds / (size / 2**20)
        cpu_per_mb[name] = statistics.median(r["cpu"] for r in runs[name]) / (size / 2**20)
    for name, (path, size, root, workers) in methods.items():
        got = runs[name]
        print(f"{name:27s} {size / 2**20:6.1f} {got[0]['rows']:5d} {statistics.median(r['seconds'] for r in got):8.2f} "
              f"{per_mb[name] * 1000:7.1f} {statistics.median(r['cpu'] for r in got):6.1f} "
              f"{max(r['peak_mb'] for r in got):6.0f} MB {max(r['total_mb'] for r in got):6.0f} MB "
              f"{max(r['pss_mb'] for r in got):6.0f} MB  "
              f"{per_mb[name] / per_mb['messages']:.2f}x")
    print(f"sessions / messages, per MB: {per_mb['sessions'] / per_mb['messages']:.2f}x "
          f"(each round: {', '.join(_ratios(runs, methods))}); in CPU seconds of the load (its workers too) per MB: "
          f"{cpu_per_mb['sessions'] / cpu_per_mb['messages']:.2f}x; load average {_load()} at the end")


def _ratios(runs: dict[str, list[dict]], methods: dict[str, tuple]) -> list[str]:
    size = {name: methods[name][1] / 2**20 for name in ("sessions", "messages")}
    return [f"{(s['seconds'] / size['sessions']) / (m['seconds'] / size['messages']):.2f}x"
            for s, m in zip(runs["sessions"], runs["messages"])]


def _load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


if __name__ == "__main__":
    main()
