"""A LLaMA-Factory sharegpt file (a ``.json`` array, tools as JSON text) tokenized with the loss mask
its turns were read with: the supervised tokens are the agent's turns, tool calls included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.near_miss_rows import LLAMA_FACTORY_ROWS
from tests.support.tiny_lm import train_tokenizer, trl_template
from whileai_datasets.tokenize import tokenize


def test_a_llama_factory_file_tokenizes_with_the_agent_turns_supervised(tmp_path: Path, load: Any) -> None:
    path = tmp_path / "llamafactory.json"
    path.write_text(json.dumps(LLAMA_FACTORY_ROWS, indent=2), encoding="utf-8")
    tokenizer = train_tokenizer([json.dumps(row) for row in LLAMA_FACTORY_ROWS] * 20,
                                chat_template=trl_template("qwen2_5"))
    ds = load(path)
    rows = ds.map(tokenize(tokenizer), batched=True)
    assert rows.num_rows == 3
    second = rows[1]
    supervised = "".join(tokenizer.decode([i]) for i, m in zip(second["input_ids"], second["assistant_masks"]) if m)
    context = "".join(tokenizer.decode([i]) for i, m in zip(second["input_ids"], second["assistant_masks"]) if not m)
    for said in ("Order 1 is open and p2 is refunded.", "Order 3 does not exist.", "refund_payment", "p2"):
        assert said in supervised
    for heard in ("Look up 1 and refund p2.", "not found", '{"refunded": true}'):
        assert heard in context and heard not in supervised
    assert '"lookup_order"' in context  # the tools (JSON text in the file) are rendered in the system turn
