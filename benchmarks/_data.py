"""Benchmark inputs: whileai rows from the seeded agent, replicated to N rows.

``make_export_file(path, n_rows, seed=0)`` writes realistic whileai engine rows
(the shape ``simulate()`` streams): seeded-agent rollouts graded by a rule,
some widened into multi-turn conversations (a user follow-up, a second tool
call whose result is long, a ``<think>`` block), replicated with fresh
scenario ids so groups stay small. Files are cached under benchmarks/.data/
(git-ignored) by size and seed.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent / ".data"

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "lookup_order", "description": "Look up an order",
     "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
    {"type": "function", "function": {"name": "refund_payment", "description": "Refund a payment",
     "parameters": {"type": "object", "properties": {"payment_id": {"type": "string"}, "amount": {"type": "number"}},
                    "required": ["payment_id"]}}},
]
SYSTEM_PROMPT = "You are the support agent of a small online shop. Look orders up before you answer."


def _grade(row: dict[str, Any]) -> float:
    return 1.0 if str(row.get("final_text") or "").endswith(": ok.") else 0.0


def base_rows(seed: int = 0) -> list[dict[str, Any]]:
    """A few hundred seeded-agent rollouts (sft and rl with repeats), graded."""
    import whileai as wai

    rows: list[dict[str, Any]] = []
    for offset, (mode, repeats, budget) in enumerate((("rl", 4, 160), ("sft", 1, 120))):
        agent = wai.seeded_agent(TOOLS, seed=seed + offset)
        data = wai.simulate(agent, tools=TOOLS, system_prompt=SYSTEM_PROMPT, simulator=False,
                            seed=seed + offset, mode=mode, repeats=repeats, budget=budget, on_progress=None)
        data.grade(_grade)
        rows.extend(json.loads(json.dumps(r, default=str)) for r in data.trajectories)
    return rows


def _widen(row: dict[str, Any], i: int) -> dict[str, Any]:
    """A multi-turn variant: a follow-up ask, a second call with a long result
    and a think block in the agent's text."""
    out = copy.deepcopy(row)
    steps = list(out.get("steps") or [])
    order = f"ORD-{1000 + i % 9000}"
    steps[0] = {**steps[0], "text": "<think>\nThe user asked about an order; look it up first.\n</think>\nChecking now."}
    steps.append({"user": f"Can you also check {order}? It is urgent."})
    steps.append({
        "tool": "lookup_order",
        "text": "<THINK>second lookup</think> One moment.",
        "arguments": {"order_id": order},
        "result": {"status": "ok", "data": {"order_id": order, "history": [f"event {k}: updated" for k in range(40)]}},
    })
    steps.append({"text": f"{order} is on its way."})
    out["steps"] = steps
    out.pop("messages", None)
    return out


def make_export_file(path: str | os.PathLike[str] | None, n_rows: int, seed: int = 0) -> Path:
    """Write ``n_rows`` whileai rows as JSONL (cached) and return the path."""
    target = Path(path) if path else DATA_DIR / f"export-{n_rows}-{seed}.jsonl"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    bases = base_rows(seed)
    variants = [_widen(r, i) if i % 3 == 0 else r for i, r in enumerate(bases)]
    encoded = [json.dumps(r) for r in variants]
    sids = [r.get("scenario_id") or "" for r in variants]
    tmp = target.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for i in range(n_rows):
            k = i % len(variants)
            copy_no = i // len(variants)
            line = encoded[k]
            if copy_no:
                # fresh situation ids per copy keep groups the size the run made them
                line = line.replace(f'"scenario_id": "{sids[k]}"', f'"scenario_id": "{sids[k]}-{copy_no}"', 1)
            handle.write(line + "\n")
    tmp.replace(target)
    return target


def load_benchmark_rows(n_rows: int, cache_dir: str, seed: int = 0) -> Any:
    """The canonical ``Dataset`` of the ``n_rows`` benchmark file (``make_export_file``), loaded
    through the ``whileai/export`` builder with the benchmark's system prompt and tools."""
    import datasets

    import whileai_datasets  # noqa: F401  (registers the builder)

    path = make_export_file(None, n_rows, seed)
    return datasets.load_dataset("whileai/export", data_files=str(path), split="train", cache_dir=cache_dir,
                                 system_prompt=SYSTEM_PROMPT, tools=TOOLS)


def make_unique_file(path: str | os.PathLike[str] | None, n_rows: int, seed: int = 0) -> Path:
    """``n_rows`` rows as ``make_export_file`` writes them, but every row's ask and final answer unique
    (no text repeats between rows, as in real rollouts): cached under benchmarks/.data."""
    target = Path(path) if path else DATA_DIR / f"unique-{n_rows}-{seed}.jsonl"
    if target.exists():
        return target
    source = make_export_file(None, min(n_rows, 2000), seed)
    lines = source.read_text(encoding="utf-8").splitlines()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for i in range(n_rows):
            line = lines[i % len(lines)]
            if i >= len(lines):  # fresh situation ids per copy, as make_export_file does
                line = line.replace('"scenario_id": "', f'"scenario_id": "c{i // len(lines)}-', 1)
            line = line.replace('"prompt": "', f'"prompt": "Case {i}: ', 1)
            handle.write(line.replace('"final_text": "', f'"final_text": "Case {i}: ', 1) + "\n")
    tmp.replace(target)
    return target
