"""Loading a whileai export: our builder (its default: worker processes parse
the one big file, one per core; parse_workers=1: this process only; num_proc=2:
datasets' own jobs over the byte-range shards) vs load_dataset("json") vs an
orjson parse of every line (the floor).

Each measurement runs in a fresh subprocess (its own peak RSS, a cold datasets
cache), alternating the methods so machine noise hits all of them alike; the
report is the median per method and the ratios between them. ``seconds`` is
the load itself, after the imports (``import datasets`` and this package, or
``import orjson`` for the floor: 1-2 s on this machine, the same for every
load of a process); ``with imports`` adds them, and the ratios are given both ways.

    python benchmarks/bench_builder.py --rows 100000 --repeat 3
    python benchmarks/bench_builder.py --rows 1000000 --repeat 1 --methods builder   # peak RSS at 1M rows
    python benchmarks/bench_builder.py --rows 100000 --repeat 7 --methods builder_1p --baseline ../main-checkout

``--baseline DIR`` runs each method on another checkout's package too (e.g. a worktree of main), alternating
with this tree's, and reports this tree over that one per method (medians and minima): a change's cost on
the same file, under the same machine noise.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._data import make_export_file

CHILD = r"""
import json, os, resource, sys, tempfile, time
method, path = sys.argv[1], sys.argv[2]
os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
sys.path.insert(0, sys.argv[3])
from benchmarks._memory import TotalPeak
total = TotalPeak()
began = time.perf_counter()
if method == "orjson":
    import orjson
else:
    import datasets
    import whileai_datasets  # noqa: F401
start = time.perf_counter()
rows = 0
if method == "orjson":
    with open(path, "rb") as handle:
        for line in handle:
            orjson.loads(line)
            rows += 1
else:
    cache = tempfile.mkdtemp()
    name = "json" if method == "json" else "whileai/export"
    # builder_np2: the default shard_bytes (64 MiB) splits the one file into shards for two workers
    extra = {"num_proc": 2} if method == "builder_np2" else {"parse_workers": 1} if method == "builder_1p" else {}
    ds = datasets.load_dataset(name, data_files=path, split="train", cache_dir=cache, **extra)
    rows = ds.num_rows
seconds = time.perf_counter() - start
imports = start - began
own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
peak = own.ru_maxrss / 1024
# num_proc workers are children: the largest one's peak, on top of this process
worker = children.ru_maxrss / 1024
# CPU seconds of this process and its workers: on a shared machine, wall time
# only drops with num_proc when a second core is free
cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
if method != "orjson":
    import shutil
    shutil.rmtree(cache, ignore_errors=True)  # a few hundred MB per run
print(json.dumps({"method": method, "rows": rows, "seconds": seconds, "peak_rss_mb": peak, "worker_rss_mb": worker,
                  "cpu_seconds": cpu, "total_peak_mb": total.mb, "import_seconds": imports}))
