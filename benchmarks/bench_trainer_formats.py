"""The configs other trainers read (`messages`, `sharegpt`) and the per-trainer gaps, Arrow per chunk
against a per-row Python loop doing the same work.

The input is the canonical table of an N-row benchmark file (prepared once, before the clock). The
Arrow side is what `publish` runs for these configs: `trainer_formats.messages_chunk`,
`trainer_formats.sharegpt_chunk` and `trainer_gaps.chunk_gaps`, on chunks of `--chunk` rows (as a
streaming publisher calls them). The Python side walks the decoded rows, builds the same
`messages` rows (weight and loss per message) and `sharegpt` rows (one per marked turn, tool
results merged) as dicts, checks alternation per row, and hands the rows to `Dataset.from_list`
with the same built-in features. Both outputs are checked equal on a sample first; then the two
alternate round by round and the report is the median of each and their ratio.

    python benchmarks/bench_trainer_formats.py --rows 20000 --repeat 3
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


def arrow_side(canonical: Any, chunk: int) -> tuple[Any, Any, Any]:
    import pyarrow as pa

    from whileai_datasets.hub import trainer_formats, trainer_gaps

    messages, sharegpt, gaps = [], [], []
    for start in range(0, canonical.num_rows, chunk):
        part = canonical.slice(start, chunk)
        messages.append(trainer_formats.messages_chunk(part, "bench"))
        sharegpt.append(trainer_formats.sharegpt_chunk(part, "bench"))
        gaps.append(trainer_gaps.chunk_gaps(part, "bench", offset=start))
    return pa.concat_tables(messages), pa.concat_tables(sharegpt), trainer_gaps.merge_gaps(gaps)


def _value(message: dict[str, Any]) -> str:
    calls = [{"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
             for c in message.get("tool_calls") or []]
    if not calls:
        return message.get("content") or ""
    payload = json.dumps(calls[0] if len(calls) == 1 else calls)
    return f"{message['content']}<tool_call>{payload}</tool_call>" if message.get("content") else payload


def _trl(message: dict[str, Any], flag: int) -> dict[str, Any]:
    out = {k: v for k, v in message.items() if k != "tool_calls"}
    if message.get("tool_calls"):
        out["tool_calls"] = [{**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
                             for c in message["tool_calls"]]
    return {**out, "weight": flag, "loss": bool(flag)}


def _sharegpt(row: dict[str, Any], tools: str) -> tuple[list[dict[str, Any]], int]:
    messages, mask = row["messages"], row["loss_mask"]
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    offset = 1 if messages and messages[0]["role"] == "system" else 0
    turns: list[dict[str, str]] = []
    ends, rows, broken = [], [], 0
    for index, message in enumerate(messages[offset:], start=offset):
        tag = {"user": "human", "tool": "observation"}.get(message["role"]) or (
            "function_call" if message.get("tool_calls") else "gpt")
        if tag == "observation" and turns and turns[-1]["from"] == "observation":
            turns[-1] = {"from": tag, "value": turns[-1]["value"] + "\n</tool_response>\n<tool_response>\n"
                         + message["content"]}
        else:
            turns.append({"from": tag, "value": _value(message)})
        ends.append(len(turns))
        if mask[index]:
            rows.append({"conversations": list(turns), "system": system, "tools": tools})
            sides = [t["from"] in ("gpt", "function_call") for t in turns]
            broken += any(side != (j % 2 == 1) for j, side in enumerate(sides))
    return rows, broken


def python_side(ds: Any, messages_features: Any, sharegpt_features: Any) -> tuple[Any, Any, int]:
    from datasets import Dataset

    messages_rows, sharegpt_rows, broken = [], [], 0
    for row in ds:
        mask = row["loss_mask"]
        tools = json.dumps(row["tools"]) if row.get("tools") else ""
        if any(mask):
            carried = {k: v for k, v in row.items() if k in messages_features and k != "messages"}
            if row.get("prompt"):
                carried["prompt_text"] = row["prompt"]
            carried["schema_version"] = "1"
            messages_rows.append({**carried, "messages": [_trl(m, f) for m, f in zip(row["messages"], mask)]})
        rows, bad = _sharegpt(row, tools)
        sharegpt_rows += rows
        broken += bad
    return (Dataset.from_list(messages_rows, features=messages_features),
            Dataset.from_list(sharegpt_rows, features=sharegpt_features), broken)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--chunk", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import datasets
    from datasets import Features

    from whileai_datasets.columnar._portable import portable_features
    from whileai_datasets.hub import configs

    with tempfile.TemporaryDirectory() as cache:
        ds = load_benchmark_rows(args.rows, cache)
        canonical = configs.canonical_table(ds, "bench")
        messages, sharegpt, gaps = arrow_side(canonical, args.chunk)
        features = Features(portable_features(messages.schema)), Features(portable_features(sharegpt.schema))
        python_messages, python_sharegpt, broken = python_side(ds, *features)
        assert (python_messages.num_rows, python_sharegpt.num_rows) == (messages.num_rows, sharegpt.num_rows)
        lf = gaps["llama-factory"]
        assert broken == lf["consecutive_assistant_turns"]["rows"] + lf["broken_alternation"]["rows"]
        for arrow_table, python_rows in ((messages, python_messages), (sharegpt, python_sharegpt)):
            arrow_rows = datasets.Dataset(datasets.table.InMemoryTable(arrow_table))
            sample = range(0, arrow_rows.num_rows, max(1, arrow_rows.num_rows // 50))
            assert [arrow_rows[i] for i in sample] == [python_rows[i] for i in sample], "the two sides differ"

        times: dict[str, list[float]] = {"arrow": [], "python": []}
        for _ in range(args.repeat):
            start = time.perf_counter()
            arrow_side(canonical, args.chunk)
            times["arrow"].append(time.perf_counter() - start)
            start = time.perf_counter()
            python_side(ds, *features)
            times["python"].append(time.perf_counter() - start)
    arrow, python = statistics.median(times["arrow"]), statistics.median(times["python"])
    print(f"{ds.num_rows} canonical rows -> {messages.num_rows} messages rows, {sharegpt.num_rows} sharegpt rows; "
          f"chunks of {args.chunk}, median of {args.repeat}")
    print(f"  arrow (per chunk)  {arrow:7.2f} s")
    print(f"  python per row     {python:7.2f} s   ({python / arrow:.1f}x the Arrow time)")


if __name__ == "__main__":
    main()
