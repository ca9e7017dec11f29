"""publish() through the real huggingface_hub and datasets clients, against the local hub.

Functions without a `test_` prefix run in a client process (see conftest: `Identity.run`).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from pathlib import Path
from typing import Any

from datasets import DatasetDict, Features, Json, List, load_from_disk

from tests.hub.conftest import published_rows

PUBLISH_ERROR = "whileai_datasets.errors.PublishError"
UPLOAD_ROUTES = {"repo-create", "preupload", "lfs-batch", "lfs-upload", "commit"}


# --- client side ---------------------------------------------------------------------------------
def publish_saved(path: str, repo_id: str, **options: Any) -> dict[str, Any]:
    from whileai_datasets.hub import publish

    return dict(publish(load_from_disk(path), repo_id, **options))


def load_to_disk(repo_id: str, out: str, token: str | None = None, revision: str | None = None,
                 name: str | None = None) -> dict[str, int]:
    """Load config `name` as a reader would (the default config when None)."""
    from datasets import load_dataset

    loaded = load_dataset(repo_id, name, token=token, revision=revision)
    loaded.save_to_disk(out)
    return {name: split.num_rows for name, split in loaded.items()}


def repo_files(repo_id: str, token: str) -> list[str]:
    from huggingface_hub import HfApi

    return sorted(HfApi(token=token).list_repo_files(repo_id, repo_type="dataset"))


def read_card(repo_id: str, token: str) -> dict[str, Any]:
    from huggingface_hub import DatasetCard, hf_hub_download

    path = hf_hub_download(repo_id, "README.md", repo_type="dataset", token=token)
    card = DatasetCard.load(path)
    return {"text": card.text, "data": card.data.to_dict()}


# --- tests ---------------------------------------------------------------------------------------
def test_publish_round_trips_rows_and_features_of_every_split(alice, repo_id, rollouts, saved_rollouts, tmp_path):
    alice.run(publish_saved, path=saved_rollouts, repo_id=repo_id, token=alice.token)
    alice.on_another_machine().run(load_to_disk, repo_id=repo_id, out=str(tmp_path / "back"), token=alice.token,
                                   name="canonical")

    back = load_from_disk(str(tmp_path / "back"))
    assert sorted(back) == ["holdout", "train"]
    for name in ("train", "holdout"):
        assert back[name].features == Features({**rollouts[name].features, "messages": List(Json())})
        assert list(back[name]) == published_rows(rollouts[name])


def test_publish_of_message_feature_rows_stores_only_built_in_types(alice, repo_id, tmp_path):
    from datasets import Dataset, Value

    from whileai_datasets.rows.features import Message

    features = Features({"messages": List(Message()), "loss_mask": List(Value("int8")), "scenario_id": Value("string")})
    call = {"id": "c1", "type": "function", "function": {"name": "book", "arguments": "{}"}}
    rows: dict[str, list[Any]] = {
        "messages": [[{"role": "user", "content": "hi", "lang": "en"}, {"role": "assistant", "content": "yo"}],
                     [{"role": "user", "content": "book"}, {"role": "assistant", "content": "", "tool_calls": [call]}]],
        "loss_mask": [[0, 1], [0, 1]], "scenario_id": ["s1", "s2"]}
    Dataset.from_dict(rows, features=features).save_to_disk(str(tmp_path / "messages"))
    alice.run(publish_saved, path=str(tmp_path / "messages"), repo_id=repo_id, token=alice.token)

    reader = alice.on_another_machine()
    _, card = reader.run_each(
        (load_to_disk, {"repo_id": repo_id, "out": str(tmp_path / "back"), "token": alice.token, "name": "canonical"}),
        (read_card, {"repo_id": repo_id, "token": alice.token}))

    back = load_from_disk(str(tmp_path / "back"))["train"]
    assert "WhileaiMessage" not in card["text"] + str(card["data"])
    assert back.features["messages"] == List(Json())
    assert back["messages"] == rows["messages"]  # exactly the keys each message had, "lang" included


def test_publish_creates_a_private_repo_and_returns_its_head(alice, hub, repo_id, saved_rollouts):
    result = alice.run(publish_saved, path=saved_rollouts, repo_id=repo_id, token=alice.token)

    _, _, info = hub.call("GET", f"/api/datasets/{repo_id}", token=alice.token)
    assert info["private"] is True
    assert result["repo_id"] == repo_id
    assert result["url"] == f"{hub.url}/datasets/{repo_id}"
    assert re.fullmatch(r"[0-9a-f]{40}", result["commit"])
    assert result["commit"] == info["sha"]
    assert result["configs"]["canonical"] == {"train": 4, "holdout": 2}
    assert result["splits"] == {"train": 8, "holdout": 4}  # the default config: one row per marked turn


def test_second_publish_replaces_the_splits_and_the_old_revision_still_loads(alice, hub, repo_id, rollouts,
                                                                             saved_rollouts, tmp_path):
    first = alice.run(publish_saved, path=saved_rollouts, repo_id=repo_id, token=alice.token)
    changed = DatasetDict({"train": rollouts["train"].select([0]), "test": rollouts["holdout"]})
    changed.save_to_disk(str(tmp_path / "changed"))
    second = alice.run(publish_saved, path=str(tmp_path / "changed"), repo_id=repo_id, token=alice.token)

    reader = alice.on_another_machine()
    latest, old, files = reader.run_each(
        (load_to_disk, {"repo_id": repo_id, "out": str(tmp_path / "latest"), "token": alice.token, "name": "canonical"}),
        (load_to_disk, {"repo_id": repo_id, "out": str(tmp_path / "old"), "token": alice.token,
                        "revision": first["commit"], "name": "canonical"}),
        (repo_files, {"repo_id": repo_id, "token": alice.token}))
    _, _, history = hub.call("GET", f"/api/datasets/{repo_id}/commits/main", token=alice.token)
    assert second["commit"] != first["commit"]
    ids = [c["id"] for c in history]
    assert ids.index(first["commit"]) == ids.index(second["commit"]) + 1  # one commit per publish
    assert latest == {"train": 1, "test": 2}
    assert [f for f in files if "holdout" in f] == []  # the old split's shards are deleted in the same commit
    assert {f for f in files if f.endswith(".parquet")} == {
        f"{folder}/{split}-00000-of-00001.parquet" for folder in ("data", "canonical", "messages", "sharegpt")
        for split in ("train", "test")}
    assert old == {"train": 4, "holdout": 2}
    assert list(load_from_disk(str(tmp_path / "old"))["holdout"]) == published_rows(rollouts["holdout"])


def test_republishing_the_same_data_makes_no_commit(alice, hub, repo_id, saved_rollouts):
    first = alice.run(publish_saved, path=saved_rollouts, repo_id=repo_id, token=alice.token)
    mark = hub.mark()
    again = alice.run(publish_saved, path=saved_rollouts, repo_id=repo_id, token=alice.token)

    routes = [e["route"] for e in hub.requests(mark, repo=repo_id)]
    assert again["commit"] == first["commit"]
    assert "commit" not in routes
    assert "lfs-upload" not in routes


def test_publish_refuses_an_existing_public_repo_without_private_false(alice, hub, saved_rollouts):
    name = f"public-{uuid.uuid4().hex[:8]}"
    hub.call("POST", "/api/repos/create", token=alice.token, body={"name": name, "type": "dataset", "private": False})
    mark = hub.mark()

    error = alice.run_error(publish_saved, path=saved_rollouts, repo_id=f"alice/{name}", token=alice.token)

    assert error.type == PUBLISH_ERROR
    assert f"alice/{name} exists and is public" in error.message
    assert "Pass private=False (CLI: --public)" in error.message
    assert not [e for e in hub.requests(mark) if e["route"] in UPLOAD_ROUTES]


def test_publish_with_private_false_makes_a_repo_anyone_can_load(alice, anonymous, hub, repo_id, saved_rollouts,
                                                                 tmp_path):
    alice.run(publish_saved, path=saved_rollouts, repo_id=repo_id, token=alice.token, private=False)

    rows = anonymous.run(load_to_disk, repo_id=repo_id, out=str(tmp_path / "anon"), name="canonical")

    assert hub.call("GET", f"/api/datasets/{repo_id}")[2]["private"] is False
    assert rows == {"train": 4, "holdout": 2}


def test_publish_without_any_token_fails_before_sending_anything(anonymous, hub, saved_rollouts):
    mark = hub.mark()

    error = anonymous.run_error(publish_saved, path=saved_rollouts, repo_id="alice/never-created")

    assert error.type == PUBLISH_ERROR
    assert error.message.startswith("publish(token=None): no Hugging Face token was found")
    assert "set HF_TOKEN, or run `hf auth login`" in error.message
    assert hub.requests(mark) == []


def test_publish_uses_the_login_cached_by_hf_auth_login(alice, hub, repo_id, saved_rollouts):
    alice.login()
    mark = hub.mark()

    result = alice.run(publish_saved, path=saved_rollouts, repo_id=repo_id)

    assert result["repo_id"] == repo_id
    assert {e["user"] for e in hub.requests(mark, repo=repo_id) if e["route"] != "lfs-upload"} == {"alice"}


def test_publish_with_hf_token_puts_a_bare_name_in_the_token_owners_namespace(alice, hub, repo_id, saved_rollouts):
    alice.env_token = True
    bare = repo_id.split("/")[1]

    result = alice.run(publish_saved, path=saved_rollouts, repo_id=bare)

    assert result["repo_id"] == f"alice/{bare}"
    assert hub.head(f"alice/{bare}", alice.token) == result["commit"]


def test_publish_with_a_rejected_token_says_which_token(anonymous, hub, saved_rollouts):
    error = anonymous.run_error(publish_saved, path=saved_rollouts, repo_id="alice/x", token="not-a-real-token")

    assert error.type == PUBLISH_ERROR
    assert "the Hub rejected the token from the token argument (HTTP 401)" in error.message


def test_publish_into_a_namespace_the_token_cannot_write_is_refused(bob, hub, repo_id, saved_rollouts):
    mark = hub.mark()

    error = bob.run_error(publish_saved, path=saved_rollouts, repo_id=repo_id, token=bob.token)

    assert error.type == PUBLISH_ERROR
    assert "creating the private dataset repo failed: HTTP 403 on POST /api/repos/create" in error.message
    assert not [e for e in hub.requests(mark) if e["route"] in UPLOAD_ROUTES - {"repo-create"}]


def test_card_on_the_hub_records_report_sources_versions_and_split_key(alice, repo_id, saved_rollouts, tmp_path):
    source = tmp_path / "run-07.jsonl"
    source.write_bytes(b'{"prompt": "book a room"}\n')
    report = {"n": 6, "format": "openai", "mask_mode": "assistant", "trained_messages": 12, "masked_messages": 18,
              "tool_output_truncated": 2, "tool_output_chars_cut": 340, "max_tool_output_chars": 200,
              "groups": 0, "warnings": ["2 of 6 rows have reward below 0.5 and are exported as SFT targets"]}
    alice.run(publish_saved, path=saved_rollouts, repo_id=repo_id, token=alice.token, report=report,
              sources=[str(source)], split_key="scenario_id")

    card = alice.run(read_card, repo_id=repo_id, token=alice.token)

    provenance = card["data"]["whileai_datasets"]
    assert provenance["split_key"] == "scenario_id"
    assert provenance["sources"] == [{"name": "run-07.jsonl", "sha256": _sha256(source)}]
    assert provenance["export"]["mask_mode"] == "assistant"
    infos = {info["config_name"]: info for info in card["data"]["dataset_info"]}
    assert [s["num_examples"] for s in infos["canonical"]["splits"]] == [4, 2]
    assert [s["num_examples"] for s in infos["default"]["splits"]] == [8, 4]
    assert "12 of 30 messages (40.0%) are trained on; 18 are context only" in card["text"]
    assert "2 tool messages cut to 200 characters, 340 characters removed in total" in card["text"]
    assert "- 2 of 6 rows have reward below 0.5 and are exported as SFT targets" in card["text"]
    assert "Rows are split by `scenario_id`: every value of it lives in exactly one split (2 in train, 1 in holdout)" \
        in card["text"]
    assert f"| run-07.jsonl | 26 | `{_sha256(source)}` |" in card["text"]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_publish_to_a_branch_leaves_main_alone_and_the_branch_loads(alice, hub, repo_id, rollouts, saved_rollouts,
                                                                    tmp_path):
    first = alice.run(publish_saved, path=saved_rollouts, repo_id=repo_id, token=alice.token)
    DatasetDict({"train": rollouts["train"].select([0])}).save_to_disk(str(tmp_path / "one"))

    branch = alice.run(publish_saved, path=str(tmp_path / "one"), repo_id=repo_id, token=alice.token, revision="dev")

    reader = alice.on_another_machine()
    on_dev, on_main = reader.run_each(
        (load_to_disk, {"repo_id": repo_id, "out": str(tmp_path / "dev"), "token": alice.token, "revision": "dev",
                        "name": "canonical"}),
        (load_to_disk, {"repo_id": repo_id, "out": str(tmp_path / "main"), "token": alice.token, "name": "canonical"}))
    assert hub.head(repo_id, alice.token) == first["commit"]
    assert branch["commit"] != first["commit"]
    assert on_dev == {"train": 1}
    assert on_main == {"train": 4, "holdout": 2}


def test_first_publish_to_a_branch_of_a_new_repo_creates_the_branch(alice, repo_id, saved_rollouts, tmp_path):
    alice.run(publish_saved, path=saved_rollouts, repo_id=repo_id, token=alice.token, revision="dev")

    on_dev = alice.on_another_machine().run(load_to_disk, repo_id=repo_id, out=str(tmp_path / "dev"),
                                            token=alice.token, revision="dev", name="canonical")
    assert on_dev == {"train": 4, "holdout": 2}
