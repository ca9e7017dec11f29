"""The server failing mid-upload: a clear error, the previous commit and the local data intact, a retry works.

Functions without a `test_` prefix run in a client process (see conftest: `Identity.run`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from datasets import DatasetDict, load_from_disk

from tests.hub.conftest import published_rows

PUBLISH_ERROR = "whileai_datasets.errors.PublishError"


# --- client side ---------------------------------------------------------------------------------
def publish_saved(path: str, repo_id: str, token: str) -> dict[str, Any]:
    from whileai_datasets.hub import publish

    return dict(publish(load_from_disk(path), repo_id, token=token))


def load_rows(repo_id: str, token: str) -> dict[str, list[dict[str, Any]]]:
    """The rows of the repo's `canonical` config, per split."""
    from datasets import load_dataset

    return {name: split.to_list() for name, split in load_dataset(repo_id, "canonical", token=token).items()}


# --- helpers -------------------------------------------------------------------------------------
def _fingerprint(folder: str) -> dict[str, str]:
    """sha256 of every file under `folder`: proves a failed publish left the local dataset alone."""
    root = Path(folder)
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _unique(rollouts: DatasetDict, tag: str) -> DatasetDict:
    """Rows no other test has uploaded: the server stores file contents once, whatever the repo."""
    return DatasetDict({name: ds.add_column("run", [tag] * ds.num_rows) for name, ds in rollouts.items()})


def _save(dataset: DatasetDict, folder: Path) -> str:
    dataset.save_to_disk(str(folder))
    return str(folder)


def _changed(rollouts: DatasetDict, tag: str, tmp_path: Path) -> tuple[str, DatasetDict]:
    changed = _unique(DatasetDict({"train": rollouts["train"].select([3, 2]), "holdout": rollouts["holdout"]}), tag)
    return _save(changed, tmp_path / "changed"), changed


# --- tests ---------------------------------------------------------------------------------------
def test_lfs_upload_answering_500_fails_clearly_and_keeps_the_previous_commit(alice, hub, repo_id, rollouts,
                                                                              saved_rollouts, tmp_path):
    first = alice.run(publish_saved, path=saved_rollouts, repo_id=repo_id, token=alice.token)
    path, changed = _changed(rollouts, repo_id, tmp_path)
    local_before = _fingerprint(path)
    # Every PUT fails; Retry-After: 0 keeps the client's five backoff retries to about a second each.
    hub.fail("lfs-upload", "500", times=1000, retry_after=0)
    mark = hub.mark()

    error = alice.run_error(publish_saved, path=path, repo_id=repo_id, token=alice.token)

    assert error.type == PUBLISH_ERROR
    assert f"uploading the splits to {repo_id} failed: HTTP 500 on PUT /lfs-upload/" in error.message
    assert f"No commit was made: {repo_id} still points at {first['commit']}" in error.message
    assert "run publish again to retry" in error.message
    assert "commit" not in [e["route"] for e in hub.requests(mark, repo=repo_id)]
    assert hub.head(repo_id, alice.token) == first["commit"]
    assert _fingerprint(path) == local_before

    hub.clear_faults()
    retry = alice.run(publish_saved, path=path, repo_id=repo_id, token=alice.token)

    assert retry["commit"] != first["commit"]
    expected = {n: published_rows(d) for n, d in changed.items()}
    assert alice.run(load_rows, repo_id=repo_id, token=alice.token) == expected


def test_connection_dropped_at_the_commit_keeps_the_previous_commit_and_retry_sends_no_file_twice(
        alice, hub, repo_id, rollouts, saved_rollouts, tmp_path):
    first = alice.run(publish_saved, path=saved_rollouts, repo_id=repo_id, token=alice.token)
    path, changed = _changed(rollouts, repo_id, tmp_path)
    hub.fail("commit", "drop")

    error = alice.run_error(publish_saved, path=path, repo_id=repo_id, token=alice.token)

    assert error.type == PUBLISH_ERROR
    commit_url = f"/api/datasets/{repo_id}/commit/main"
    assert f"uploading the splits to {repo_id} failed: RemoteProtocolError on POST {commit_url}" in error.message
    assert f"No commit was made: {repo_id} still points at {first['commit']}" in error.message
    assert hub.head(repo_id, alice.token) == first["commit"]

    mark = hub.mark()
    retry = alice.run(publish_saved, path=path, repo_id=repo_id, token=alice.token)

    routes = [e["route"] for e in hub.requests(mark, repo=repo_id)]
    assert retry["commit"] != first["commit"]
    assert "lfs-upload" not in routes  # the shards reached the server before the commit was lost
    expected = {n: published_rows(d) for n, d in changed.items()}
    assert alice.run(load_rows, repo_id=repo_id, token=alice.token) == expected


def test_a_connection_dropped_mid_upload_is_retried_and_publish_succeeds(alice, hub, repo_id, rollouts, tmp_path):
    unique = _unique(rollouts, repo_id)
    path = _save(unique, tmp_path / "unique")
    hub.fail("lfs-upload", "drop", times=1)
    mark = hub.mark()

    result = alice.run(publish_saved, path=path, repo_id=repo_id, token=alice.token)

    puts = [(e["fault"], e["status"]) for e in hub.requests(mark) if e["route"] == "lfs-upload"]
    assert puts[:2] == [("drop", None), (None, 200)]
    assert hub.head(repo_id, alice.token) == result["commit"]
    assert alice.run(load_rows, repo_id=repo_id, token=alice.token) == {n: published_rows(d) for n, d in unique.items()}
