"""Long sessions: ``truncation="whole_turns"`` keeps the longest prefix that ends on a complete trained turn
where today's cut at ``max_length`` can end inside one, and ``"split_turns"`` splits a row into several at its
user turns, each carrying the system prompt and tools; the audit counts what each keeps and loses, and equals
what SFTTrainer trains from the tokenized rows."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import write_jsonl
from tests.support.tiny_lm import tiny_causal_lm, train_tokenizer
from whileai_datasets import ChatTemplate, audit
from whileai_datasets.errors import OptionError
from whileai_datasets.tokenize.token_masks import tokenize

pytestmark = [pytest.mark.filterwarnings("ignore:`gradient_checkpointing` is deprecated:FutureWarning")]

DATA = Path(__file__).resolve().parents[1] / "data" / "sessions"
SESSION = DATA / "codex.jsonl"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, int]:
    import datasets

    tokenizer = train_tokenizer([SESSION.read_text()] * 3, chat_template=ChatTemplate.shipped("qwen3").text,
                                vocab_size=500)
    ds = datasets.load_dataset("whileai/export", data_files=str(SESSION), split="train",
                               cache_dir=str(tmp_path_factory.mktemp("cache")))
    whole = ds.map(tokenize(tokenizer), batched=True)
    mask = np.asarray(whole["assistant_masks"][0], bool)
    starts = np.flatnonzero(mask & ~np.insert(mask[:-1], 0, False))
    limit = int(starts[-1]) + 3  # a few tokens into the last trained turn: a cut inside it
    assert mask[limit - 1] and limit < len(mask)
    return tokenizer, ds, limit


def test_whole_turns_ends_the_row_on_a_complete_turn_where_the_cut_ends_inside_one(setup: tuple[Any, Any, int]) -> None:
    tokenizer, ds, limit = setup
    cut = ds.map(tokenize(tokenizer, max_length=limit), batched=True)
    whole = ds.map(tokenize(tokenizer, max_length=limit, truncation="whole_turns"), batched=True)
    cut_mask, whole_mask = cut["assistant_masks"][0], whole["assistant_masks"][0]
    assert len(cut_mask) == limit and cut_mask[-1] == 1  # today's cut: a turn trained half written
    assert len(whole_mask) < limit and whole_mask[-1] == 1 and whole_mask == cut_mask[: len(whole_mask)]
    assert whole["tokens_truncated"][0] == cut["tokens_truncated"][0] + limit - len(whole_mask)
    assert whole["supervised_tokens_truncated"][0] > cut["supervised_tokens_truncated"][0]


@pytest.mark.parametrize("truncation", ["cut", "whole_turns", "split_turns"])
def test_the_audit_counts_what_each_policy_keeps_and_sft_trainer_trains_it(
        truncation: str, setup: tuple[Any, Any, int], tmp_path: Path) -> None:
    from trl import SFTConfig, SFTTrainer

    tokenizer, ds, limit = setup
    tokenized = ds.map(tokenize(tokenizer, max_length=limit, truncation=truncation), batched=True)
    found = audit(ds, tokenizer=tokenizer, max_length=limit, truncation=truncation)
    assert found.supervised_tokens == sum(map(sum, tokenized["assistant_masks"]))
    lost = found.to_dict()["findings"]["supervision_truncated"]["amount"]
    assert lost == sum(tokenized["supervised_tokens_truncated"])
    assert found.options["truncation"] == truncation if truncation != "cut" else "truncation" not in found.options
    args = SFTConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, report_to=[],
                     use_cpu=True, save_strategy="no", max_length=limit, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        trainer = SFTTrainer(model=tiny_causal_lm(len(tokenizer)), args=args, processing_class=tokenizer,
                             train_dataset=tokenized.select_columns(["input_ids", "attention_mask", "assistant_masks"]))
    labelled = sum(int((batch["labels"] != -100).sum()) for batch in trainer.get_train_dataloader())
    assert labelled == found.supervised_tokens > 0


def test_an_unknown_truncation_is_refused() -> None:
    with pytest.raises(OptionError, match="truncation"):
        audit(str(SESSION), truncation="turns")


SYSTEM = "You are a careful coding agent working in the repository."
TOOLS = [{"type": "function", "function": {"name": "run_shell", "description": "Run a shell command",
                                           "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}},
                                                          "required": ["cmd"]}}}]


def _long_session(turns: int) -> dict[str, Any]:
    """One conversation of `turns` user requests, each answered after one shell call."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for n in range(turns):
        messages += [
            {"role": "user", "content": f"request {n}: list the files under src/part{n} and say which is largest"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{n}", "type": "function", "function": {
                "name": "run_shell", "arguments": json.dumps({"cmd": f"ls -S src/part{n}"})}}]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": f"big_{n}.py\nsmall_{n}.py"},
            {"role": "assistant", "content": f"The largest file under src/part{n} is big_{n}.py."}]
    return {"messages": messages, "tools": TOOLS}


def test_split_turns_makes_rows_that_each_carry_the_system_prompt_and_tools(tmp_path: Path) -> None:
    import datasets

    path = write_jsonl(tmp_path / "long.jsonl", [_long_session(6), _long_session(1)])
    tokenizer = train_tokenizer([path.read_text()] * 3, chat_template=ChatTemplate.shipped("qwen3").text,
                                vocab_size=500)
    ds = datasets.load_dataset("whileai/export", data_files=str(path), split="train", cache_dir=str(tmp_path / "c"))
    whole = ds.map(tokenize(tokenizer), batched=True)
    limit = len(whole["input_ids"][0]) // 2
    assert len(whole["input_ids"][1]) <= limit  # the short row stays one row
    split = ds.map(tokenize(tokenizer, max_length=limit, truncation="split_turns"), batched=True)
    kept = ds.map(tokenize(tokenizer, max_length=limit, truncation="whole_turns"), batched=True)
    assert split.num_rows > 3
    texts = [tokenizer.decode(ids) for ids in split["input_ids"]]
    assert all(SYSTEM in text and "run_shell" in text for text in texts)
    assert all(len(ids) <= limit for ids in split["input_ids"])
    answers = [f"is big_{n}.py." for n in range(6)]
    assert [sum(answer in text for text in texts[:-1]) for answer in answers] == [1] * 6  # each turn in one piece
    assert sum(split["supervised_tokens_truncated"]) == 0 < sum(kept["supervised_tokens_truncated"])
    assert sum(map(sum, split["assistant_masks"])) > sum(map(sum, kept["assistant_masks"]))
    found = audit(ds, tokenizer=tokenizer, max_length=limit, truncation="split_turns")
    assert found.supervised_tokens == sum(map(sum, split["assistant_masks"]))
    findings = found.to_dict()["findings"]
    assert findings["supervision_truncated"]["amount"] == 0
    assert (findings["split_into_rows"]["rows"], findings["split_into_rows"]["amount"]) == (1, split.num_rows - 1)
    assert audit(ds, tokenizer=tokenizer, max_length=limit).to_dict()["findings"]["split_into_rows"]["rows"] == 0
