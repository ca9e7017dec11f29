"""A published repo is private: other callers get the clients' own not-found errors, from the server.

Every identity has its own caches (conftest), and each test checks in the request log that the
refusal came from the server, so a cold cache cannot be what made the load fail.
Functions without a `test_` prefix run in a client process.
"""

from __future__ import annotations

from typing import Any

from datasets import load_from_disk

DATASET_NOT_FOUND = "datasets.exceptions.DatasetNotFoundError"
REPO_NOT_FOUND = "huggingface_hub.errors.RepositoryNotFoundError"


# --- client side ---------------------------------------------------------------------------------
def publish_saved(path: str, repo_id: str, token: str) -> dict[str, Any]:
    from whileai_datasets.hub import publish

    return dict(publish(load_from_disk(path), repo_id, token=token))


def load_split(repo_id: str, token: str | None = None) -> int:
    from datasets import load_dataset

    return load_dataset(repo_id, split="train", token=token).num_rows


def repo_info(repo_id: str, token: str | None = None) -> str:
    from huggingface_hub import HfApi

    return str(HfApi(token=token).dataset_info(repo_id).sha)


def download_shard(repo_id: str, token: str | None = None) -> str:
    from huggingface_hub import hf_hub_download

    return hf_hub_download(repo_id, "data/train-00000-of-00001.parquet", repo_type="dataset", token=token)


# --- tests ---------------------------------------------------------------------------------------
def test_anonymous_load_of_a_private_repo_raises_dataset_not_found(alice, anonymous, hub, repo_id,
                                                                   saved_rollouts):
    alice.run(publish_saved, path=saved_rollouts, repo_id=repo_id, token=alice.token)
    assert alice.run(load_split, repo_id=repo_id, token=alice.token) == 8  # warm owner cache; a row per marked turn
    mark = hub.mark()

    error = anonymous.run_error(load_split, repo_id=repo_id)

    assert error.type == DATASET_NOT_FOUND
    assert error.message == f"Dataset '{repo_id}' doesn't exist on the Hub or cannot be accessed."
    answers = [(e["method"], e["status"], e["error_code"], e["user"]) for e in hub.requests(mark, repo=repo_id)]
    assert answers == [("HEAD", 401, "RepoNotFound", None)]


def test_another_users_load_raises_dataset_not_found(alice, bob, hub, repo_id, saved_rollouts):
    alice.run(publish_saved, path=saved_rollouts, repo_id=repo_id, token=alice.token)
    mark = hub.mark()

    error = bob.run_error(load_split, repo_id=repo_id, token=bob.token)

    assert error.type == DATASET_NOT_FOUND
    assert error.message == f"Dataset '{repo_id}' doesn't exist on the Hub or cannot be accessed."
    answers = {(e["status"], e["error_code"], e["user"]) for e in hub.requests(mark, repo=repo_id)}
    assert answers == {(404, "RepoNotFound", "bob")}


def test_another_user_sees_repository_not_found_for_info_and_files(alice, bob, anonymous, repo_id, saved_rollouts):
    alice.run(publish_saved, path=saved_rollouts, repo_id=repo_id, token=alice.token)

    refused = [bob.run_error(repo_info, repo_id=repo_id, token=bob.token),
               bob.run_error(download_shard, repo_id=repo_id, token=bob.token),
               anonymous.run_error(download_shard, repo_id=repo_id)]

    assert [e.type for e in refused] == [REPO_NOT_FOUND] * 3
    assert all("Repository Not Found for url: " in e.message for e in refused)
