"""Canonical rows whose texts are all unique: no repeated content for a cache to reuse.

Each row is a support conversation (system prompt and the two tool schemas of
``_data.py``, which every row repeats as a real export does): three rounds of
a user ask, an assistant turn with a tool call, its result and an answer.
Every text is drawn from a seeded generator of pseudo-words with a Zipf-like
spread (frequent short words, a long tail), so words repeat across rows as in
prose but no message, result or argument does. The dataset is written once
per size under benchmarks/.data/ (git-ignored) and memory-mapped from there.
"""

from __future__ import annotations

import json
import random
from typing import Any

from benchmarks._data import DATA_DIR, SYSTEM_PROMPT, TOOLS

_SYLLABLES = ["ka", "lo", "mi", "ren", "sta", "vo", "quel", "dra", "ni", "por", "tus", "ex", "an", "bri", "ce",
              "dol", "fu", "gar", "hem", "jo"]
CHUNK_ROWS = 5_000


def _vocabulary(seed: int = 7, size: int = 6_000) -> list[str]:
    rng = random.Random(seed)
    words = {"".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(size * 2)}
    return sorted(words)[:size]


_WORDS = _vocabulary()


def _sentence(rng: random.Random, words: int) -> str:
    picked = [_WORDS[min(int(rng.paretovariate(1.1)) - 1, len(_WORDS) - 1)] if rng.random() < 0.7
              else rng.choice(_WORDS) for _ in range(words)]
    return " ".join(picked).capitalize() + rng.choice([".", "?", "!"])


def unique_row(index: int, text_beside_calls: bool = True) -> dict[str, Any]:
    """Row ``index``: the same system prompt and tools as every row, every other text its own.

    ``text_beside_calls`` False: the tool-call turns carry no text (their sentence is drawn all the same, so
    every other text is the row's usual one). Llama 3.1's template writes a call alone and drops the text
    beside it, and tokenize refuses a turn whose text the template drops."""
    rng = random.Random(index)
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
    for turn in range(3):
        call_id = f"call_{index}_{turn}"
        arguments = json.dumps({"order_id": f"ORD-{index}-{turn}-{rng.randrange(10**6)}"})
        messages += [
            {"role": "user", "content": f"{_sentence(rng, 14)} {_sentence(rng, 9)}"},
            {"role": "assistant", "content": _sentence(rng, 8) if text_beside_calls else "", "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "lookup_order", "arguments": arguments}}]},
            {"role": "tool", "content": json.dumps({"status": "ok", "note": _sentence(rng, 24)}),
             "tool_call_id": call_id, "name": "lookup_order"},
            {"role": "assistant", "content": f"{_sentence(rng, 12)} {_sentence(rng, 10)}"},
        ]
    mask = [1 if m["role"] == "assistant" else 0 for m in messages]
    return {"messages": messages, "loss_mask": mask, "tools": TOOLS}


def unique_dataset(n_rows: int, text_beside_calls: bool = True) -> Any:
    """``n_rows`` unique rows as a ``datasets.Dataset`` with cache files (written once, then memory-mapped)."""
    import datasets
    import pyarrow as pa

    from benchmarks.bench_token_masks import arrow_batch

    target = DATA_DIR / (f"unique-{n_rows}" if text_beside_calls else f"unique-{n_rows}-calls-alone")
    if not (target / "dataset_info.json").exists():
        tables = [arrow_batch([unique_row(i, text_beside_calls)
                               for i in range(start, min(start + CHUNK_ROWS, n_rows))])
                  for start in range(0, n_rows, CHUNK_ROWS)]
        datasets.Dataset(pa.concat_tables(tables)).save_to_disk(str(target))
    return datasets.load_from_disk(str(target))


def corpus(n_rows: int = 300) -> list[str]:
    """Texts to train the benchmark tokenizer on (rows past any the benchmark tokenizes)."""
    return [json.dumps(unique_row(10**9 + i)) for i in range(n_rows)]

