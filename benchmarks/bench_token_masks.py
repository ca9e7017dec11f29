"""Token masks: one render + one tokenization per row vs the prefix-diff method.

Conversations with 2, 8 and 32 assistant turns (user asks, tool calls and
results, answers), the same trained tokenizer and trl's Qwen2.5 template
(patched once for ours). Both methods run on the same rows in one process,
interleaved; tokens/s and the ratio are printed.

    python benchmarks/bench_token_masks.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.prefix_diff import prefix_diff_mask  # noqa: E402
from tests.tiny_lm import train_tokenizer, trl_template  # noqa: E402
from whileai_datasets.chat_template import ChatTemplate  # noqa: E402
from whileai_datasets.transforms.token_masks import Tokenize, template_messages  # noqa: E402


def conversation(turns: int, seed: int) -> dict[str, Any]:
    """A canonical row with ``turns`` assistant turns: each answers a user ask,
    every third with a tool call (and its result) instead of text."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful support agent."}]
    for t in range(turns):
        messages.append({"role": "user", "content": f"Question {t} about order ORD-{seed * 100 + t}, please check."})
        if t % 3 == 0:
            call_id = f"call_{t:04d}"
            call = {"id": call_id, "type": "function",
                    "function": {"name": "lookup_order", "arguments": json.dumps({"order_id": f"ORD-{t}"})}}
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            messages.append({"role": "tool", "content": json.dumps({"status": "ok", "eta": t}), "name": "lookup_order",
                             "tool_call_id": call_id})
        else:
            messages.append({"role": "assistant", "content": f"Order ORD-{t} ships in {t % 5 + 1} days."})
    mask = [1 if m["role"] == "assistant" else 0 for m in messages]
    return {"messages": messages, "loss_mask": mask, "tools": None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=40, help="conversations per size")
    parser.add_argument("--turns", default="2,8,32")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [int(x) for x in args.turns.split(",")]
    corpus = [json.dumps(conversation(8, s)) for s in range(50)]
    tokenizer = train_tokenizer(corpus, chat_template=trl_template("qwen2_5"))
    transform = Tokenize(tokenizer)
    patched = ChatTemplate(trl_template("qwen2_5")).with_generation().text
    results = []
    for turns in sizes:
        rows = [conversation(turns, s) for s in range(args.rows)]
        msgs = [r["messages"] for r in rows]
        masks = [r["loss_mask"] for r in rows]
        ours_s, diff_s = [], []
        tokens = 0
        for _ in range(args.repeat):
            start = time.perf_counter()
            out = transform.rows(msgs, [None] * len(rows), masks)
            ours_s.append(time.perf_counter() - start)
            tokens = sum(len(r.input_ids) for r in out)
            start = time.perf_counter()
            for m, k in zip(msgs, masks):
                prefix_diff_mask(tokenizer, patched, template_messages(m), k)
            diff_s.append(time.perf_counter() - start)
        ours, diff = statistics.median(ours_s), statistics.median(diff_s)
        results.append({"assistant_turns": turns, "rows": args.rows, "tokens": tokens,
                        "ours_tokens_per_s": tokens / ours, "prefix_diff_tokens_per_s": tokens / diff,
                        "speedup": diff / ours})
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"token masks, {args.rows} conversations per size, median of {args.repeat}")
    print(f"  {'assistant turns':>15} {'tokens':>8} {'ours tok/s':>12} {'prefix-diff tok/s':>18} {'speedup':>8}")
    for r in results:
        print(f"  {r['assistant_turns']:>15} {r['tokens']:>8} {r['ours_tokens_per_s']:>12,.0f} "
              f"{r['prefix_diff_tokens_per_s']:>18,.0f} {r['speedup']:>7.1f}x")


if __name__ == "__main__":
    main()
