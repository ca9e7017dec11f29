"""Each transform against a per-example Python ``Dataset.map`` doing the same work.

The input is the canonical dataset of an N-row benchmark file (prepared once,
before the clock). For every transform, the Arrow version runs as
``ds.with_format("arrow").map(t, batched=True)`` and the Python version as a
per-example ``ds.map(f)`` built on whileai's own helpers (``_strip_think``,
``loss_mask``, ``_unroll``, ``_trl_messages``; transforms that change the
row count run with ``batched=True, batch_size=1``, the only per-example way to
do that). ``stamp_groups`` needs every row, so its Python side is whileai's
``_stamp_groups`` over the rows as Python dicts. Both sides write their
Arrow cache files (``load_from_cache_file=False``); the two alternate round
by round and the report is the median of each and their ratio.

    python benchmarks/bench_transforms.py --rows 20000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")

from benchmarks._data import DATA_DIR, SYSTEM_PROMPT, make_export_file  # noqa: E402

MAX_CHARS = 200


def python_strip_think(example: dict[str, Any]) -> dict[str, Any]:
    from whileai.simulations.export import _strip_think

    messages = example["messages"]
    return {
        "messages": [{**m, "content": _strip_think(m["content"])} if m["role"] == "assistant" else m for m in messages]
    }


def python_truncate(example: dict[str, Any]) -> dict[str, Any]:
    messages, count, cut_total = [], 0, 0
    for m in example["messages"]:
        content = m["content"] or ""
        if m["role"] == "tool" and len(content) > MAX_CHARS:
            cut = len(content) - MAX_CHARS
            m = {**m, "content": content[:MAX_CHARS] + "\n[... " + str(cut) + " chars of tool output truncated]"}
            count, cut_total = count + 1, cut_total + cut
        messages.append(m)
    return {
        "messages": messages,
        "tool_output_truncated": count or None,
        "tool_output_chars_cut": cut_total if count else None,
    }


def python_loss_mask(example: dict[str, Any]) -> dict[str, Any]:
    from whileai.simulations import loss_mask

    return {"loss_mask": loss_mask(example["messages"], mode="final")}


def python_unroll(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    from whileai.simulations.export import _unroll

    row = {k: v[0] for k, v in batch.items()}
    samples = _unroll(row, row)
    keys = list(batch) + ["unroll"]
    return {k: [s.get(k) for s in samples] for k in keys}


def python_to_trl(example: dict[str, Any]) -> dict[str, Any]:
    from whileai.simulations.export import _trl_messages

    return {"trl_messages": [json.dumps(m) for m in _trl_messages(example["messages"])]}


def timed(run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def cases(ds: Any) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """name -> (Arrow run, per-example Python run)."""
    from whileai.simulations.export import _stamp_groups

    import whileai_datasets
    from whileai_datasets import transforms as wai

    arrow = ds.with_format("arrow")
    keep = dict(load_from_cache_file=False)

    def ours(transform: Any) -> Callable[[], Any]:
        return lambda: arrow.map(transform, batched=True, **keep)

    return {
        "strip_think": (ours(wai.strip_think), lambda: ds.map(python_strip_think, **keep)),
        f"truncate_tool_output({MAX_CHARS})": (
            ours(wai.truncate_tool_output(MAX_CHARS)),
            lambda: ds.map(python_truncate, **keep),
        ),
        'loss_mask("final")': (ours(wai.loss_mask("final")), lambda: ds.map(python_loss_mask, **keep)),
        "unroll": (ours(wai.unroll), lambda: ds.map(python_unroll, batched=True, batch_size=1, **keep)),
        'to_trl("training")': (ours(wai.to_trl("training")), lambda: ds.map(python_to_trl, **keep)),
        "stamp_groups": (lambda: whileai_datasets.stamp_groups(ds), lambda: _stamp_groups(ds.to_list())),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    import datasets

    import whileai_datasets  # noqa: F401

    path = make_export_file(None, args.rows)
    with tempfile.TemporaryDirectory(dir=DATA_DIR) as cache:
        ds = datasets.load_dataset(
            "whileai/export", data_files=str(path), split="train", system_prompt=SYSTEM_PROMPT, cache_dir=cache
        )
        runs = {name: ([], []) for name in cases(ds)}
        for round_no in range(args.repeat):
            for name, (arrow_run, python_run) in cases(ds).items():
                runs[name][0].append(timed(arrow_run))
                runs[name][1].append(timed(python_run))
                print(
                    f"  round {round_no + 1}/{args.repeat} {name}: arrow {runs[name][0][-1]:.2f} s, "
                    f"python {runs[name][1][-1]:.2f} s",
                    file=sys.stderr,
                )
    summary = {
        name: {
            "arrow_seconds": statistics.median(a),
            "python_seconds": statistics.median(p),
            "speedup": round(statistics.median(p) / statistics.median(a), 1),
        }
        for name, (a, p) in runs.items()
    }
    if args.json:
        print(json.dumps({"rows": args.rows, "repeat": args.repeat, "transforms": summary}, indent=2))
        return
    print(
        f"transforms on {args.rows:,} canonical rows, median of {args.repeat} (Arrow batched map vs per-example Python map)"
    )
    print(f"  {'transform':<28} {'arrow s':>8} {'python s':>9} {'speedup':>8}")
    for name, s in summary.items():
        print(f"  {name:<28} {s['arrow_seconds']:>8.2f} {s['python_seconds']:>9.2f} {s['speedup']:>7.1f}x")


if __name__ == "__main__":
    main()
