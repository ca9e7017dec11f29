"""The export's throughput on a multi-node Ray cluster against one Ray node and the local engine, in one run.

Exports the same N-row file (benchmarks/_data.py) to Parquet with bench_ray.py's options
(strip_think, max_tool_output_chars=200, format openai, validate=False, GRPO groups stamped) with:

* ``local``: the local engine (``export_dataset``, one process, one file);
* ``one-node``: the Ray engine on a cluster of one node with ``--cpus`` CPUs (the driver on it);
* ``cluster``: the Ray engine on a head node with no CPUs (the driver on it) and ``--workers`` worker nodes of
  ``--cpus / --workers`` CPUs each (at least one): with the default two workers, three nodes, and every
  task crosses a node boundary as on a real cluster.

Both clusters are started here with ``ray.cluster_utils.Cluster`` on 127.0.0.1 only
(``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``), each in a fresh subprocess; start-up is timed apart and not
counted. On a machine of few cores the nodes share them: the figures show the cost of the cluster's
object transfers and scheduling, not a speedup. With ``--address`` the export runs once on that running
cluster instead of the two started here (its nodes and CPUs as they are, beside the local engine on this
machine), so the same command measures a real cluster. ``--input`` and ``--output`` take URIs
(``s3://bucket/prefix/``): each layout writes under ``<output>/<layout>``, so no node needs a shared mount:

    python benchmarks/bench_ray_cluster.py --rows 20000
    python benchmarks/bench_ray_cluster.py --rows 2000000 --address auto --input s3://bucket/rollouts/big.jsonl \\
        --output s3://bucket/exports/bench
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._data import make_export_file  # noqa: E402

CHILD = r"""
import json, os, sys, time
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
layout, address, path, output, cpus, workers, root = sys.argv[1:8]
sys.path.insert(0, root)
import ray, ray.data
from benchmarks._data import SYSTEM_PROMPT, TOOLS
from whileai_datasets import ray_engine
started = time.perf_counter()
cluster = None
options = dict(system_prompt=SYSTEM_PROMPT, tools=TOOLS, strip_think=True, max_tool_output_chars=200, validate=False)
if layout == "local":
    import whileai_datasets
    began = time.perf_counter()
    report = whileai_datasets.export_dataset(path, output + ".parquet", **options)
    print(json.dumps({"layout": layout, "nodes": 1, "cpus": 1, "rows": report["n_written"],
                      "seconds": time.perf_counter() - began, "startup": 0.0}))
    sys.exit(0)
if address:
    ray.init(address=address, log_to_driver=False)
else:
    from ray.cluster_utils import Cluster
    memory = 500 << 20
    if layout == "one-node":
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": int(cpus), "include_dashboard": False,
                                                                "object_store_memory": memory})
    else:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False,
                                                                "object_store_memory": memory})
        for _ in range(int(workers)):
            cluster.add_node(num_cpus=max(1, int(cpus) // int(workers)), object_store_memory=memory)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
ray.data.DataContext.get_current().enable_progress_bars = False
startup = time.perf_counter() - started
nodes = [n for n in ray.nodes() if n["Alive"]]
try:
    began = time.perf_counter()
    report = ray_engine.export_training(path, output, **options)
    seconds = time.perf_counter() - began
finally:
    ray.shutdown()
    if cluster is not None:
        cluster.shutdown()
cpus_seen = sum(n["Resources"].get("CPU", 0) for n in nodes)
print(json.dumps({"layout": layout, "nodes": len(nodes), "cpus": cpus_seen, "rows": report["n_written"],
                  "seconds": seconds, "startup": startup}))
"""


def run(layout: str, args: argparse.Namespace, path: str, work: Path) -> dict[str, Any]:
    output = f"{args.output.rstrip('/')}/{layout}" if args.output else str(work / layout)
    done = subprocess.run([sys.executable, "-c", CHILD, layout, args.address or "", path, output,
                           str(args.cpus), str(args.workers), str(ROOT)],
                          capture_output=True, text=True, check=False, env={**os.environ})
    if done.returncode != 0:
        raise SystemExit(f"{layout}: the export failed:\n{done.stderr[-4000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--cpus", type=int, default=2, help="CPUs in all (one node's, or the workers' together)")
    parser.add_argument("--workers", type=int, default=2, help="worker nodes of the multi-node cluster")
    parser.add_argument("--address", help="the Ray engine on this running cluster instead (e.g. auto)")
    parser.add_argument("--input", help="the JSONL to export, a path or a URI (default: N generated rows)")
    parser.add_argument("--output", help="a folder or URI prefix to write under (default: a temp folder)")
    args = parser.parse_args()
    path = args.input or str(make_export_file(None, args.rows))
    layouts = ["local", "cluster"] if args.address else ["local", "one-node", "cluster"]
    with tempfile.TemporaryDirectory() as work:
        results = [run(layout, args, path, Path(work)) for layout in layouts]
    base = results[0]["rows"] / results[0]["seconds"]
    print(f"{'layout':<10} {'nodes':>5} {'CPUs':>5} {'rows':>9} {'export s':>9} {'rows/s':>9} {'vs local':>8} "
          f"{'start-up s':>10}")
    for r in results:
        rate = r["rows"] / r["seconds"]
        print(f"{r['layout']:<10} {r['nodes']:>5} {r['cpus']:>5.0f} {r['rows']:>9,} {r['seconds']:>9.1f} "
              f"{rate:>9,.0f} {rate / base:>7.2f}x {r['startup']:>10.1f}")


if __name__ == "__main__":
    main()
