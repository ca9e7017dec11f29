"""Notes say what trains: ``<think>`` blocks kept by the options are measured on the render.

Qwen3's template (as shipped) leaves the reasoning of turns before the last user message out of the render;
a ChatML template writes every block. The audit calls a row ``think_kept`` only where every block of its
turns is inside a trained span, and ``template_drops_reasoning`` where the template leaves one out, never
both; show-mask's notes say the same per turn; and both match the text that tokenize's masks train after
``load_dataset`` (whose labels SFTTrainer takes as they are: tests/auditing/test_one_truth.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_jsonl
from tests.support.tiny_lm import train_tokenizer
from whileai_datasets import ChatTemplate, audit
from whileai_datasets._options import TrainingOptions
from whileai_datasets.auditing.examples import row_examples
from whileai_datasets.tokenize.token_masks import tokenize

CHATML = ("{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
          "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}")


def _turns(*answers: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for k, answer in enumerate(answers):
        messages += [{"role": "user", "content": f"question number {k}"}, {"role": "assistant", "content": answer}]
    return {"messages": messages}


ROWS = [
    _turns("<think>first we look it up</think>it is one", "<think>then we add one</think>it is two"),  # history dropped
    _turns("no reasoning here", "<think>only the last reasons</think>it is three"),  # the last turn's block trains
    _turns("plain answer", "another plain answer"),  # no think block at all
]
#: source row -> (think_kept, template_drops_reasoning) per template, read off each template's source.
EXPECTED = {"qwen3": {0: (False, True), 1: (True, False), 2: (False, False)},
            "chatml": {0: (True, False), 1: (True, False), 2: (False, False)}}


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import datasets

    root = tmp_path_factory.mktemp("think")
    path = write_jsonl(root / "rows.jsonl", ROWS)
    ds = datasets.load_dataset("whileai/export", data_files=str(path), split="train", cache_dir=str(root / "cache"))
    out = {}
    for name, text in {"qwen3": ChatTemplate.shipped("qwen3").text, "chatml": CHATML}.items():
        tokenizer = train_tokenizer([json.dumps(r) for r in ROWS] * 5, chat_template=text, vocab_size=300)
        chat = ChatTemplate.from_tokenizer(tokenizer)
        tokenized = ds.map(tokenize(tokenizer, chat, keep_unsupervised=True), batched=True)
        trained = [tokenizer.decode([i for i, m in zip(ids, mask) if m])
                   for ids, mask in zip(tokenized["input_ids"], tokenized["assistant_masks"])]
        examples = row_examples(str(path), dict.fromkeys(range(len(ROWS)), "row"), tokenizer=tokenizer,
                                template=chat, options=TrainingOptions(strip_think=False))
        out[name] = {"audit": audit(str(path), tokenizer=tokenizer, template=chat, strip_think=False),
                     "trained": trained, "notes": [example.notes for example in examples]}
    return out


def _blocks(row: dict[str, Any]) -> list[str]:
    return [m["content"].split("<think>")[1].split("</think>")[0] for m in row["messages"] if "<think>" in m["content"]]


@pytest.mark.parametrize("name", ["qwen3", "chatml"])
def test_the_audit_names_a_row_think_kept_only_where_its_blocks_train(name: str, measured: dict[str, Any]) -> None:
    found = measured[name]["audit"].to_dict()["findings"]
    kept = {f["row"] for f in found["think_kept"]["first"]}
    dropped = {f["row"] for f in found["template_drops_reasoning"]["first"]}
    assert not kept & dropped
    for row, (is_kept, is_dropped) in EXPECTED[name].items():
        assert (row in kept, row in dropped) == (is_kept, is_dropped), row
        every_block_trains = bool(_blocks(ROWS[row])) and all(
            block in measured[name]["trained"][row] for block in _blocks(ROWS[row]))
        assert (row in kept) is every_block_trains  # what tokenize's masks train, read back as text


@pytest.mark.parametrize("name", ["qwen3", "chatml"])
def test_show_mask_says_kept_and_trained_only_for_turns_whose_blocks_train(
        name: str, measured: dict[str, Any]) -> None:
    for row, notes in enumerate(measured[name]["notes"]):
        said = " ".join(notes)
        blocks = _blocks(ROWS[row])
        trained = sum(block in measured[name]["trained"][row] for block in blocks)
        assert (f"{trained} turn(s) with <think> blocks kept and trained" in said) is (trained > 0), said
        lost = len(blocks) - trained
        assert (f"{lost} turn(s) with <think> blocks that do not train" in said) is (lost > 0), said
