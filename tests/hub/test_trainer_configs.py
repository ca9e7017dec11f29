"""The configs other trainers read, through the local Hub: published from whileai's seeded rollouts,
loaded back in a process where `import whileai_datasets` fails (plain datasets only), and checked
against the canonical rows' `loss_mask` and this package's own token mask.

Functions without a `test_` prefix run in a client process (see conftest: `Identity.run`); this
module imports nothing from whileai_datasets at its top level, so those processes can load it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.hub.conftest import BLOCKED_IMPORT, blocked_import, not_built_in


# --- client side: the publishing machine ------------------------------------------------------------
def publish_saved(path: str, repo_id: str, token: str, tokenizer_dir: str | None = None) -> dict[str, Any]:
    from datasets import load_from_disk
    from transformers import AutoTokenizer

    from whileai_datasets.hub import publish

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir) if tokenizer_dir else None
    return dict(publish(load_from_disk(path), repo_id, token=token, tokenizer=tokenizer))


# --- client side: the training machine --------------------------------------------------------------
def load_trainer_configs(repo_id: str, token: str) -> dict[str, Any]:
    """The rows of `messages`, `sharegpt` and (when published) `tokenized`, the card's YAML and text."""
    from datasets import get_dataset_config_names, load_dataset
    from huggingface_hub import DatasetCard, hf_hub_download

    blocked = blocked_import()
    names = get_dataset_config_names(repo_id, token=token)
    loaded = {name: load_dataset(repo_id, name, split="train", token=token)
              for name in ("messages", "sharegpt", "tokenized") if name in names}
    card = DatasetCard.load(hf_hub_download(repo_id, "README.md", repo_type="dataset", token=token))
    return {"blocked": blocked, "names": names, "card_yaml": card.data.to_dict(), "card": card.text,
            "rows": {name: list(ds) for name, ds in loaded.items()},  # to_list() gives Json as text on 4.x
            "not_built_in": {name: not_built_in(ds.features) for name, ds in loaded.items()}}


# --- the test machine -----------------------------------------------------------------------------------
def _rollouts(tmp_path: Path, load: Any) -> tuple[list[dict[str, Any]], Any]:
    from tests.conftest import SYSTEM_PROMPT, TOOLS, seeded_rows, write_jsonl

    rows = seeded_rows(seed=5, mode="rl", repeats=1, budget=16)
    canonical = load(write_jsonl(tmp_path / "rows.jsonl", rows), system_prompt=SYSTEM_PROMPT, tools=TOOLS,
                     mask_mode="assistant")
    return rows, canonical


def _tokenizer(rows: list[dict[str, Any]], folder: Path) -> Any:
    from tests.support.tiny_lm import train_tokenizer, trl_template

    tokenizer = train_tokenizer([json.dumps(r) for r in rows], chat_template=trl_template("qwen2_5"))
    tokenizer.save_pretrained(str(folder))
    return tokenizer


def _marked_turns(canonical: Any) -> list[tuple[int, int]]:
    return [(row, i) for row, mask in enumerate(canonical["loss_mask"]) for i, flag in enumerate(mask) if flag]


