"""The secrets scan: its cost against a plain ``ds.map`` that reads every string, publish with and without it,
and detect-secrets against this package's rules on the planted test set.

``--scan N``: the canonical rows of ``_data.make_unique_file`` (N rows, loaded through the ``whileai/export``
builder outside the clock), each method a ``ds.map(..., batched=True)`` over every row returning one small
column (so what is timed is reading, not writing the rows again), alternating round by round in one process:

* ``map python``: the plain map (``datasets``' default Python formatting), a function that reads every string
  of the batch (walks every value and takes each string's length);
* ``map arrow``: the same under ``with_format("arrow")``, each string leaf's lengths with ``pyarrow.compute``;
* ``scan``: ``Findings.add`` on the Arrow batch (the prefilter over every leaf, Python on the hits);
* ``anonymize``: ``transforms.anonymize(key=...)`` writing the rows back (for scale; it also writes).

``--publish N``: whole publishes of N rows to the local Hub of tests/hub_server (as ``bench_publish --publish``:
``split_by`` scenario, fresh process each), with the scan and with it switched off, alternating.

``--detect-secrets``: recall per kind and look-alikes found on the planted set (tests/support/planted_secrets),
and strings per second on N rows' strings, for detect-secrets' default plugins (``scan_line`` on every line)
and for ``privacy.rules.spans`` (Python alone) and the Arrow scan.

    python benchmarks/bench_privacy.py --scan 100000 --repeat 3
    python benchmarks/bench_privacy.py --publish 100000 --repeat 2
    python benchmarks/bench_privacy.py --detect-secrets 5000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")

ROOT = Path(__file__).resolve().parent.parent


# --- the scan against a plain map --------------------------------------------------------------------
def _read_python(batch: dict[str, list[Any]]) -> dict[str, list[int]]:
    def walk(value: Any) -> int:
        if isinstance(value, str):
            return len(value)
        if isinstance(value, dict):
            return sum(walk(v) for v in value.values())
        if isinstance(value, list):
            return sum(walk(v) for v in value)
        return 0

    n = len(next(iter(batch.values())))
    return {"chars": [sum(walk(batch[name][i]) for name in batch) for i in range(n)]}


def _read_arrow(table: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    from whileai_datasets.privacy.leaves import leaves

    total = sum(pc.sum(pc.utf8_length(leaf.values)).as_py() or 0 for leaf in leaves(table))
    return pa.table({"chars": pa.array([total] + [0] * (table.num_rows - 1), pa.int64())})


class _Scan:
    def __init__(self) -> None:
        from whileai_datasets.privacy.scanning import Findings

        self.found = Findings()

    def __call__(self, table: Any) -> Any:
        import pyarrow as pa

        secret, _ = self.found.add(table)
        return pa.table({"secret": pa.array(secret)})


def run_scan(n: int, repeat: int) -> None:
    from benchmarks._publish import _load
    from whileai_datasets import transforms

    ds = _load(n)
    strings = ds.data.table.nbytes
    methods = {
        "map python": lambda: ds.map(_read_python, batched=True, remove_columns=ds.column_names,
                                     load_from_cache_file=False),
        "map arrow": lambda: ds.with_format("arrow").map(_read_arrow, batched=True, remove_columns=ds.column_names,
                                                         load_from_cache_file=False),
        "scan": lambda: ds.with_format("arrow").map(_Scan(), batched=True, remove_columns=ds.column_names,
                                                    load_from_cache_file=False),
        "anonymize": lambda: ds.with_format("arrow").map(transforms.anonymize(key="bench"), batched=True,
                                                         load_from_cache_file=False),
    }
    times: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(repeat):
        for name, method in methods.items():
            start = time.perf_counter()
            method()
            times[name].append(time.perf_counter() - start)
    found = _Scan()
    for chunk in ds.with_format("arrow").iter(batch_size=4096):
        found(chunk)
    print(f"{n:,} rows, {strings / 2**20:.0f} MB of Arrow data; medians of {repeat} rounds, alternating")
    print("| method | seconds (median) | runs | scan / method |")
    print("| --- | --- | --- | --- |")
    scan = statistics.median(times["scan"])
    for name, runs in times.items():
        median = statistics.median(runs)
        print(f"| {name} | {median:.2f} | {', '.join(f'{t:.2f}' for t in runs)} | {scan / median:.2f}x |")
    print(f"found: {json.dumps({k: v.rows for k, v in found.found.kinds.items()})}")


# --- publish with and without the scan ---------------------------------------------------------------
def child(n: int, repo: str, scan: bool) -> None:
    from benchmarks._publish import TOKEN, _load
    from whileai_datasets.hub import publishing, publish, split_by
    from whileai_datasets.privacy.scanning import Findings

    if not scan:  # the publish as it was before the scan: the check is skipped, nothing else changes
        publishing.screened = lambda splits, pairs, secrets: (splits, pairs, Findings())
    ds = _load(n)
    start = time.perf_counter()
    publish(split_by(ds, "scenario_id"), repo, token=TOKEN, split_key="scenario_id")
    print(json.dumps({"seconds": time.perf_counter() - start}))


def run_publish(n: int, repeat: int) -> None:
    from benchmarks._publish import _load, _server

    times: dict[str, list[float]] = {"with the scan": [], "without": []}
    with tempfile.TemporaryDirectory() as tmp:
        server, endpoint = _server(Path(tmp))
        try:
            _load(n)  # parse and cache outside the clock
            for round_ in range(repeat):
                for name, scan in (("with the scan", True), ("without", False)):
                    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
                    env.update(HF_ENDPOINT=endpoint, HF_HUB_DISABLE_XET="1", HF_HOME=str(Path(tmp) / f"home-{name}"),
                               HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1",
                               HF_DATASETS_DISABLE_PROGRESS_BARS="1", NO_PROXY="127.0.0.1,localhost",
                               PYTHONPATH=str(ROOT))
                    repo = f"bench/{'scan' if scan else 'plain'}-{n}-{round_}"
                    done = subprocess.run([sys.executable, __file__, "--child", str(n), repo, "1" if scan else "0"],
                                          env=env, capture_output=True, text=True, check=False)
                    if done.returncode:
                        raise RuntimeError(done.stderr[-3000:])
                    times[name].append(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])
        finally:
            server.kill()
    with_scan, without = (statistics.median(times[k]) for k in ("with the scan", "without"))
    print(f"publish of {n:,} rows to the local Hub, medians of {repeat}, alternating, fresh processes")
    print("| publish | seconds (median) | runs |\n| --- | --- | --- |")
    for name, runs in times.items():
        print(f"| {name} | {statistics.median(runs):.1f} | {', '.join(f'{t:.1f}' for t in runs)} |")
    print(f"ratio with/without: {with_scan / without:.3f}x")


# --- detect-secrets against the rules ---------------------------------------------------------------
def run_detect_secrets(n: int) -> None:
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    from benchmarks._publish import _load
    from tests.support import planted_secrets
    from whileai_datasets.privacy import rules
    from whileai_datasets.privacy.scanning import Findings

    plans = planted_secrets.plan()

    def ours(text: str) -> bool:
        return any(s.kind in rules.SECRET_KINDS for s in rules.spans(text))

    def theirs(text: str) -> bool:
        return any(True for line in text.splitlines() for _ in scan_line(line))

    entropy = {"Base64 High Entropy String", "Hex High Entropy String"}

    def theirs_keyed(text: str) -> bool:
        return any(s.type not in entropy for line in text.splitlines() for s in scan_line(line))

    with default_settings():
        for name, found in (("detect-secrets 1.5 (default plugins)", theirs),
                            ("detect-secrets 1.5 without its two high-entropy plugins", theirs_keyed),
                            ("privacy.rules", ours)):
            hit: Counter[str] = Counter()
            for plan in plans:
                row = planted_secrets.rollout(plan)
                texts = [row["messages"][1]["content"], row["messages"][2]["tool_calls"][0]["function"]["arguments"],
                         row["messages"][3]["content"]]
                hit[plan.kind] += any(found(t) for t in texts)
            secret_kinds = [k for k in dict.fromkeys(p.kind for p in plans if p.group == "secret")]
            lookalikes = [k for k in dict.fromkeys(p.kind for p in plans if p.group == "lookalike")]
            missed = [k for k in secret_kinds if hit[k] < 3]
            recall = sum(hit[k] for k in secret_kinds) / (3 * len(secret_kinds))
            false = [k for k in lookalikes if hit[k]]
            print(f"{name}: planted rows found {recall:.0%}; kinds missed in some place: {missed or 'none'}; "
                  f"look-alikes found: {false or 'none'}")
        if not n:
            return
        ds = _load(n)
        texts = [s for row in ds.select(range(min(n, 2000))).to_list() for s in _strings(row)]
        start = time.perf_counter()
        for text in texts:
            theirs(text)
        ds_seconds = time.perf_counter() - start
        start = time.perf_counter()
        for text in texts:
            ours(text)
        ours_seconds = time.perf_counter() - start
    table = ds.select(range(min(n, 2000))).data.table
    start = time.perf_counter()
    Findings().add(table)
    arrow_seconds = time.perf_counter() - start
    print(f"{len(texts):,} strings ({sum(map(len, texts)) / 2**20:.1f} MB) of {min(n, 2000):,} rows: detect-secrets "
          f"{ds_seconds:.2f} s, privacy.rules.spans on every string {ours_seconds:.2f} s, the Arrow scan "
          f"{arrow_seconds:.3f} s")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scan", type=int, metavar="N")
    parser.add_argument("--publish", type=int, metavar="N")
    parser.add_argument("--detect-secrets", type=int, metavar="N")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", nargs=3, metavar=("N", "REPO", "SCAN"))
    args = parser.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1], args.child[2] == "1")
    if args.scan:
        run_scan(args.scan, args.repeat)
    if args.publish:
        run_publish(args.publish, args.repeat)
    if args.detect_secrets is not None:
        run_detect_secrets(args.detect_secrets)


if __name__ == "__main__":
    main()
