"""The training machine's side of a published repo: plain datasets and TRL, no whileai_datasets.

Each test publishes canonical rows to the local hub, then, in a client process where
`import whileai_datasets` fails (a module of that name that raises is first on sys.path), loads
every config by name, checks every feature type is built into `datasets`, and runs TRL 1.16's own
trainers with default settings on a tiny model built from a config, with a tokenizer trained in
the test and trl's qwen2_5 chat template (no generation block). What TRL labels is compared, by
text and by count, with what this package's own `tokenize` marks on the canonical rows.

Functions without a `test_` prefix run in a client process (see conftest: `Identity.run`); this
module imports nothing from whileai_datasets at its top level, so those processes can load it.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.hub.conftest import BLOCKED_IMPORT, blocked_import, not_built_in

pytestmark = pytest.mark.slow

#: Warnings TRL 1.16 / transformers 5.24 raise on their own default path (the child turns warnings into errors).
TRAINER_WARNINGS = (
    ("ignore", "`gradient_checkpointing` is deprecated", FutureWarning),
    ("ignore", "`is_gradient_checkpointing` is deprecated", FutureWarning),
    ("ignore", "`gradient_checkpointing_(en|dis)able` is deprecated", FutureWarning),
)


# --- client side: the publishing machine ------------------------------------------------------------
def publish_saved(path: str, repo_id: str, token: str, tokenizer_dir: str | None = None,
                  preference: str | None = None) -> dict[str, Any]:
    from datasets import load_from_disk
    from transformers import AutoTokenizer

    from whileai_datasets.hub import publish

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir) if tokenizer_dir else None
    pairs = load_from_disk(preference) if preference else None
    return dict(publish(load_from_disk(path), repo_id, token=token, tokenizer=tokenizer, preference=pairs,
                        split_key="scenario_id"))


# --- client side: the training machine --------------------------------------------------------------
def _quiet() -> Any:
    context = warnings.catch_warnings()
    context.__enter__()
    for action, message, category in TRAINER_WARNINGS:
        warnings.filterwarnings(action, message=message, category=category)
    return context


def load_every_config(repo_id: str, token: str) -> dict[str, Any]:
    from datasets import get_dataset_config_names, load_dataset

    blocked = blocked_import()
    names = get_dataset_config_names(repo_id, token=token)
    configs = {}
    for name in names:
        loaded = load_dataset(repo_id, name, token=token)
        configs[name] = {"splits": {s: d.num_rows for s, d in loaded.items()},
                         "features": {s: repr(d.features) for s, d in loaded.items()},
                         "not_built_in": sorted({t for d in loaded.values() for t in not_built_in(d.features)})}
        if name == "tokenized":
            configs[name]["assistant_masks"] = sum(sum(m) for m in loaded["train"]["assistant_masks"])
    return {"blocked": blocked, "configs": configs}


def card_text(repo_id: str, token: str) -> str:
    from huggingface_hub import DatasetCard, hf_hub_download

    return str(DatasetCard.load(hf_hub_download(repo_id, "README.md", repo_type="dataset", token=token)).text)


def _runs(ids: list[int], flags: list[bool], tokenizer: Any) -> list[str]:
    """The decoded text of each run of consecutive flagged tokens."""
    runs: list[str] = []
    current: list[int] = []
    for token, flag in zip(ids, flags):
        if flag:
            current.append(token)
        elif current:
            runs.append(tokenizer.decode(current))
            current = []
    if current:
        runs.append(tokenizer.decode(current))
    return runs


def sft_labels(repo_id: str, token: str, tokenizer_dir: str, out: str, config: str | None = None) -> dict[str, Any]:
    """SFTTrainer, default settings, on a config (the default one when None): every labelled run's text, the count."""
    from datasets import load_dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from tests.tiny_lm import tiny_causal_lm

    blocked = blocked_import()
    context = _quiet()
    try:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        train = load_dataset(repo_id, config, split="train", token=token)
        args = SFTConfig(output_dir=out, max_steps=1, report_to=[], use_cpu=True, save_strategy="no")
        trainer = SFTTrainer(model=tiny_causal_lm(len(tokenizer)), args=args, train_dataset=train,
                             processing_class=tokenizer)
        runs: list[str] = []
        labelled = 0
        for batch in trainer.get_train_dataloader():
            for ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist()):
                flags = [label != -100 for label in labels]
                labelled += sum(flags)
                runs += _runs(ids, flags, tokenizer)
        steps = trainer.train().global_step
    finally:
        context.__exit__(None, None, None)
    return {"blocked": blocked, "rows": train.num_rows, "labelled": labelled, "runs": runs, "steps": steps,
            "columns": train.column_names}


