"""Building the configs `publish` uploads, Arrow against a per-row Python loop doing the same work;
and (``--publish N ...``) whole publishes of N rows with unique texts to a local Hub server.

The input is the canonical dataset of an N-row benchmark file (prepared once, before the clock).
The Arrow side is what `publish` runs before any request: `canonical_table` (messages as
``Message`` structs, the mask checked), `trainer_table` (the default config: a prompt/completion
row per loss-carrying turn, TRL messages, Json) and `canonical_rows` (the canonical config as
Json). The Python side walks the decoded rows, builds the same prompt/completion and canonical
rows as dicts and hands them to `Dataset.from_list` with the same built-in features. Both
outputs are checked equal once; then the two alternate round by round and the report is the
median of each and their ratio.

    python benchmarks/bench_publish.py --rows 20000 --repeat 3

``--publish 100000 1000000``: rows of ``_data.make_unique_file`` (every ask and answer unique),
loaded through the ``whileai/export`` builder with the system prompt and tools (the cache is
prepared first, outside the clock), ``split_by`` scenario, then ``publish`` to the local Hub of
tests/hub_server, each in a fresh process whose peak RSS (with its children,
``_memory.TotalPeak``) and publish time are reported, with the per-row slope between the two
largest sizes and the 10M-row estimate from it. Each run also prints its CPU seconds (user + system
of the process tree, and the hub server's apart), its RSS over the run (the peak of each tenth:
flat or growing) and the load averages before and after it, and the summary the ratio
time(largest)/time(smallest) in wall and CPU seconds. ``--old`` also runs main's code (``git
archive main``) at the sizes up to 100k, side by side; ``--ray`` publishes the same file with
``ray_engine.publish_rollouts`` on a local Ray runtime of 2 CPUs (object store
``--object-store-mb``, default 512) and then checks that the local and the Ray repo of each size
hold the same rows: per config and split, the row count and a sha256 of the rows in order.
``--ray-staged`` also runs the Ray publish with ``staging=`` (the workers write the shards to a folder) and
prints its ratio to the default one (the shards come back to the driver through the object store).

    python benchmarks/bench_publish.py --publish 100000 --old
    python benchmarks/bench_publish.py --publish 100000 1000000 --ray
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
if os.environ.get("BENCH_PUBLISH_PACKAGE"):  # --old: main's whileai_datasets ahead of this checkout's
    sys.path.insert(0, os.environ["BENCH_PUBLISH_PACKAGE"])
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")

from benchmarks._data import load_benchmark_rows  # noqa: E402


def arrow_configs(ds: Any) -> tuple[Any, Any]:
    from whileai_datasets.hub import configs

    canonical = configs.canonical_table(ds, "bench")
    return configs.trainer_table(canonical, "bench"), configs.canonical_rows(canonical)


def _trl(message: dict[str, Any]) -> dict[str, Any]:
    calls = message.get("tool_calls")
    if not calls:
        return message
    decoded = [{**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}} for c in calls]
    return {**message, "tool_calls": decoded}


def python_configs(ds: Any, default_features: Any, canonical_features: Any) -> tuple[Any, Any]:
    from datasets import Dataset

    default_rows, canonical_rows = [], []
    for row in ds:
        messages, mask = row["messages"], row["loss_mask"]
        canonical_rows.append(row)
        carried = {k: v for k, v in row.items() if k in default_features and k not in ("prompt", "completion")}
        if row.get("prompt"):
            carried["prompt_text"] = row["prompt"]
        carried["schema_version"] = "1"
        trl = [_trl(m) for m in messages]
        for index, flag in enumerate(mask):
            if flag:
                default_rows.append({**carried, "prompt": trl[:index], "completion": [trl[index]]})
    return (Dataset.from_list(default_rows, features=default_features),
            Dataset.from_list(canonical_rows, features=canonical_features))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--publish", type=int, nargs="+", metavar="N", help="publish N rows (several sizes)")
    parser.add_argument("--old", action="store_true", help="with --publish: main's code too, up to 100k rows")
    parser.add_argument("--ray", action="store_true", help="with --publish: ray_engine.publish_rollouts too")
    parser.add_argument("--ray-only", action="store_true", help="with --publish: only ray_engine.publish_rollouts")
    parser.add_argument("--object-store-mb", type=int, default=512,
                        help="with --ray: the Ray object store's size (MB; 0: Ray's default, 30%% of memory)")
    parser.add_argument("--no-compare", action="store_true", help="with --ray: skip the row check of the two repos")
    parser.add_argument("--ray-staged", action="store_true",
                        help="with --ray: also the Ray publish whose workers write the shards to a shared folder "
                             "(staging=), beside the default one whose shards come back through the object store")
    parser.add_argument("--child", nargs=4, metavar=("N", "ENGINE", "REPO", "STORE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        from benchmarks._publish import child

        child(int(args.child[0]), args.child[1], args.child[2], int(args.child[3]))
        return
    if args.publish:
        from benchmarks._publish import run_publishes

        run_publishes(args.publish, old=args.old, ray=args.ray or args.ray_only, local=not args.ray_only,
                      object_store_mb=args.object_store_mb, compare=not args.no_compare, ray_staged=args.ray_staged)
        return

    import datasets
    from datasets import Features

    from whileai_datasets.columnar._portable import portable_features

    with tempfile.TemporaryDirectory() as cache:
        ds = load_benchmark_rows(args.rows, cache)
        default, canonical = arrow_configs(ds)
        default_features = Features(portable_features(default.schema))
        canonical_features = Features(portable_features(canonical.schema))
        python_default, python_canonical = python_configs(ds, default_features, canonical_features)
        assert python_default.num_rows == default.num_rows and python_canonical.num_rows == canonical.num_rows
        sample = range(0, default.num_rows, max(1, default.num_rows // 50))
        arrow_rows = datasets.Dataset(datasets.table.InMemoryTable(default))
        assert [arrow_rows[i] for i in sample] == [python_default[i] for i in sample], "the two sides differ"

        times: dict[str, list[float]] = {"arrow": [], "python": []}
        for _ in range(args.repeat):
            start = time.perf_counter()
            arrow_configs(ds)
            times["arrow"].append(time.perf_counter() - start)
            start = time.perf_counter()
            python_configs(ds, default_features, canonical_features)
            times["python"].append(time.perf_counter() - start)
    arrow, python = statistics.median(times["arrow"]), statistics.median(times["python"])
    print(f"{ds.num_rows} canonical rows -> {default.num_rows} default rows, median of {args.repeat}")
    print(f"  arrow (publish)  {arrow:7.2f} s")
    print(f"  python per row   {python:7.2f} s   ({python / arrow:.1f}x the Arrow time)")


if __name__ == "__main__":
    main()