"""

METHODS = ("builder", "builder_1p", "json", "orjson")
OPTIONAL_METHODS = ("builder_np2",)


HERE = Path(__file__).resolve().parent.parent


def measure(method: str, path: Path, root: Path = HERE) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, method, str(path), str(root)],
        check=True,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def compare(methods: list[str], path: Path, baseline: Path, repeat: int, rows: int) -> None:
    """Each method on this tree and on ``baseline``, alternating (which goes first alternates too)."""
    runs: dict[tuple[str, str], list[dict[str, float]]] = {(m, t): [] for m in methods for t in ("this", "baseline")}
    for round_no in range(repeat):
        order = [("this", HERE), ("baseline", baseline)]
        for method in methods:
            for tree, root in order if round_no % 2 == 0 else order[::-1]:
                runs[(method, tree)].append(measure(method, path, root))
                print(f"  round {round_no + 1}/{repeat} {method} {tree}: {runs[(method, tree)][-1]['seconds']:.2f} s",
                      file=sys.stderr)
    print(f"load {rows:,} whileai rows, {repeat} alternating rounds: this tree ({HERE}) over {baseline}")
    for method in methods:
        mine, theirs = runs[(method, "this")], runs[(method, "baseline")]
        for key in ("seconds", "cpu_seconds"):
            a, b = [r[key] for r in mine], [r[key] for r in theirs]
            print(f"  {method:<12} {key:<12} median {statistics.median(a):7.2f} vs {statistics.median(b):7.2f} "
                  f"({statistics.median(a) / statistics.median(b):.3f}x), min {min(a):7.2f} vs {min(b):7.2f} "
                  f"({min(a) / min(b):.3f}x)")
        assert mine[0]["rows"] == theirs[0]["rows"], "the two trees loaded different row counts"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--methods", default=",".join(METHODS), help="comma-separated, from %(default)s," + ",".join(OPTIONAL_METHODS)
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--baseline", type=Path, help="another checkout: each method is run on it too, alternating")
    args = parser.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    path = make_export_file(None, args.rows)
    if args.baseline is not None:
        compare(methods, path, args.baseline.resolve(), args.repeat, args.rows)
        return
    size_mb = path.stat().st_size / 1e6
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in methods}
    for round_no in range(args.repeat):
        for method in methods:
            runs[method].append(measure(method, path))
            print(f"  round {round_no + 1}/{args.repeat} {method}: {runs[method][-1]['seconds']:.2f} s", file=sys.stderr)
    summary = {
        m: {
            "seconds": statistics.median(r["seconds"] for r in rs),
            "import_seconds": statistics.median(r["import_seconds"] for r in rs),
            "with_imports": statistics.median(r["seconds"] + r["import_seconds"] for r in rs),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in rs),
            "worker_rss_mb": max(r.get("worker_rss_mb", 0.0) for r in rs),
            "cpu_seconds": statistics.median(r.get("cpu_seconds", 0.0) for r in rs),
            "total_peak_mb": max(r.get("total_peak_mb", 0.0) for r in rs),
            "all_seconds": [round(r["seconds"], 2) for r in rs],
            "rows": rs[0]["rows"],
        }
        for m, rs in runs.items()
    }
    pairs = {
        "json_over_builder": ("json", "builder"),
        "builder_over_builder_np2": ("builder", "builder_np2"),
        "json_over_builder_np2": ("json", "builder_np2"),
        "builder_1p_over_builder": ("builder_1p", "builder"),
        "builder_over_orjson_floor": ("builder", "orjson"),
    }
    ratios = {}
    for name, (top, bottom) in pairs.items():
        if top in summary and bottom in summary:
            ratios[name] = summary[top]["seconds"] / summary[bottom]["seconds"]
            ratios[name + "_with_imports"] = summary[top]["with_imports"] / summary[bottom]["with_imports"]
    report = {"rows": args.rows, "file_mb": round(size_mb, 1), "repeat": args.repeat, "methods": summary, "ratios": ratios}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"load {args.rows:,} whileai rows ({size_mb:.0f} MB JSONL), median of {args.repeat}, fresh process and cache each")
    print(
        f"  {'method':<42} {'seconds':>8} {'with imports':>13} {'CPU s':>7} {'rows/s':>10} {'peak RSS':>10}"
        f" {'all processes':>14}"
    )
    labels = {
        "builder": 'load_dataset("whileai/export")',
        "builder_1p": 'load_dataset("whileai/export", parse_workers=1)',
        "builder_np2": 'load_dataset("whileai/export", num_proc=2)',
        "json": 'load_dataset("json")',
        "orjson": "orjson parse (floor)",
    }
    for m, s in summary.items():
        workers = f"  (+ {s['worker_rss_mb']:.0f} MB per worker)" if m in ("builder", "builder_np2") else ""
        print(
            f"  {labels[m]:<42} {s['seconds']:>8.2f} {s['with_imports']:>13.2f} {s['cpu_seconds']:>7.2f} {s['rows'] / s['seconds']:>10,.0f}"
            f" {s['peak_rss_mb']:>8.0f} MB {s['total_peak_mb']:>11.0f} MB{workers}  runs {s['all_seconds']}"
        )
    for name, value in ratios.items():
        print(f"  {name.replace('_', ' ')}: {value:.2f}x")


if __name__ == "__main__":
    main()