def dpo_masks(repo_id: str, token: str, tokenizer_dir: str, out: str) -> dict[str, Any]:
    """DPOTrainer, default settings, on the preference config: what its completion mask covers."""
    from datasets import load_dataset
    from transformers import AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    from tests.tiny_lm import tiny_causal_lm

    blocked = blocked_import()
    context = _quiet()
    try:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        pairs = load_dataset(repo_id, "preference", split="train", token=token)
        args = DPOConfig(output_dir=out, max_steps=1, report_to=[], use_cpu=True, save_strategy="no")
        # a model object has no path to load the reference model from: hand TRL the same initial weights
        trainer = DPOTrainer(model=tiny_causal_lm(len(tokenizer)), ref_model=tiny_causal_lm(len(tokenizer)),
                             args=args, train_dataset=pairs, processing_class=tokenizer)
        sides: list[dict[str, Any]] = []
        for batch in trainer.get_train_dataloader():
            ids, masks = batch["input_ids"].tolist(), batch["completion_mask"].tolist()
            attention = batch["attention_mask"].tolist()
            half = len(ids) // 2
            for i, (row, mask) in enumerate(zip(ids, masks)):
                first = next(j for j, a in enumerate(attention[i]) if a)  # left padding, if any
                sides.append({"side": "chosen" if i < half else "rejected", "runs": _runs(row, mask, tokenizer),
                              "count": sum(mask), "prompt_masked": mask[first] == 0})
        steps = trainer.train().global_step
    finally:
        context.__exit__(None, None, None)
    return {"blocked": blocked, "rows": list(pairs), "sides": sides, "steps": steps}  # rows decode Json on 4.x too


# --- the test machine: our own mask -------------------------------------------------------------------
def _tokenizer(rows: list[dict[str, Any]], folder: Path) -> Any:
    from tests.tiny_lm import train_tokenizer, trl_template
    from whileai_datasets import ChatTemplate

    tokenizer = train_tokenizer([json.dumps(r) for r in rows], chat_template=trl_template("qwen2_5"))
    assert not ChatTemplate(tokenizer.chat_template).inspect().has_generation_block
    tokenizer.save_pretrained(str(folder))
    return tokenizer


def _our_runs(canonical: Any, tokenizer: Any) -> tuple[list[str], int]:
    """What this package's `tokenize` marks on canonical rows: the text of each marked run, and the count."""
    from whileai_datasets import transforms as wai_transforms

    tokenized = canonical.map(wai_transforms.tokenize(tokenizer), batched=True, remove_columns=canonical.column_names)
    runs: list[str] = []
    for ids, mask in zip(tokenized["input_ids"], tokenized["assistant_masks"]):
        runs += _runs(ids, [bool(m) for m in mask], tokenizer)
    return runs, sum(sum(m) for m in tokenized["assistant_masks"])


def _canonical(tmp_path: Path, load: Any, mode: str) -> tuple[list[dict[str, Any]], Any]:
    from tests.conftest import SYSTEM_PROMPT, TOOLS, seeded_rows, write_jsonl
    from whileai_datasets import transforms as wai_transforms

    rows = seeded_rows(seed=7, mode="rl", repeats=1, budget=24)
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    mask_mode = "final" if mode == "final" else "assistant"
    canonical = load(source, system_prompt=SYSTEM_PROMPT, tools=TOOLS, mask_mode=mask_mode)
    if mode == "unroll":
        canonical = canonical.with_format("arrow").map(wai_transforms.unroll, batched=True).with_format(None)
    return rows, canonical


def _assert_plain_configs(loaded: dict[str, Any], expected: set[str]) -> None:
    assert loaded["blocked"] == BLOCKED_IMPORT
    assert set(loaded["configs"]) == expected
    for name, config in loaded["configs"].items():
        assert config["not_built_in"] == [], name
        assert "Whileai" not in json.dumps(config["features"]), name


