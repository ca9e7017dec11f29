"""The audit against ``tokenize`` alone, on the same rows and tokenizer, and its memory at two sizes.

Rows with unique texts (``benchmarks/_unique_rows.py``: three rounds of ask, tool call, result and
answer, the two tool schemas), the benchmark tokenizer trained on other rows of the same kind, and
trl's ``qwen2_5_training`` template. In one process, side by side:

* tokenize: ``ds.with_format("arrow").map(tokenize(tok), batched=True)`` (what a user runs before
  training; writes its cache file), and the bare transform over the same chunks the audit reads
  (``export.sources.dataset_chunks``), which is all of tokenize's own work;
* audit: ``whileai_datasets.audit(ds, tokenizer=tok, tools=TOOLS)`` (the export's pipeline, tokenize
  once, every count, histogram and location).

Ratios are audit / tokenize. Then ``--memory`` runs the audit alone in a fresh process per size and
prints each one's peak RSS (flat in the row count is the target). ``--engine ray`` instead audits the
same rows written as one JSONL file, locally and on a local Ray runtime (``--ray-cpus``, one actor per
CPU less one), side by side, and checks that the two reports agree; with ``--memory``, the Ray audit
alone per size, and the driver's peak RSS:

    python benchmarks/bench_audit.py --rows 100000
    python benchmarks/bench_audit.py --rows 20000 --memory 20000,200000
    python benchmarks/bench_audit.py --rows 20000 --engine ray
    python benchmarks/bench_audit.py --rows 0 --engine ray --memory 20000,100000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._data import TOOLS  # noqa: E402
from benchmarks._unique_rows import corpus, unique_dataset  # noqa: E402
from tests.support.tiny_lm import train_tokenizer, trl_template  # noqa: E402

TEMPLATE = "qwen2_5_training"


def _tokenizer() -> Any:
    return train_tokenizer(corpus(), chat_template=trl_template(TEMPLATE))


def _timed(run: Any) -> tuple[float, float, Any]:
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    result = run()
    after = resource.getrusage(resource.RUSAGE_SELF)
    return time.perf_counter() - start, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, result


def side_by_side(n_rows: int) -> dict[str, Any]:
    import whileai_datasets
    from whileai_datasets.export.sources import dataset_chunks
    from whileai_datasets.tokenize import Tokenize, tokenize

    ds = unique_dataset(n_rows)
    tok = _tokenizer()
    transform = Tokenize(tok)
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(dir=Path(__file__).parent / ".data") as folder:
        runs["tokenize (ds.map)"] = _timed(lambda: ds.with_format("arrow").map(
            tokenize(tok), batched=True, cache_file_name=str(Path(folder) / "tokenized.arrow")))
    runs["tokenize (transform over the chunks)"] = _timed(
        lambda: sum(transform(chunk).num_rows for chunk in dataset_chunks(ds)))
    runs["audit"] = _timed(lambda: whileai_datasets.audit(ds, tokenizer=tok, tools=TOOLS))
    found = runs["audit"][2]
    for label, (wall, cpu, _) in runs.items():
        print(f"  {label}: {wall:.1f} s wall, {cpu:.1f} s CPU", file=sys.stderr)
    return {
        "rows": n_rows, "template": TEMPLATE,
        "seconds": {k: v[0] for k, v in runs.items()}, "cpu_seconds": {k: v[1] for k, v in runs.items()},
        "audit_vs_map": runs["audit"][0] / runs["tokenize (ds.map)"][0],
        "audit_vs_transform": runs["audit"][0] / runs["tokenize (transform over the chunks)"][0],
        "audit_supervised_tokens": found.supervised_tokens, "audit_tokens": found.tokens,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }


def _status_mb(key: str) -> int:
    """``VmRSS`` / ``VmHWM`` of this process from /proc (``ru_maxrss`` keeps the peak of the forked parent's
    image across ``exec``, so a child's own peak is read here)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) // 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def audit_alone(n_rows: int) -> dict[str, Any]:
    """One audit in this process (``--child``): its seconds and this process's peak RSS."""
    import whileai_datasets

    ds = unique_dataset(n_rows)
    tok = _tokenizer()
    before = _status_mb("VmRSS")
    wall, cpu, found = _timed(lambda: whileai_datasets.audit(ds, tokenizer=tok, tools=TOOLS))
    return {"rows": n_rows, "seconds": wall, "cpu_seconds": cpu, "rss_before_audit_mb": before,
            "peak_rss_mb": _status_mb("VmHWM"), "supervised_tokens": found.supervised_tokens}


def memory(sizes: list[int], engine: str = "local", cpus: int = 2) -> list[dict[str, Any]]:
    out = []
    for n in sizes:
        unique_dataset(n) if engine == "local" else _jsonl(n)  # written once, outside the measured child
        done = subprocess.run([sys.executable, __file__, "--child", str(n), "--engine", engine, "--ray-cpus",
                               str(cpus)], check=True, capture_output=True, text=True)
        out.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"  audit of {n:,} rows alone (engine={engine}): {out[-1]['seconds']:.1f} s, peak RSS "
              f"{out[-1]['peak_rss_mb']} MB", file=sys.stderr)
    return out