def test_published_trainer_configs_train_exactly_the_loss_mask(alice, repo_id, tmp_path, load):
    from whileai_datasets import transforms as wai_transforms

    rows, canonical = _rollouts(tmp_path, load)
    tokenizer = _tokenizer(rows, tmp_path / "tokenizer")
    canonical.save_to_disk(str(tmp_path / "canonical"))
    result = alice.run(publish_saved, path=str(tmp_path / "canonical"), repo_id=repo_id, token=alice.token,
                       tokenizer_dir=str(tmp_path / "tokenizer"))

    seen = alice.on_a_training_machine().run(load_trainer_configs, repo_id=repo_id, token=alice.token)

    assert seen["blocked"] == BLOCKED_IMPORT
    assert {"default", "canonical", "messages", "sharegpt", "tokenized"} <= set(seen["names"])
    assert seen["not_built_in"] == {"messages": [], "sharegpt": [], "tokenized": []}
    assert "Json" not in json.dumps(seen["card_yaml"]["dataset_info"])  # datasets 4.0 can list the configs
    sharegpt_info = next(i for i in seen["card_yaml"]["dataset_info"] if i["config_name"] == "sharegpt")
    assert [f["name"] for f in sharegpt_info["features"]] == ["conversations", "system", "tools"]
    masks = canonical["loss_mask"]
    # messages: weight and loss on every message are the loss_mask
    messages = seen["rows"]["messages"]
    assert [[m["weight"] for m in r["messages"]] for r in messages] == [m for m in masks if any(m)]
    assert [[m["loss"] for m in r["messages"]] for r in messages] == [[bool(f) for f in m] for m in masks if any(m)]
    # sharegpt: one row per marked turn, ending at that turn
    sharegpt = seen["rows"]["sharegpt"]
    marked = _marked_turns(canonical)
    assert len(sharegpt) == len(marked) == result["configs"]["sharegpt"]["train"]
    for row, (source, turn) in zip(sharegpt, marked):
        message = canonical[source]["messages"][turn]
        last = row["conversations"][-1]
        if message.get("tool_calls"):
            calls = json.loads(last["value"])
            calls = calls if isinstance(calls, list) else [calls]
            assert last["from"] == "function_call"
            assert [c["name"] for c in calls] == [c["function"]["name"] for c in message["tool_calls"]]
        else:
            assert last == {"from": "gpt", "value": message["content"]}
        assert len([t for t in row["conversations"] if t["from"] in ("gpt", "function_call")]) == len(
            [m for m in canonical[source]["messages"][:turn + 1] if m["role"] == "assistant"])
    # tokenized: labels are the ids where this package's mask is set
    ours = canonical.map(wai_transforms.tokenize(tokenizer), batched=True, remove_columns=canonical.column_names)
    ours = [r for r in ours if any(r["assistant_masks"])]
    tokenized = seen["rows"]["tokenized"]
    assert [r["labels"] for r in tokenized] == [
        [i if m else -100 for i, m in zip(r["input_ids"], r["assistant_masks"])] for r in ours]
    assert result["trainers"]["llama-factory"] == {"config": "sharegpt", "rows": len(marked),
                                                   "unit": "rows (one per marked turn)", "exact": True, "inexact": {}}
    assert "message_field_training: weight" in seen["card"] and "mask_history: true" in seen["card"]
    assert f"the last turn of each of the {len(marked)} rows (one per marked turn" in seen["card"]


def test_rows_a_trainer_cannot_express_are_reported_on_the_card_and_in_the_result(alice, repo_id, tmp_path):
    from datasets import Dataset

    doubled = [{"role": "system", "content": "You book rooms."}, {"role": "user", "content": "Book 2."},
               {"role": "assistant", "content": "On it."}, {"role": "assistant", "content": "Booked."}]
    empty = [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": ""},
             {"role": "user", "content": "Well?"}, {"role": "assistant", "content": "Hello."}]
    plain = [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Hello."}]
    ds = Dataset.from_list([{"messages": doubled, "loss_mask": [0, 0, 1, 1]},
                            {"messages": empty, "loss_mask": [0, 1, 0, 1]},
                            {"messages": plain, "loss_mask": [0, 1]}])
    ds.save_to_disk(str(tmp_path / "rows"))

    result = alice.run(publish_saved, path=str(tmp_path / "rows"), repo_id=repo_id, token=alice.token)
    seen = alice.on_a_training_machine().run(load_trainer_configs, repo_id=repo_id, token=alice.token)

    trainers = result["trainers"]
    assert trainers["llama-factory"]["inexact"]["consecutive_assistant_turns"]["rows"] == 1
    assert trainers["llama-factory"]["inexact"]["consecutive_assistant_turns"]["first"] == (
        "split 'train', row 0, messages[3]")
    assert trainers["ms-swift"]["inexact"]["consecutive_assistant_turns"]["rows"] == 1
    assert trainers["axolotl"]["inexact"] == {"empty_marked_turn": {
        "rows": 1, "first": "split 'train', row 1, messages[1]",
        "effect": trainers["axolotl"]["inexact"]["empty_marked_turn"]["effect"]}}
    assert len(seen["rows"]["sharegpt"]) == 5 and len(seen["rows"]["messages"]) == 3  # nothing dropped
    assert "- 1: two assistant turns in a row: LLaMA-Factory skips the row" in seen["card"]
    assert "(first: split 'train', row 1, messages[1])" in seen["card"]
    assert "It skips 1 of these rows (below), so it trains 4 of them." in seen["card"]