# --- tests ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["assistant", "final", "unroll"])
def test_sft_trainer_on_the_default_config_trains_exactly_the_marked_turns(alice, repo_id, tmp_path, load, mode):
    rows, canonical = _canonical(tmp_path, load, mode)
    tokenizer = _tokenizer(rows, tmp_path / "tokenizer")
    canonical.save_to_disk(str(tmp_path / "canonical"))
    extra = {"tokenizer_dir": str(tmp_path / "tokenizer")} if mode == "assistant" else {}
    alice.run(publish_saved, path=str(tmp_path / "canonical"), repo_id=repo_id, token=alice.token, **extra)

    trainer_machine = alice.on_a_training_machine()
    loaded = trainer_machine.run(load_every_config, repo_id=repo_id, token=alice.token)
    trained = trainer_machine.run(sft_labels, repo_id=repo_id, token=alice.token,
                                  tokenizer_dir=str(tmp_path / "tokenizer"), out=str(tmp_path / "sft"))

    ours, marked = _our_runs(canonical, tokenizer)
    marked_turns = sum(sum(m) for m in canonical["loss_mask"])
    published = {"default", "canonical", "messages", "sharegpt"}
    _assert_plain_configs(loaded, published | ({"tokenized"} if extra else set()))
    assert trained["blocked"] == BLOCKED_IMPORT
    assert "messages" not in trained["columns"] and {"prompt", "completion"} <= set(trained["columns"])
    assert trained["rows"] == marked_turns  # one row per loss-carrying turn
    assert trained["labelled"] == marked
    assert Counter(trained["runs"]) == Counter(ours)  # the same turns' text, each once
    assert len(trained["runs"]) == marked_turns
    assert all(run.endswith("<|im_end|>\n") for run in trained["runs"])
    assert trained["steps"] == 1
    if mode == "final":
        assert trained["rows"] == len(canonical)
    if extra:  # the card's token counts, measured at publish time, are what TRL labelled
        card = trainer_machine.run(card_text, repo_id=repo_id, token=alice.token)
        pre = trainer_machine.run(sft_labels, repo_id=repo_id, token=alice.token, config="tokenized",
                                  tokenizer_dir=str(tmp_path / "tokenizer"), out=str(tmp_path / "sft-tokenized"))
        assert (pre["labelled"], Counter(pre["runs"])) == (marked, Counter(ours))
        assert loaded["configs"]["tokenized"]["assistant_masks"] == marked
        assert f"the completion mask covers {trained['labelled']} of " in card
        assert f"covers {marked} tokens against {marked} marked here: the same count" in card


def test_dpo_trainer_on_the_preference_config_masks_the_prompt_and_trains_one_turn_a_side(alice, repo_id,
                                                                                          tmp_path, load):
    from whileai.simulations.score.judging import build_preference_pairs

    from tests.conftest import SYSTEM_PROMPT, TOOLS, seeded_rows, write_jsonl

    rows = seeded_rows(seed=1, mode="rl", repeats=4, budget=40)
    pairs, _ = build_preference_pairs(rows)
    preference = load(write_jsonl(tmp_path / "pairs.jsonl", pairs), "preference", system_prompt=SYSTEM_PROMPT,
                      tools=TOOLS)
    _, canonical = _canonical(tmp_path, load, "final")
    tokenizer = _tokenizer(rows, tmp_path / "tokenizer")
    canonical.save_to_disk(str(tmp_path / "canonical"))
    preference.save_to_disk(str(tmp_path / "preference"))
    alice.run(publish_saved, path=str(tmp_path / "canonical"), repo_id=repo_id, token=alice.token,
              preference=str(tmp_path / "preference"))

    trainer_machine = alice.on_a_training_machine()
    loaded = trainer_machine.run(load_every_config, repo_id=repo_id, token=alice.token)
    trained = trainer_machine.run(dpo_masks, repo_id=repo_id, token=alice.token,
                                  tokenizer_dir=str(tmp_path / "tokenizer"), out=str(tmp_path / "dpo"))

    _assert_plain_configs(loaded, {"default", "canonical", "messages", "sharegpt", "preference"})
    published = trained["rows"]
    assert all(len(r["chosen"]) == 1 and len(r["rejected"]) == 1 for r in published)
    assert all(r["chosen"][0]["role"] == "assistant" == r["rejected"][0]["role"] for r in published)
    assert all(side["prompt_masked"] for side in trained["sides"])
    assert all(len(side["runs"]) == 1 for side in trained["sides"])  # one turn a side, nothing else
    for side in ("chosen", "rejected"):
        turns = _as_dataset([{"messages": r["prompt"] + r[side], "loss_mask": [0] * len(r["prompt"]) + [1],
                              "tools": r.get("tools")} for r in published])
        ours, marked = _our_runs(turns, tokenizer)
        theirs = [s for s in trained["sides"] if s["side"] == side]
        assert Counter(run for s in theirs for run in s["runs"]) == Counter(ours), side
        assert sum(s["count"] for s in theirs) == marked, side
    assert trained["steps"] == 1


def _as_dataset(rows: list[dict[str, Any]]) -> Any:
    from datasets import Dataset, Features, Json, List, Value

    from whileai_datasets.rows.features import Message

    features = Features({"messages": List(Message()), "loss_mask": List(Value("int8")), "tools": Json()})
    return Dataset.from_list(rows, features=features)