def _jsonl(n_rows: int) -> Path:
    """The unique rows as one JSONL file (written once per size)."""
    from benchmarks._data import DATA_DIR
    from benchmarks._unique_rows import unique_row

    path = DATA_DIR / f"unique-{n_rows}.jsonl"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(unique_row(i)) + "\n" for i in range(n_rows))
    return path


def _ray_runtime(cpus: int) -> Any:
    import ray

    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    return ray


def on_ray(n_rows: int, cpus: int) -> dict[str, Any]:
    """The local audit and the Ray one of the same JSONL file; Ray's runtime is started before the clock."""
    import whileai_datasets

    path = _jsonl(n_rows)
    tok = _tokenizer()
    ray = _ray_runtime(cpus)
    try:
        runs = {engine: _timed(lambda engine=engine: whileai_datasets.audit(str(path), tokenizer=tok, tools=TOOLS,
                                                                           engine=engine))
                for engine in ("local", "ray")}
    finally:
        ray.shutdown()
    reports = [runs[engine][2].to_dict() for engine in ("local", "ray")]
    for report in reports:
        for histogram in report["histograms"].values():
            histogram.pop("mean")
    for label, (wall, cpu, _) in runs.items():
        print(f"  audit, engine={label}: {wall:.1f} s wall, {cpu:.1f} s CPU in this process", file=sys.stderr)
    return {"rows": n_rows, "ray_cpus": cpus, "seconds": {k: v[0] for k, v in runs.items()},
            "driver_cpu_seconds": {k: v[1] for k, v in runs.items()},
            "ray_vs_local": runs["ray"][0] / runs["local"][0], "same_report_but_float_means": reports[0] == reports[1]}


def ray_alone(n_rows: int, cpus: int) -> dict[str, Any]:
    """One Ray audit from this process (``--child --engine ray``): its seconds and the driver's peak RSS."""
    import whileai_datasets

    path = _jsonl(n_rows)
    tok = _tokenizer()
    ray = _ray_runtime(cpus)
    try:
        before = _status_mb("VmRSS")
        wall, cpu, found = _timed(lambda: whileai_datasets.audit(str(path), tokenizer=tok, tools=TOOLS, engine="ray"))
    finally:
        ray.shutdown()
    return {"rows": n_rows, "seconds": wall, "cpu_seconds": cpu, "rss_before_audit_mb": before,
            "peak_rss_mb": _status_mb("VmHWM"), "supervised_tokens": found.supervised_tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20_000, help="rows of the side-by-side run (0: skip it)")
    parser.add_argument("--memory", default="", help="comma-separated sizes: the audit alone, one process each")
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="ray: the local and the Ray audit of the same rows as a JSONL file")
    parser.add_argument("--ray-cpus", type=int, default=2, help="CPUs of the local Ray runtime (--engine ray)")
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    ray = args.engine == "ray"
    if args.child:
        print(json.dumps(ray_alone(args.child, args.ray_cpus) if ray else audit_alone(args.child)))
        return
    report: dict[str, Any] = {}
    if args.rows:
        report["side_by_side"] = on_ray(args.rows, args.ray_cpus) if ray else side_by_side(args.rows)
    if args.memory:
        report["memory"] = memory([int(n) for n in args.memory.split(",")], args.engine, args.ray_cpus)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
