"""Building the configs `publish` uploads, Arrow against a per-row Python loop doing the same work.

The input is the canonical dataset of an N-row benchmark file (prepared once, before the clock).
The Arrow side is what `publish` runs before any request: `canonical_table` (messages as
``Message`` structs, the mask checked), `trainer_table` (the default config: a prompt/completion
row per loss-carrying turn, TRL messages, Json) and `canonical_rows` (the canonical config as
Json). The Python side walks the decoded rows, builds the same prompt/completion and canonical
rows as dicts and hands them to `Dataset.from_list` with the same built-in features. Both
outputs are checked equal once; then the two alternate round by round and the report is the
median of each and their ratio.

    python benchmarks/bench_publish.py --rows 20000 --repeat 3
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
    args = parser.parse_args()

    import datasets
    from datasets import Features

    from whileai_datasets.transforms._portable import portable_features

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
