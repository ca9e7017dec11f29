"""The main job on the bundled sample: load it through the builder, say what
was loaded, write Parquet."""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from functools import partial
from importlib.resources import as_file, files
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datasets import Dataset, load_dataset

from whileai_datasets import _files
from whileai_datasets.columnar._portable import portable_table

SAMPLE = "sample.jsonl.gz"
SAMPLE_META = "sample_meta.json"


def sample_meta() -> dict[str, Any]:
    """The system prompt and tool schemas the bundled sample was run with."""
    meta: dict[str, Any] = json.loads((files("whileai_datasets.data") / SAMPLE_META).read_text(encoding="utf-8"))
    return meta


def load_sample(cache_dir: str | None = None) -> Dataset:
    """The bundled sample through ``load_dataset("whileai/export")``."""
    meta = sample_meta()
    with as_file(files("whileai_datasets.data") / SAMPLE) as path:
        ds = load_dataset(
            "whileai/export",
            data_files=str(path),
            split="train",
            system_prompt=meta["system_prompt"],
            tools=meta["tools"],
            cache_dir=cache_dir,
        )
    assert isinstance(ds, Dataset)
    return ds


def summarize(ds: Dataset) -> dict[str, Any]:
    """Rows, tools, turns per role, loss-carrying turns and rewards, from Arrow columns."""
    table = ds.with_format("arrow")[:]
    flat = pc.list_flatten(table["messages"])
    roles = Counter(pc.struct_field(flat, "role").to_pylist())
    mask = pc.list_flatten(table["loss_mask"])
    rewards = table["reward"]
    schemas = pc.unique(table["tools"].drop_null().cast(pa.string())).to_pylist()
    names = sorted({tool["function"]["name"] for text in schemas for tool in json.loads(text)})
    return {
        "rows": len(ds),
        "tools": names,
        "messages": int(len(flat)),
        "turns": dict(sorted(roles.items())),
        "loss_turns": int(pc.sum(mask).as_py() or 0),
        "rewards": {
            "graded": int(len(rewards) - rewards.null_count),
            "pass": int(pc.sum(pc.greater_equal(rewards, 0.5)).as_py() or 0),
            "mean": pc.mean(rewards).as_py(),
        },
        "scenarios": int(pc.count_distinct(table["scenario_id"]).as_py()),
    }


def run_demo(out: str, *, cache_dir: str | None = None) -> dict[str, Any]:
    """Load the sample, summarize it, write ``out`` as Parquet; return the summary."""
    ds = load_sample(cache_dir=cache_dir)
    summary = summarize(ds)
    table = portable_table(ds.with_format("arrow")[:])
    # built-in feature types only (messages as Json): the file loads where this package is not installed
    _files.replace_with(out, partial(pq.write_table, table))
    summary["parquet"] = os.path.abspath(out)
    summary["parquet_bytes"] = os.path.getsize(out)
    return summary


def render(summary: dict[str, Any]) -> str:
    """The summary as a readable report."""
    rewards = summary["rewards"]
    mean = "n/a" if rewards["mean"] is None else f"{rewards['mean']:.3f}"
    turns = ", ".join(f"{role} {n}" for role, n in summary["turns"].items())
    lines = [
        "whileai-datasets demo: the bundled sample through load_dataset('whileai/export')",
        f"  rows        {summary['rows']} ({summary['scenarios']} scenarios)",
        f"  tools       {', '.join(summary['tools']) or 'none'}",
        f"  messages    {summary['messages']} ({turns})",
        f"  loss turns  {summary['loss_turns']} assistant turns carry loss",
        f"  rewards     {rewards['graded']} graded, {rewards['pass']} pass, mean {mean}",
        f"  parquet     {summary['parquet']} ({summary['parquet_bytes']:,} bytes)",
    ]
    return "\n".join(lines)


def sample_rows() -> list[dict[str, Any]]:
    """The bundled sample's raw rows (for tests and examples)."""
    with (files("whileai_datasets.data") / SAMPLE).open("rb") as handle, gzip.open(handle) as lines:
        return [json.loads(line) for line in lines if line.strip()]
