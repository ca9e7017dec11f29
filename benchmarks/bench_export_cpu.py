"""CPU seconds of the export pipeline alone, over a dataset already loaded.

``bench_export.py`` times whole exports (load and export) against whileai;
this one isolates the part after the load: canonical chunks through the
transforms, the JSONL text and the file write, the part a cold export spends
~half its CPU in. The dataset is loaded once (from the ``datasets`` cache; the
first run of a file fills it, untimed), then every export runs in this
process and is timed in CPU seconds of all its threads (``time.process_time``:
the pipeline runs two chunks at a time in threads), with the system share
(kernel: mostly the file write) apart.

Side by side in one run, alternating export by export so machine noise hits
all alike, each measured change is switched off in turn and compared with
the default:

* ``quote every string``: no escaping per distinct string
  (``_text.DISTINCT_SHARE = 0``).

    python benchmarks/bench_export_cpu.py --rows 100000 --repeat 5
    python benchmarks/bench_export_cpu.py --rows 100000 --configs openai:unroll --variants default --repeat 3 --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")

from benchmarks._data import DATA_DIR, SYSTEM_PROMPT, TOOLS, make_export_file  # noqa: E402

CONFIGS = ("openai:unroll", "trl:unroll", "fireworks:unroll", "openai:rows", "trl:rows", "fireworks:rows")


def _variants() -> dict[str, Callable[[], Callable[[], None]]]:
    """name -> a function that switches the change off and returns its undo."""
    from whileai_datasets.columnar import _text

    def setting(module: Any, name: str, value: Any) -> Callable[[], Callable[[], None]]:
        def switch() -> Callable[[], None]:
            before = getattr(module, name)
            setattr(module, name, value)
            return lambda: setattr(module, name, before)

        return switch

    return {
        "default": lambda: lambda: None,
        "quote every string": setting(_text, "DISTINCT_SHARE", 0),
    }


def _system_seconds() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


def export_once(dataset: Any, config: str, out: str) -> dict[str, float]:
    from whileai_datasets import export_dataset

    fmt, shape = config.split(":")
    if os.path.exists(out):
        os.remove(out)  # a fresh file, as a first export writes
    cpu, system, wall = time.process_time(), _system_seconds(), time.perf_counter()
    report = export_dataset(
        dataset, out, system_prompt=SYSTEM_PROMPT, tools=TOOLS, unroll=shape == "unroll", strip_think=True,
        max_tool_output_chars=200, format=fmt, validate=False,
    )
    return {
        "cpu": time.process_time() - cpu,
        "system": _system_seconds() - system,
        "wall": time.perf_counter() - wall,
        "rows_out": report["n"],
        "out_mb": os.path.getsize(out) / 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated subset of %(default)s")
    parser.add_argument("--variants", default="default,quote every string",
                        help="comma-separated: default and the changes to switch off")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    variants = _variants()
    names = [v for v in args.variants.split(",") if v]
    unknown = [c for c in configs if c not in CONFIGS] + [v for v in names if v not in variants]
    if unknown:
        parser.error(f"unknown configs or variants: {unknown}; configs are {CONFIGS}, variants {list(variants)}")
    path = make_export_file(None, args.rows)
    with tempfile.TemporaryDirectory(dir=DATA_DIR) as work:
        os.environ["HF_DATASETS_CACHE"] = os.path.join(work, "cache")
        from whileai_datasets.export import sources

        start = time.perf_counter()
        dataset = sources.load_path(str(path), SYSTEM_PROMPT)
        print(f"  loaded {len(dataset):,} rows in {time.perf_counter() - start:.1f} s (untimed)", file=sys.stderr)
        runs: dict[tuple[str, str], list[dict[str, float]]] = {(c, v): [] for c in configs for v in names}
        for round_no in range(args.repeat):
            for config in configs:
                for name in names:
                    undo = variants[name]()
                    try:
                        result = export_once(dataset, config, os.path.join(work, "out.jsonl"))
                    finally:
                        undo()
                    runs[(config, name)].append(result)
                    print(f"  round {round_no + 1}/{args.repeat} {config} {name}: {result['cpu']:.2f} CPU s "
                          f"({result['system']:.2f} system), {result['wall']:.2f} s", file=sys.stderr)
    summary = {
        f"{c}/{v}": {
            "cpu_seconds": statistics.median(r["cpu"] for r in rs),
            "system_seconds": statistics.median(r["system"] for r in rs),
            "wall_seconds": statistics.median(r["wall"] for r in rs),
            "all_cpu_seconds": [round(r["cpu"], 2) for r in rs],
            "rows_out": int(rs[0]["rows_out"]),
            "out_mb": round(rs[0]["out_mb"], 1),
        }
        for (c, v), rs in runs.items()
    }
    for config in configs:
        base = summary.get(f"{config}/default")
        for name in names:
            if base and name != "default":
                entry = summary[f"{config}/{name}"]
                entry["cpu_vs_default"] = round(entry["cpu_seconds"] / base["cpu_seconds"], 3)
    if args.json:
        print(json.dumps({"rows": args.rows, "repeat": args.repeat, "runs": summary}, indent=2))
        return
    print(f"export pipeline over {args.rows:,} loaded rows (strip_think, max_tool_output_chars=200), "
          f"median of {args.repeat}, CPU seconds of all threads")
    print(f"  {'config/variant':<40} {'CPU s':>6} {'system':>7} {'wall s':>7} {'vs default':>11} {'out MB':>7}")
    for key, s in summary.items():
        ratio = s.get("cpu_vs_default")
        print(f"  {key:<40} {s['cpu_seconds']:>6.2f} {s['system_seconds']:>7.2f} {s['wall_seconds']:>7.2f}"
              f" {'' if ratio is None else f'{ratio:>10.2f}x'} {s['out_mb']:>7.0f}  runs {s['all_cpu_seconds']}")


if __name__ == "__main__":
    main()
