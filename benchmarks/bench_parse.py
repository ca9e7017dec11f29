"""CPU seconds of one parse worker's piece: ``rows.parallel.parse_piece`` (parse,
normalize, leak facts, Arrow IPC out) on the first N rows of the benchmark file,
against an orjson parse of the same lines (the floor) and whileai's own
``training_rows`` + ``leak_report`` over them (json.loads first, as its readers do).

Each measurement is a fresh subprocess that runs its method once to warm up, then
``--inner`` times, reporting the median CPU seconds (``time.process_time``);
methods (and source trees, ``--trees``) alternate round by round so machine noise
hits them alike. ``--trees before=/path/to/a/checkout,after=.`` times the same
methods of several checkouts of this package side by side.

    python benchmarks/bench_parse.py --rows 20000 --repeat 5
    python benchmarks/bench_parse.py --rows 20000 --repeat 5 --methods piece --trees main=/tmp/main,ours=.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._data import DATA_DIR, make_export_file

CHILD = r"""
import json, os, statistics, sys, tempfile, time
method, path, tree, inner = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.path.insert(0, tree)
sys.path.insert(1, sys.argv[5])  # benchmarks/ of this checkout
from benchmarks._data import SYSTEM_PROMPT
if method.startswith("piece"):
    try:
        from whileai_datasets.reading import parallel
    except ImportError:  # a tree from before file reading moved out of rows/
        from whileai_datasets.rows import parallel
    from whileai_datasets.rows.canonical import Options
    out = os.path.join(tempfile.mkdtemp(), "piece.arrow")
    job = parallel.Job(path, os.path.basename(path), 0, os.path.getsize(path), 0, 0, "default",
                       Options(system_prompt=SYSTEM_PROMPT), 2000, "raise", method == "piece", out)
    def run():
        parallel.parse_piece(job)
        os.remove(out)
elif method == "orjson":
    import orjson
    def run():
        with open(path, "rb") as handle:
            for line in handle:
                orjson.loads(line)
else:
    from whileai.simulations import leak_report, training_rows
    def run():
        with open(path, encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle]
        training_rows(rows, system_prompt=SYSTEM_PROMPT, strip_think=False)
        leak_report(rows)
run()
times = []
for _ in range(inner):
    start = time.process_time()
    run()
    times.append(time.process_time() - start)
print(json.dumps({"cpu": statistics.median(times), "min": min(times)}))
"""

METHODS = ("piece", "piece_noleaks", "orjson", "whileai")
LABELS = {
    "piece": "parse_piece, leak facts",
    "piece_noleaks": "parse_piece, no leak facts",
    "orjson": "orjson parse (floor)",
    "whileai": "whileai training_rows + leak_report",
}


def piece_file(rows: int) -> Path:
    """The first ``rows`` lines of the benchmark file (git-ignored ``benchmarks/.data``)."""
    source = make_export_file(None, max(rows, 100_000))
    target = DATA_DIR / f"piece-{rows}.jsonl"
    if not target.exists():
        with open(source, "rb") as handle, open(target, "wb") as out:
            out.writelines(line for _, line in zip(range(rows), handle))
    return target


def measure(method: str, path: Path, tree: str, inner: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, method, str(path), tree, str(inner), str(ROOT)],
        check=True, capture_output=True, text=True, timeout=3600,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5, help="rounds (fresh processes) per method")
    parser.add_argument("--inner", type=int, default=3, help="timed runs per process (median)")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated, from %(default)s")
    parser.add_argument("--trees", default=f"ours={ROOT}", help="name=path of checkouts, comma-separated")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    trees = dict(item.split("=", 1) for item in args.trees.split(","))
    path = piece_file(args.rows)
    keys = [(t, m) for t in trees for m in methods if m.startswith("piece") or t == next(iter(trees))]
    runs: dict[tuple[str, str], list[float]] = {key: [] for key in keys}
    for round_no in range(args.repeat):
        for tree, method in keys:
            runs[tree, method].append(measure(method, path, str(Path(trees[tree]).resolve()), args.inner)["cpu"])
            print(f"  round {round_no + 1}/{args.repeat} {tree} {method}: {runs[tree, method][-1]:.3f} CPU s",
                  file=sys.stderr)
    summary = {f"{t}:{m}": {"cpu_median": statistics.median(v), "cpu_min": min(v), "runs": [round(x, 3) for x in v]}
               for (t, m), v in runs.items()}
    ratios = {}
    for tree in trees:
        ours = summary.get(f"{tree}:piece")
        for other, name in (("whileai", "whileai_over_piece"), ("orjson", "piece_over_orjson_floor")):
            theirs = summary.get(f"{next(iter(trees))}:{other}")
            if ours and theirs:
                value = theirs["cpu_median"] / ours["cpu_median"] if other == "whileai" else (
                    ours["cpu_median"] / theirs["cpu_median"])
                ratios[f"{tree}:{name}"] = round(value, 2)
    names = list(trees)
    for first, second in itertools.pairwise(names):
        for method in methods:
            a, b = summary.get(f"{first}:{method}"), summary.get(f"{second}:{method}")
            if a and b and method.startswith("piece"):
                ratios[f"{method}:{first}_over_{second}"] = round(a["cpu_median"] / b["cpu_median"], 3)
    report = {"rows": args.rows, "repeat": args.repeat, "inner": args.inner, "methods": summary, "ratios": ratios}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"one parse worker's piece: the first {args.rows:,} benchmark rows, CPU s, "
          f"median of {args.repeat} processes x {args.inner} runs")
    for key, s in summary.items():
        tree, method = key.split(":")
        print(f"  {tree:<8} {LABELS[method]:<38} {s['cpu_median']:>7.3f} (min {s['cpu_min']:.3f})  runs {s['runs']}")
    for name, value in ratios.items():
        print(f"  {name}: {value}x")


if __name__ == "__main__":
    main()
