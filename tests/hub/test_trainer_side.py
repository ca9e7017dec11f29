"""The training machine's side of a published repo: plain datasets and TRL, no whileai_datasets.

Each test's canonical rows are published to the local hub; then, in a client process where
`import whileai_datasets` fails (a module of that name that raises is first on sys.path), every
config is loaded by name, every feature type is checked to be built into `datasets`, and TRL 1.16's
own trainers run with default settings on a tiny model built from a config, with a tokenizer
trained in the test and trl's qwen2_5 chat template (no generation block). What TRL labels is
compared, by text and by count, with what this package's own `tokenize` marks on the canonical rows.
One publishing process and one such training machine serve all the tests of the module (`cases`).

Functions without a `test_` prefix run in a client process (see conftest: `Identity.run`); this
module imports nothing from whileai_datasets at its top level, so those processes can load it.
"""

from __future__ import annotations

import json
import uuid
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

    from tests.support.tiny_lm import tiny_causal_lm

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

    from tests.support.tiny_lm import tiny_causal_lm

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


# --- client side: several calls in one process -------------------------------------------------------
def each(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every ``{"fn": name, "kwargs": ...}`` of ``calls`` in turn, in this one client process (its imports of
    datasets, transformers and TRL are paid once): per call, its value or the traceback of what it raised."""
    import traceback

    outcomes: list[dict[str, Any]] = []
    for call in calls:
        try:
            outcomes.append({"value": globals()[call["fn"]](**call["kwargs"])})
        except Exception:  # noqa: BLE001  (reported to the test of that call, which fails with it)
            outcomes.append({"error": traceback.format_exc()})
    return outcomes


# --- the test machine: our own mask -------------------------------------------------------------------
def _tokenizer(rows: list[dict[str, Any]], folder: Path) -> Any:
    from tests.support.tiny_lm import train_tokenizer, trl_template
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


def _load(folder: Path, source: Path, *args: Any, **kwargs: Any) -> Any:
    """``load_dataset("whileai/export", ...)`` of ``source`` with a cache under ``folder``."""
    import datasets

    import whileai_datasets  # noqa: F401

    return datasets.load_dataset("whileai/export", *args, data_files=str(source), split="train",
                                 cache_dir=str(folder / "cache"), **kwargs)


def _canonical(folder: Path, rows: list[dict[str, Any]], mode: str) -> Any:
    from tests.conftest import SYSTEM_PROMPT, TOOLS, write_jsonl
    from whileai_datasets import transforms as wai_transforms

    folder.mkdir(parents=True, exist_ok=True)
    source = write_jsonl(folder / "rows.jsonl", rows)
    mask_mode = "final" if mode == "final" else "assistant"
    canonical = _load(folder, source, system_prompt=SYSTEM_PROMPT, tools=TOOLS, mask_mode=mask_mode)
    if mode == "unroll":
        canonical = canonical.with_format("arrow").map(wai_transforms.unroll, batched=True).with_format(None)
    return canonical


def _assert_plain_configs(loaded: dict[str, Any], expected: set[str]) -> None:
    assert loaded["blocked"] == BLOCKED_IMPORT
    assert set(loaded["configs"]) == expected
    for name, config in loaded["configs"].items():
        assert config["not_built_in"] == [], name
        assert "Whileai" not in json.dumps(config["features"]), name


# --- one publishing process and one training machine serve the module ----------------------------------
SFT_MODES = ("assistant", "final", "unroll")
#: A client process here runs every case's calls: the whole module's publishing, or its training.
MODULE_CLIENT_TIMEOUT = 900.0


def _call(fn: Any, **kwargs: Any) -> dict[str, Any]:
    return {"fn": fn.__name__, "kwargs": kwargs}


def _sft_case(root: Path, repo_id: str, token: str, rows: list[dict[str, Any]], tokenizer_dir: Path,
              mode: str) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """A default-config SFT case: its canonical rows, its publish call and its training calls."""
    folder = root / mode
    canonical = _canonical(folder, rows, mode)
    canonical.save_to_disk(str(folder / "canonical"))
    extra = {"tokenizer_dir": str(tokenizer_dir)} if mode == "assistant" else {}
    calls = [_call(load_every_config, repo_id=repo_id, token=token),
             _call(sft_labels, repo_id=repo_id, token=token, tokenizer_dir=str(tokenizer_dir), out=str(folder / "sft"))]
    if extra:
        calls += [_call(card_text, repo_id=repo_id, token=token),
                  _call(sft_labels, repo_id=repo_id, token=token, config="tokenized", tokenizer_dir=str(tokenizer_dir),
                        out=str(folder / "sft-tokenized"))]
    publishing = _call(publish_saved, path=str(folder / "canonical"), repo_id=repo_id, token=token, **extra)
    return {"canonical": canonical, "extra": extra}, publishing, calls


def _dpo_case(root: Path, repo_id: str, token: str, canonical_rows: list[dict[str, Any]]) -> tuple[
        dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    from whileai.simulations.score.judging import build_preference_pairs

    from tests.conftest import SYSTEM_PROMPT, TOOLS, seeded_rows, write_jsonl

    folder = root / "dpo"
    rows = seeded_rows(seed=1, mode="rl", repeats=4, budget=40)
    pairs, _ = build_preference_pairs(rows)
    folder.mkdir(parents=True)
    preference = _load(folder, write_jsonl(folder / "pairs.jsonl", pairs), "preference", system_prompt=SYSTEM_PROMPT,
                       tools=TOOLS)
    canonical = _canonical(folder / "final", canonical_rows, "final")
    tokenizer = _tokenizer(rows, folder / "tokenizer")
    canonical.save_to_disk(str(folder / "canonical"))
    preference.save_to_disk(str(folder / "preference"))
    publishing = _call(publish_saved, path=str(folder / "canonical"), repo_id=repo_id, token=token,
                       preference=str(folder / "preference"))
    calls = [_call(load_every_config, repo_id=repo_id, token=token),
             _call(dpo_masks, repo_id=repo_id, token=token, tokenizer_dir=str(folder / "tokenizer"),
                   out=str(folder / "dpo"))]
    return {"tokenizer": tokenizer}, publishing, calls


@pytest.fixture(scope="module")
def cases(hub: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every test's repo, published by one client process, then loaded and trained on by one training machine
    (a process per test would import datasets, transformers and TRL again each time: most of its minute).
    Per case: what the test compares (its canonical rows, tokenizer), and the outcome of each of its calls."""
    from tests.conftest import seeded_rows
    from tests.hub.conftest import TOKENS, Identity

    root = tmp_path_factory.mktemp("trainer-side")
    alice = Identity("alice", TOKENS["alice"], root / "alice", hub, timeout=MODULE_CLIENT_TIMEOUT)
    token = str(alice.token)
    rows = seeded_rows(seed=7, mode="rl", repeats=1, budget=24)
    tokenizer = _tokenizer(rows, root / "tokenizer")
    found: dict[str, dict[str, Any]] = {}
    publishing, training = [], []
    for mode in (*SFT_MODES, "dpo"):
        repo_id = f"alice/trainer-side-{mode}-{uuid.uuid4().hex[:8]}"
        if mode == "dpo":
            case, publish_call, calls = _dpo_case(root, repo_id, token, rows)
        else:
            case, publish_call, calls = _sft_case(root, repo_id, token, rows, root / "tokenizer", mode)
            case["tokenizer"] = tokenizer
        found[mode] = {**case, "calls": len(calls)}
        publishing.append(publish_call)
        training += calls
    published = alice.run(each, calls=publishing)
    trainer_machine = alice.on_a_training_machine()
    trainer_machine.timeout = MODULE_CLIENT_TIMEOUT
    # a case whose publish failed is not trained on: its test fails with the publish's error
    failed = {mode for mode, outcome in zip(found, published) if "error" in outcome}
    outcomes = iter(trainer_machine.run(each, calls=[c for mode, calls in _by_case(found, training)
                                                     if mode not in failed for c in calls]))
    for (mode, calls), outcome in zip(_by_case(found, training), published):
        found[mode]["published"] = outcome
        found[mode]["outcomes"] = [] if mode in failed else [next(outcomes) for _ in calls]
    return found


def _by_case(found: dict[str, dict[str, Any]], training: list[dict[str, Any]]) -> list[tuple[str, list[Any]]]:
    """``training`` cut back into each case's calls, in case order."""
    cut, start = [], 0
    for mode, case in found.items():
        cut.append((mode, training[start:start + case["calls"]]))
        start += case["calls"]
    return cut


def _values(case: dict[str, Any]) -> list[Any]:
    """The values of a case's training calls; its publish's or a call's error fails the test with its traceback."""
    for outcome in (case["published"], *case["outcomes"]):
        if "error" in outcome:
            pytest.fail(f"a client call of this case raised:\n{outcome['error']}", pytrace=False)
    return [outcome["value"] for outcome in case["outcomes"]]


# --- tests ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", SFT_MODES)
def test_sft_trainer_on_the_default_config_trains_exactly_the_marked_turns(cases, mode):
    case = cases[mode]
    canonical, tokenizer, extra = case["canonical"], case["tokenizer"], case["extra"]
    loaded, trained, *tokenized_side = _values(case)

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
    assert bool(tokenized_side) == bool(extra)
    if extra:  # the card's token counts, measured at publish time, are what TRL labelled
        card, pre = tokenized_side
        assert (pre["labelled"], Counter(pre["runs"])) == (marked, Counter(ours))
        assert loaded["configs"]["tokenized"]["assistant_masks"] == marked
        card = " ".join(card.split())
        assert f"the labels cover {trained['labelled']} of " in card
        assert f"**Exact**: TRL labels {marked} tokens, the {marked} the mask marks" in card
        assert f"On the default config TRL labels {marked} tokens against {marked} marked here: the same count" in card


def test_dpo_trainer_on_the_preference_config_masks_the_prompt_and_trains_one_turn_a_side(cases):
    case = cases["dpo"]
    tokenizer = case["tokenizer"]
    loaded, trained = _values(case)

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
