"""`datasets`' own `push_to_hub`, `save_to_disk` and `to_parquet` on every shape this package hands a user
(issue 42): canonical rows from the builder, each `to_trl` kind, `to_openai`, `to_fireworks`, `tokenize`.

The shapes are built here; one client process pushes each with `Dataset.push_to_hub(private=True)` and
`DatasetDict.push_to_hub(private=True)` to the local hub; one process where `import whileai_datasets`
fails loads every repo by name, every `save_to_disk` folder and every Parquet file, and runs TRL 1.16's
SFTTrainer with default settings on the pushed `to_trl("completion")` rows; one anonymous process is
refused every repo. Functions without a `test_` prefix run in those client processes (conftest:
`Identity.run_each`); this module imports nothing from whileai_datasets at its top level.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.hub.conftest import BLOCKED_IMPORT, blocked_import, not_built_in

pytestmark = pytest.mark.slow

#: The shapes pushed, by name.
SHAPES = ("canonical", "trl-training", "trl-completion", "trl-preference", "openai", "fireworks", "tokenized")
CLIENT_TIMEOUT = 900.0


# --- client side ---------------------------------------------------------------------------------------
def push_each(folders: dict[str, str], repos: dict[str, str], token: str) -> list[str]:
    """Each shape saved in `folders` pushed twice: as one Dataset, and as a train/test DatasetDict."""
    from datasets import DatasetDict, load_from_disk

    pushed = []
    for shape, folder in folders.items():
        ds = load_from_disk(folder)
        ds.push_to_hub(repos[shape], private=True, token=token)
        half = ds.num_rows // 2
        splits = DatasetDict({"train": ds.select(range(half)), "test": ds.select(range(half, ds.num_rows))})
        splits.push_to_hub(repos[shape] + "-dict", private=True, token=token)
        pushed.append(shape)
    return pushed


def _plain(ds: Any) -> dict[str, Any]:
    return {"rows": json.loads(json.dumps(list(ds), default=str)), "features": repr(ds.features),
            "not_built_in": not_built_in(ds.features)}


def load_each(repos: dict[str, str], folders: dict[str, str], parquet: dict[str, str], token: str) -> dict[str, Any]:
    """Every shape as a machine without this package reads it: by name from the hub (the Dataset push and
    the DatasetDict push), from its `save_to_disk` folder, from its Parquet file."""
    from datasets import load_dataset, load_from_disk

    out: dict[str, Any] = {"blocked": blocked_import()}
    for shape, repo_id in repos.items():
        split = load_dataset(repo_id, split="train", token=token)
        splits = load_dataset(repo_id + "-dict", token=token)
        out[shape] = {"hub": _plain(split), "hub-dict": {name: _plain(part) for name, part in splits.items()},
                      "disk": _plain(load_from_disk(folders[shape])),
                      "parquet": _plain(load_dataset("parquet", data_files=parquet[shape], split="train"))}
    return out


def train_completion(repo_id: str, token: str, tokenizer_dir: str, out: str) -> dict[str, Any]:
    """TRL's SFTTrainer, default settings, on a pushed repo (test_trainer_side's run): what it labels."""
    from tests.hub.test_trainer_side import sft_labels

    return sft_labels(repo_id, token, tokenizer_dir, out)


def refused(repos: list[str]) -> list[str]:
    """What `load_dataset` raises on each repo for a caller with no token."""
    from datasets import load_dataset

    raised = []
    for repo_id in repos:
        try:
            load_dataset(repo_id, split="train")
            raised.append("loaded")
        except Exception as err:  # noqa: BLE001  (its type is the result)
            raised.append(f"{type(err).__module__}.{type(err).__qualname__}")
    return raised


# --- the test machine: the shapes ------------------------------------------------------------------------
def _shapes(root: Path) -> tuple[dict[str, Any], Any, Any]:
    """Every shape of one run's rows (canonical with the final turn marked), the canonical rows, the tokenizer."""
    import datasets
    from whileai.simulations.score.judging import build_preference_pairs

    import whileai_datasets  # noqa: F401
    from tests.conftest import SYSTEM_PROMPT, TOOLS, seeded_rows, write_jsonl
    from tests.hub.test_trainer_side import _tokenizer
    from whileai_datasets import transforms as wai_transforms

    def load(source: Path, *config: str, **options: Any) -> Any:
        return datasets.load_dataset("whileai/export", *config, data_files=str(source), split="train",
                                     cache_dir=str(root / "cache"), system_prompt=SYSTEM_PROMPT, tools=TOOLS,
                                     **options)

    rows = seeded_rows(seed=7, mode="rl", repeats=1, budget=24)
    canonical = load(write_jsonl(root / "rows.jsonl", rows), mask_mode="final")
    pairs, _ = build_preference_pairs(seeded_rows(seed=1, mode="rl", repeats=4, budget=40))
    preference = load(write_jsonl(root / "pairs.jsonl", pairs), "preference").with_format("arrow")
    tokenizer = _tokenizer(rows, root / "tokenizer")
    arrow = canonical.with_format("arrow")
    shapes = {
        "canonical": canonical,
        "trl-training": arrow.map(wai_transforms.to_trl("training"), batched=True),
        "trl-completion": arrow.map(wai_transforms.to_trl("completion"), batched=True),
        "trl-preference": preference.map(wai_transforms.to_trl("preference"), batched=True),
        "openai": arrow.map(wai_transforms.to_openai, batched=True),
        "fireworks": arrow.map(wai_transforms.to_fireworks, batched=True),
        "tokenized": arrow.map(wai_transforms.tokenize(tokenizer), batched=True, remove_columns=arrow.column_names),
    }
    return {name: ds.with_format(None) for name, ds in shapes.items()}, canonical, tokenizer


