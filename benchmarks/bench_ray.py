"""The export on Ray Data against the local path, on the same input, in one run.

Both export the same N-row file to Parquet with the options of
bench_export.py (strip_think, max_tool_output_chars=200, format openai,
validate=False), in two variants: ``groups`` (no unroll: GRPO groups are
stamped, which needs every row first; the Ray path materializes the canonical
rows and groups with Ray's ``groupby``) and ``unroll`` (no groups: the Ray
path streams from read to write). Methods:

* ``local``: ``whileai_datasets.export_dataset(path, "out.parquet", ...)`` with
  an empty ``datasets`` cache (the builder parses the file, then the export runs).
* ``ray``: ``whileai_datasets.ray_engine.export_training(path, "out/", ...)`` on a
  local runtime started in the same process (``ray.init(num_cpus=2)``; the
  start-up is timed apart and not counted in the throughput).

Each measurement runs in a fresh subprocess. Memory, as measured:

* local: the process's peak RSS (``getrusage``).
* ray: every process Ray started is sampled with psutil every 0.5 s (RSS) and
  every 2 s (USS, which reads /proc/PID/smaps, costly); a worker
  is a process whose title is ``ray::<stage>`` for a stage of the pipeline
  (read, map_batches, shuffle, write; Ray's own actors are listed apart). Per
  worker, the peak RSS (which includes the object-store pages it mapped), the
  peak USS (pages only that process holds, which includes the object-store
  pages it wrote that no other process has read yet) and the peak USS outside
  the object store (from /proc/PID/smaps: every private page except those of
  the /dev/shm/plasma* mapping): the worker's own heap. Also the driver's peak
  RSS, the peak RSS of Ray's own services (raylet, GCS), and the object store's
  peak use (/dev/shm).

CPU seconds: the local process's user + system time; for Ray, the driver's
plus every Ray process's during the export (psutil, sampled: a process that
ends between samples loses its last half second).

    python benchmarks/bench_ray.py --rows 1000000
    python benchmarks/bench_ray.py --rows 100000 --variants unroll --methods ray
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._data import DATA_DIR, make_export_file  # noqa: E402

CHILD = r"""
import json, os, resource, sys, threading, time
method, variant, path, workdir, root = sys.argv[1:6]
os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
os.environ["HF_DATASETS_CACHE"] = os.path.join(workdir, "cache")
sys.path.insert(0, root)
from benchmarks._data import SYSTEM_PROMPT, TOOLS
options = dict(system_prompt=SYSTEM_PROMPT, tools=TOOLS, strip_think=True, max_tool_output_chars=200,
               format="openai", validate=False, unroll=variant == "unroll")
MB = 1 << 20


def size(folder):
    if os.path.isfile(folder):
        return os.path.getsize(folder)
    return sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder))


if method == "local":
    from whileai_datasets import export_dataset
    out = os.path.join(workdir, "out.parquet")
    start = time.perf_counter()
    report = export_dataset(path, out, **options)
    seconds = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"seconds": seconds, "rows_out": report["n"], "peak_rss_mb": usage.ru_maxrss / 1024,
                      "cpu_seconds": usage.ru_utime + usage.ru_stime, "out_mb": size(out) / MB}))
    sys.exit(0)

import psutil
import ray

STAGES = ("Read", "MapBatches", "Write", "Shuffle", "Project")


def private_memory(proc):
    # (USS, USS outside the object store): pages of the plasma store in /dev/shm
    # that only this process has touched count as private too
    uss = own = 0
    for region in proc.memory_maps(grouped=True):
        private = region.private_clean + region.private_dirty
        uss += private
        if not region.path.startswith("/dev/shm/plasma"):
            own += private
    return uss, own


