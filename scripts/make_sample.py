"""Regenerate the bundled sample (whileai_datasets/data/sample.jsonl.gz).

Runs whileai's seeded demo agent offline (no key, no model), grades it with a
rule, and writes the rows the engine streams, plus the tool schemas and the
system prompt the run used. Deterministic: the same whileai version gives the
same bytes.

    python scripts/make_sample.py
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import whileai as wai

DATA = Path(__file__).resolve().parent.parent / "whileai_datasets" / "data"

SYSTEM_PROMPT = (
    "You are the support agent of a small online shop. Look orders up before you answer, "
    "never refund without a payment id, and say so when a tool fails."
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Look up an order by its id.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "refund_payment",
            "description": "Refund a payment, fully or in part.",
            "parameters": {
                "type": "object",
                "properties": {"payment_id": {"type": "string"}, "amount": {"type": "number"}},
                "required": ["payment_id"],
            },
        },
    },
]


def passed(row: dict) -> float:
    """A rule grade: the agent reported what the tool said, and the tool worked."""
    text = str(row.get("final_text") or "")
    return 1.0 if text.endswith(": ok.") or "went through" in text and not row.get("faults") else 0.0


def main() -> None:
    rows: list[dict] = []
    for seed, mode, repeats, budget in ((0, "rl", 4, 48), (1, "sft", 1, 24)):
        agent = wai.seeded_agent(TOOLS, seed=seed)
        data = wai.simulate(
            agent, tools=TOOLS, system_prompt=SYSTEM_PROMPT, simulator=False, seed=seed,
            mode=mode, repeats=repeats, budget=budget,
        )
        data.grade(passed)
        rows.extend(data.trajectories)
    DATA.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(DATA / "sample.jsonl.gz", "wb", mtime=0) as out:
        for row in rows:
            out.write((json.dumps(row, default=str) + "\n").encode("utf-8"))
    meta = {"system_prompt": SYSTEM_PROMPT, "tools": TOOLS, "whileai": wai.__version__ if hasattr(wai, "__version__") else None}
    (DATA / "sample_meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {len(rows)} rows to {DATA / 'sample.jsonl.gz'}")


if __name__ == "__main__":
    main()
