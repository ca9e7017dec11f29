"""End to end with real TRL: the tokens our mask marks are the tokens SFTTrainer trains.

A tokenizer trained here, given trl's Qwen2.5 chat template (which has no
generation block), and a randomly initialised one-layer causal LM built from a
config: no download. The naive route (whileai's format="trl" messages rows and
a default SFTTrainer) is measured beside it, and its ratio printed.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SYSTEM_PROMPT, TOOLS, read_jsonl, seeded_rows, write_jsonl
from tests.support.tiny_lm import tiny_causal_lm, train_tokenizer, trl_template
from whileai_datasets import ChatTemplate, audit
from whileai_datasets.tokenize import mask_report
from whileai_datasets.tokenize.token_masks import BadMaskRowsWarning, tokenize

pytestmark = [
    pytest.mark.slow,
    # trl 1.16's SFTConfig sets a deprecated transformers alias itself
    pytest.mark.filterwarnings("ignore:`gradient_checkpointing` is deprecated:FutureWarning"),
]


def _labelled_tokens(trainer: Any) -> int:
    """Labels != -100 over one pass of the trainer's own collated batches."""
    total = 0
    for batch in trainer.get_train_dataloader():
        total += int((batch["labels"] != -100).sum())
    return total


def _trainer(model: Any, tokenizer: Any, dataset: Any, out: Path) -> Any:
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(
        output_dir=str(out), max_steps=3, per_device_train_batch_size=4, learning_rate=1e-3,
        report_to=[], use_cpu=True, logging_steps=1, save_strategy="no", max_length=None, seed=0,
        dataloader_drop_last=False,
    )
    return SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)


def test_sft_trainer_trains_exactly_the_tokens_our_mask_marks(tmp_path: Path, load: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import datasets
    from whileai.simulations import export_dataset

    rows = seeded_rows(seed=7, mode="rl", repeats=3, budget=24)
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    tokenizer = train_tokenizer([json.dumps(r) for r in rows], chat_template=trl_template("qwen2_5"))
    # the template has no generation block of its own (a substring test would be fooled by add_generation_prompt)
    assert not ChatTemplate(tokenizer.chat_template).inspect().has_generation_block

    canonical = load(source, system_prompt=SYSTEM_PROMPT, tools=TOOLS)
    tokenized = canonical.map(tokenize(tokenizer), batched=True, remove_columns=canonical.column_names)
    ours = _trainer(tiny_causal_lm(len(tokenizer)), tokenizer, tokenized, tmp_path / "ours")
    marked = sum(sum(mask) for mask in tokenized["assistant_masks"])
    assert _labelled_tokens(ours) == marked
    result = ours.train()
    assert result.global_step == 3

    naive_file = tmp_path / "trl.jsonl"
    export_dataset(read_jsonl(source), str(naive_file), system_prompt=SYSTEM_PROMPT, tools=TOOLS, format="trl")
    # only what SFTTrainer reads: datasets 4.7's JSON loader raises KeyError on rows whose top-level
    # keys differ (whileai's metadata keys do; fixed in 4.8.0), which has nothing to do with the mask
    write_jsonl(naive_file, [{key: row[key] for key in ("messages", "tools")} for row in read_jsonl(naive_file)])
    naive_rows = datasets.load_dataset("json", data_files=str(naive_file), split="train", cache_dir=str(tmp_path / "c"))
    naive = _trainer(tiny_causal_lm(len(tokenizer)), tokenizer, naive_rows, tmp_path / "naive")
    naive_labelled = _labelled_tokens(naive)
    report = mask_report(tokenized)
    assert naive_labelled == report["tokens"]  # the naive route labels every token of the same renders
    ratio = naive_labelled / marked
    assert ratio > 1.5
    # the audit of the same file with the export's options says both figures before any training
    found = audit(str(source), tokenizer=tokenizer, system_prompt=SYSTEM_PROMPT, tools=TOOLS, format="trl")
    assert found.supervised_tokens == marked  # what SFTTrainer labels on the tokenized rows
    assert found.tokens == naive_labelled and found.naive_ratio == pytest.approx(ratio)
    assert found.trainers["trl"]["trains_tokens"] == naive_labelled
    with capsys.disabled():
        print(f"\nnaive messages route trains {naive_labelled} tokens; our mask {marked}: {ratio:.1f}x "
              f"(the audit: {found.naive_ratio:.1f}x)")


def _labelled_sequences(trainer: Any) -> list[tuple[int, ...]]:
    """Per row of the trainer's own collated batches: the token ids it computes loss on."""
    out = []
    for batch in trainer.get_train_dataloader():
        for ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist()):
            out.append(tuple(i for i, label in zip(ids, labels) if label != -100))
    return out


FALLBACK_TEMPLATES = {
    "llama3_macro_scoped": lambda: (Path(__file__).parent.parent / "chat_template" / "templates"
                                    / "llama3_macro_scoped.jinja").read_text(),
}


@pytest.mark.parametrize("name", sorted(FALLBACK_TEMPLATES))
def test_sft_trainer_labels_equal_our_mask_on_templates_that_need_the_fallback(name: str, tmp_path: Path,
                                                                                load: Any) -> None:
    rows = seeded_rows(seed=3, mode="rl", repeats=1, budget=8)
    # every rollout here calls a tool in a trained turn, which a template that renders no call cannot train
    # (refused since the drop check looks inside the turn's own render); the same asks answered without a call
    # give the per-turn fallback rows it can train
    answers = [{"messages": [{"role": "user", "content": row["prompt"]},
                             {"role": "assistant", "content": row["final_text"]}]} for row in rows]
    source = write_jsonl(tmp_path / "rows.jsonl", rows + answers)
    template = FALLBACK_TEMPLATES[name]()
    tokenizer = train_tokenizer([json.dumps(r) for r in rows], chat_template=template)
    tokenizer.bos_token = "<|endoftext|>"
    assert ChatTemplate.from_tokenizer(tokenizer).inspect().mask_method == "turns"
    canonical = load(source, system_prompt=SYSTEM_PROMPT, tools=TOOLS)
    # a template that renders no tool call (llama3_macro_scoped) cannot train a tool-call turn: such rows are
    # left out, named by that cause; the rest must train exactly what TRL labels
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", BadMaskRowsWarning)
        tokenized = canonical.map(tokenize(tokenizer, on_bad_row="skip"), batched=True,
                                  remove_columns=canonical.column_names)
    assert all("template-drops-tool-calls" in str(w.message) for w in caught if w.category is BadMaskRowsWarning)
    assert tokenized.num_rows > 0
    assert set(tokenized["mask_method"]) == {"turns"}
    ours = sorted(tuple(i for i, m in zip(ids, mask) if m)
                  for ids, mask in zip(tokenized["input_ids"], tokenized["assistant_masks"]))
    trainer = _trainer(tiny_causal_lm(len(tokenizer)), tokenizer, tokenized, tmp_path / "out")
    assert sorted(_labelled_sequences(trainer)) == ours
    assert sum(map(len, ours)) > 0