class Sampler(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.procs = {}
        self.shm_peak = 0
        self.started = time.time()

    def run(self):
        me = psutil.Process()
        tick = 0
        while not self.stop.wait(0.5):
            tick += 1
            for proc in me.children(recursive=True):
                try:
                    title = proc.cmdline()[0] if proc.cmdline() else proc.name()
                    rss = proc.memory_info().rss
                    # smaps is costly to read: every 2 s, and only for the pipeline's workers
                    staged = any(stage in title for stage in STAGES)
                    uss, own = private_memory(proc) if staged and tick % 4 == 0 else (0, 0)
                    cpu = sum(proc.cpu_times()[:2])
                except (psutil.NoSuchProcess, psutil.AccessDenied, IndexError):
                    continue
                # a process started during the export counts all its CPU time
                born = proc.create_time() > self.started
                entry = self.procs.setdefault(proc.pid, {"title": title, "rss": 0, "uss": 0, "own": 0, "busy": False,
                                                         "cpu0": 0.0 if born else cpu})
                entry["cpu"] = cpu
                if not title.startswith("ray::IDLE"):
                    entry["title"] = title
                entry["busy"] |= title.startswith("ray::") and not title.startswith("ray::IDLE")
                entry["rss"] = max(entry["rss"], rss)
                entry["uss"] = max(entry["uss"], uss)
                entry["own"] = max(entry["own"], own)
            usage = psutil.disk_usage("/dev/shm")
            self.shm_peak = max(self.shm_peak, usage.used)


start = time.perf_counter()
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
init_seconds = time.perf_counter() - start
ray.data.DataContext.get_current().enable_progress_bars = False
from whileai_datasets import ray_engine
shm_before = psutil.disk_usage("/dev/shm").used
sampler = Sampler()
sampler.start()
out = os.path.join(workdir, "out")
driver_cpu0 = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
start = time.perf_counter()
report = ray_engine.export_training(path, out, **options)
seconds = time.perf_counter() - start
sampler.stop.set()
sampler.join()
driver_cpu = sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) - driver_cpu0
workers = [p for p in sampler.procs.values() if p["title"].startswith("ray::")]
services = [p for p in sampler.procs.values() if not p["title"].startswith("ray::")]
# workers that ran the pipeline's tasks (the others host Ray's actors and agents, and the report collector)
busy = [p for p in workers if p["busy"] and any(stage in p["title"] for stage in STAGES)]
print(json.dumps({
    "seconds": seconds,
    "init_seconds": init_seconds,
    "rows_out": report["n"],
    "out_mb": size(out) / MB,
    "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    # CPU used during the export: the driver's, plus every Ray process's since it was first seen
    "cpu_seconds": driver_cpu + sum(p["cpu"] - p["cpu0"] for p in sampler.procs.values()),
    "workers": len(workers),
    "busy_workers": len(busy),
    "worker_peak_rss_mb": max((p["rss"] for p in busy), default=0) / MB,
    "worker_peak_uss_mb": max((p["uss"] for p in busy), default=0) / MB,
    "worker_peak_own_mb": max((p["own"] for p in busy), default=0) / MB,
    "other_ray_processes_peak_rss_mb": {p["title"][:40]: round(p["rss"] / MB) for p in workers if p not in busy},
    "per_worker": sorted(({"rss_mb": round(p["rss"] / MB), "uss_mb": round(p["uss"] / MB),
                           "own_mb": round(p["own"] / MB), "last_task": p["title"]}
                          for p in busy), key=lambda p: -p["rss_mb"]),
    "services_peak_rss_mb": {p["title"].rsplit("/", 1)[-1][:40]: round(p["rss"] / MB) for p in services},
    "object_store_peak_mb": (sampler.shm_peak - shm_before) / MB,
}))
ray.shutdown()
"""

METHODS = ("local", "ray")
VARIANTS = ("groups", "unroll")


def measure(method: str, variant: str, path: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=DATA_DIR) as workdir:
        root = str(Path(__file__).resolve().parent.parent)
        done = subprocess.run(
            [sys.executable, "-c", CHILD, method, variant, str(path), workdir, root],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode:
        raise RuntimeError(f"{method}/{variant} failed:\n{done.stderr[-4000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    path = make_export_file(None, args.rows)
    print(f"{args.rows:,} rows, {path.stat().st_size / 2**20:,.0f} MB of JSONL ({path.name})")
    results: dict[str, Any] = {}
    for variant in args.variants:
        for method in args.methods:
            result = measure(method, variant, path)
            result["rows_per_s"] = args.rows / result["seconds"]
            results[f"{method}/{variant}"] = result
            print(f"{method}/{variant}: " + json.dumps(result), flush=True)
    print()
    print("| variant | method | seconds | source rows/s | CPU seconds | rows out | peak memory |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, r in results.items():
        method, variant = name.split("/")
        if method == "local":
            memory = f"{r['peak_rss_mb']:,.0f} MB (process)"
        else:
            memory = (
                f"per worker (max of {r['busy_workers']}): {r['worker_peak_rss_mb']:,.0f} MB RSS, "
                f"{r['worker_peak_uss_mb']:,.0f} MB USS, {r['worker_peak_own_mb']:,.0f} MB outside the object store; "
                f"driver {r['driver_peak_rss_mb']:,.0f} MB RSS; object store {r['object_store_peak_mb']:,.0f} MB"
            )
        print(
            f"| {variant} | {method} | {r['seconds']:.1f} | {r['rows_per_s']:,.0f} | {r['cpu_seconds']:.0f} "
            f"| {r['rows_out']:,} | {memory} |"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
