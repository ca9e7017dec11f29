"""End-to-end export: whileai_datasets.export_dataset against whileai's, on the same input.

Both export the same N-row file with unroll on, strip_think on and
max_tool_output_chars=200, in format openai and trl (validate=False on both:
the gates still run and report; the benchmark data holds rows that quote
their privileged block, which validate=True refuses on both sides). Each
measurement runs in a fresh subprocess (its own peak RSS), methods
alternate round by round so machine noise hits all of them alike, and the
report is the median per method and the ratios, measured side by side:

* ``whileai``: ``whileai.simulations.export_dataset(path, out, ...)``.
* ``ours_cold``: ``whileai_datasets.export_dataset(path, out, ...)`` with an
  empty ``datasets`` cache: the builder parses the file, then the export runs.
* ``ours_warm``: the export from the dataset ``load_dataset("whileai/export", ...)``
  returns from its cache (an earlier, untimed load of the file filled it; the
  cached load runs before the clock): the second and later exports of a file,
  and every pipeline that loads once and exports several shapes.

    python benchmarks/bench_export.py --rows 100000 --repeat 3
    python benchmarks/bench_export.py --rows 1000000 --methods ours_cold --formats openai --repeat 1   # peak RSS at 1M
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._data import DATA_DIR, make_export_file  # noqa: E402

CHILD = r"""
import json, os, resource, sys, tempfile, time
method, fmt, path, workdir, root, warm_cache = sys.argv[1:7]
os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
# cold: an empty datasets cache; warm: the cache an earlier load of this file left
os.environ["HF_DATASETS_CACHE"] = warm_cache if method in ("ours_warm", "prepare") else os.path.join(workdir, "cache")
sys.path.insert(0, root)
from benchmarks._data import SYSTEM_PROMPT, TOOLS
options = dict(system_prompt=SYSTEM_PROMPT, tools=TOOLS, unroll=True, strip_think=True, max_tool_output_chars=200,
               format=fmt, validate=False)
out = os.path.join(workdir, f"out-{method}-{fmt}.jsonl")
source = path
prepare = 0.0
if method == "whileai":
    from whileai.simulations import export_dataset
else:
    import datasets
    from whileai_datasets import export_dataset
    if method in ("ours_warm", "prepare"):
        start = time.perf_counter()
        source = datasets.load_dataset("whileai/export", data_files=path, split="train", system_prompt=SYSTEM_PROMPT)
        prepare = time.perf_counter() - start
    if method == "prepare":
        print(json.dumps({"seconds": prepare}))
        sys.exit(0)
if os.path.exists(out):
    os.remove(out)
from benchmarks._memory import TotalPeak
total = TotalPeak()
start = time.perf_counter()
report = export_dataset(source, out, **options)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
cpu = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
          for f in ("ru_utime", "ru_stime"))
print(json.dumps({"seconds": seconds, "prepare_seconds": prepare, "peak_rss_mb": peak, "rows_out": report["n"],
                  "total_peak_mb": total.mb, "cpu_seconds": cpu,
                  "out_mb": os.path.getsize(out) / 1e6}))
"""

METHODS = ("whileai", "ours_cold", "ours_warm")
FORMATS = ("openai", "trl")


def measure(method: str, fmt: str, path: Path, warm_cache: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=DATA_DIR) as workdir:
        root = str(Path(__file__).resolve().parent.parent)
        done = subprocess.run(
            [sys.executable, "-c", CHILD, method, fmt, str(path), workdir, root, warm_cache],
            check=True,
            capture_output=True,
            text=True,
            timeout=7200,
        )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of %(default)s")
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma-separated subset of openai,trl,fireworks")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    formats = [f for f in args.formats.split(",") if f]
    path = make_export_file(None, args.rows)
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {(m, f): [] for f in formats for m in methods}
    with tempfile.TemporaryDirectory(dir=DATA_DIR) as warm:
        if "ours_warm" in methods:  # the first load of the file, untimed: what "warm" reuses
            seconds = measure("prepare", "openai", path, warm)["seconds"]
            print(f"  preparing the datasets cache: {seconds:.2f} s", file=sys.stderr)
        for round_no in range(args.repeat):
            for fmt in formats:
                for method in methods:
                    result = measure(method, fmt, path, warm)
                    runs[(method, fmt)].append(result)
                    print(
                        f"  round {round_no + 1}/{args.repeat} {fmt} {method}: {result['seconds']:.2f} s, "
                        f"{result['peak_rss_mb']:.0f} MB ({result['total_peak_mb']:.0f} MB with workers)",
                        file=sys.stderr,
                    )
    summary = {
        f"{m}/{f}": {
            "seconds": statistics.median(r["seconds"] for r in rs),
            "all_seconds": [round(r["seconds"], 2) for r in rs],
            "prepare_seconds": statistics.median(r["prepare_seconds"] for r in rs),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in rs),
            "total_peak_mb": max(r["total_peak_mb"] for r in rs),
            "cpu_seconds": statistics.median(r["cpu_seconds"] for r in rs),
            "rows_out": rs[0]["rows_out"],
            "out_mb": round(rs[0]["out_mb"], 1),
        }
        for (m, f), rs in runs.items()
    }
    ratios = {}
    for fmt in formats:
        base = summary.get(f"whileai/{fmt}")
        for method in ("ours_cold", "ours_warm"):
            ours = summary.get(f"{method}/{fmt}")
            if base and ours:
                ratios[f"{method}/{fmt}"] = round(base["seconds"] / ours["seconds"], 1)
    report = {
        "rows": args.rows,
        "file_mb": round(path.stat().st_size / 1e6, 1),
        "repeat": args.repeat,
        "methods": summary,
        "speedup_over_whileai": ratios,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"export {args.rows:,} whileai rows ({report['file_mb']:.0f} MB JSONL; unroll, strip_think, "
        f"max_tool_output_chars=200), median of {args.repeat}, fresh process each"
    )
    print(
        f"  {'method/format':<22} {'seconds':>8} {'CPU s':>7} {'rows/s':>10} {'peak RSS':>10} {'all procs':>10}"
        f" {'speedup':>8}"
    )
    for name, s in summary.items():
        ratio = ratios.get(name)
        print(
            f"  {name:<22} {s['seconds']:>8.2f} {s['cpu_seconds']:>7.1f} {args.rows / s['seconds']:>10,.0f}"
            f" {s['peak_rss_mb']:>8.0f} MB {s['total_peak_mb']:>7.0f} MB {'' if ratio is None else f'{ratio:>7.1f}x'}"
            f"  runs {s['all_seconds']}"
        )
    loads = [s["prepare_seconds"] for n, s in summary.items() if n.startswith("ours_warm")]
    if loads:
        print(f"  (ours_warm: load_dataset from the cache, before the clock, took {statistics.median(loads):.2f} s)")


if __name__ == "__main__":
    main()