@pytest.fixture(scope="module")
def pushed(hub: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every shape pushed by alice, then read by alice on a training machine and by an anonymous caller."""
    from tests.hub.conftest import TOKENS, Identity

    root = tmp_path_factory.mktemp("push-to-hub")
    shapes, canonical, tokenizer = _shapes(root)
    folders, parquet = {}, {}
    for name, ds in shapes.items():
        folders[name] = str(root / "disk" / name)
        parquet[name] = str(root / "parquet" / f"{name}.parquet")
        ds.save_to_disk(folders[name])
        ds.to_parquet(parquet[name])
    tag = uuid.uuid4().hex[:8]
    repos = {name: f"alice/push-{name}-{tag}" for name in shapes}
    alice = Identity("alice", TOKENS["alice"], root / "alice", hub, timeout=CLIENT_TIMEOUT)
    token = str(alice.token)
    assert alice.run(push_each, folders=folders, repos=repos, token=token) == list(shapes)
    trainer = alice.on_a_training_machine()
    trainer.timeout = CLIENT_TIMEOUT
    loaded, trained = trainer.run_each(
        (load_each, {"repos": repos, "folders": folders, "parquet": parquet, "token": token}),
        (train_completion, {"repo_id": repos["trl-completion"], "token": token, "tokenizer_dir": str(root / "tokenizer"),
                      "out": str(root / "sft")}))
    anonymous = Identity("anonymous", None, root / "anonymous", hub)
    names = [repo for repo in repos.values()] + [repo + "-dict" for repo in repos.values()]
    return {"shapes": shapes, "canonical": canonical, "tokenizer": tokenizer, "loaded": loaded, "trained": trained,
            "refused": dict(zip(names, anonymous.run(refused, repos=names)))}


# --- tests -----------------------------------------------------------------------------------------------
def _expected(ds: Any) -> list[Any]:
    return json.loads(json.dumps(list(ds), default=str))


@pytest.mark.parametrize("shape", SHAPES)
def test_each_shape_loads_by_name_from_disk_and_parquet_without_the_package(pushed: dict[str, Any],
                                                                             shape: str) -> None:
    ds, loaded = pushed["shapes"][shape], pushed["loaded"]
    assert loaded["blocked"] == BLOCKED_IMPORT
    expected = _expected(ds)
    half = len(expected) // 2
    assert len(expected) >= 2, shape
    for route in ("hub", "disk", "parquet"):
        got = loaded[shape][route]
        assert got["not_built_in"] == [] and "Whileai" not in got["features"], (shape, route)
        assert got["features"] == repr(ds.features), (shape, route)  # the same types, read by plain datasets
        assert got["rows"] == expected, (shape, route)
    splits = loaded[shape]["hub-dict"]
    assert splits["train"]["rows"] == expected[:half] and splits["test"]["rows"] == expected[half:], shape
    assert all(split["not_built_in"] == [] for split in splits.values()), shape


def test_no_message_a_trainer_reads_carries_a_key_the_row_did_not_have(pushed: dict[str, Any]) -> None:
    loaded = pushed["loaded"]
    optional = ("tool_calls", "name", "tool_call_id", "reasoning_content", "weight", "extra", "parts")
    for shape in ("trl-training", "trl-completion", "trl-preference", "openai", "fireworks"):
        rows = loaded[shape]["hub"]["rows"]
        messages = [m for row in rows for column in ("messages", "prompt", "completion", "chosen", "rejected")
                    if isinstance(row.get(column), list) for m in row[column]]
        messages += [m for row in rows for m in (row.get("input") or {}).get("messages", [])]
        assert messages, shape
        assert all(m.get(key, 0) is not None for m in messages for key in optional), shape
        assert not any({"extra", "parts"} & set(m) for m in messages), shape
    calls = [c for row in loaded["trl-training"]["hub"]["rows"] for m in row["messages"] for c in m.get("tool_calls", [])]
    assert calls and all(isinstance(c["function"]["arguments"], dict) for c in calls)  # TRL's values, not text


def test_every_repo_is_refused_to_an_anonymous_reader(pushed: dict[str, Any]) -> None:
    assert len(pushed["refused"]) == 2 * len(SHAPES)
    assert set(pushed["refused"].values()) == {"datasets.exceptions.DatasetNotFoundError"}


def test_sft_trainer_on_the_pushed_completion_rows_trains_exactly_the_marked_turns(pushed: dict[str, Any]) -> None:
    from tests.hub.test_trainer_side import _our_runs

    canonical, trained = pushed["canonical"], pushed["trained"]
    ours, marked = _our_runs(canonical, pushed["tokenizer"])
    marked_turns = sum(sum(m) for m in canonical["loss_mask"])
    assert trained["blocked"] == BLOCKED_IMPORT
    assert {"prompt", "completion"} <= set(trained["columns"]) and "messages" not in trained["columns"]
    assert trained["rows"] == len(pushed["shapes"]["trl-completion"]) == marked_turns == len(canonical)
    assert trained["labelled"] == marked
    assert Counter(trained["runs"]) == Counter(ours)  # the same turns' text, each once
    assert all(run.endswith("<|im_end|>\n") for run in trained["runs"])
    assert trained["steps"] == 1


def test_canonical_rows_say_no_trainer_reads_their_loss_mask(pushed: dict[str, Any]) -> None:
    description = pushed["canonical"].info.description
    assert "no trainer reads it" in description and "to_trl(\"completion\")" in description
    assert "publish" in description
