"""The server failing mid-upload: a clear error, the previous commit and the local data intact, a retry works.

Functions without a `test_` prefix run in a client process (see conftest: `Identity.run`).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import uuid
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from datasets import DatasetDict, load_from_disk
from packaging.version import Version

from tests.hub.conftest import published_rows

PUBLISH_ERROR = "whileai_datasets.errors.PublishError"


# --- client side ---------------------------------------------------------------------------------
def publish_saved(path: str, repo_id: str, token: str) -> dict[str, Any]:
    from whileai_datasets.hub import publish

    return dict(publish(load_from_disk(path), repo_id, token=token))


def load_rows(repo_id: str, token: str) -> dict[str, list[dict[str, Any]]]:
    """The rows of the repo's `canonical` config, per split."""
    from datasets import load_dataset

    return {name: list(split) for name, split in load_dataset(repo_id, "canonical", token=token).items()}


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


# huggingface_hub retries a dropped connection (RemoteProtocolError) from 1.21; before, one failed PUT ends the upload
CLIENT_RETRIES_A_DROP = Version(version("huggingface_hub")) >= Version("1.21")


@pytest.mark.skipif(not CLIENT_RETRIES_A_DROP, reason="huggingface_hub < 1.21 does not retry a dropped connection")
def test_a_connection_dropped_mid_upload_is_retried_and_publish_succeeds(alice, hub, repo_id, rollouts, tmp_path):
    unique = _unique(rollouts, repo_id)
    path = _save(unique, tmp_path / "unique")
    hub.fail("lfs-upload", "drop", times=1)
    mark = hub.mark()

    result = alice.run(publish_saved, path=path, repo_id=repo_id, token=alice.token)

    # shards go up in parallel: another shard's upload may be logged before the dropped one
    puts = [(e["path"], e["fault"], e["status"]) for e in hub.requests(mark) if e["route"] == "lfs-upload"]
    dropped = [i for i, (_, fault, _) in enumerate(puts) if fault == "drop"]
    assert len(dropped) == 1
    again = [status for path, fault, status in puts[dropped[0] + 1 :] if path == puts[dropped[0]][0]]
    assert again == [200]  # the client sent the dropped file once more, and it landed
    assert hub.head(repo_id, alice.token) == result["commit"]
    assert alice.run(load_rows, repo_id=repo_id, token=alice.token) == {n: published_rows(d) for n, d in unique.items()}


@pytest.mark.skipif(CLIENT_RETRIES_A_DROP, reason="huggingface_hub >= 1.21 retries the dropped PUT itself")
def test_a_connection_dropped_mid_upload_without_client_retries_says_so_and_publishing_again_lands(
        alice, hub, repo_id, rollouts, tmp_path):
    unique = _unique(rollouts, repo_id)
    path = _save(unique, tmp_path / "unique")
    hub.fail("lfs-upload", "drop", times=1)

    error = alice.run_error(publish_saved, path=path, repo_id=repo_id, token=alice.token)

    assert error.type == PUBLISH_ERROR
    assert f"uploading the splits to {repo_id} failed: RemoteProtocolError on PUT /lfs-upload/" in error.message
    named = re.search(rf"No commit was made: {repo_id} still points at ([0-9a-f]{{40}})", error.message)
    assert named and "run publish again to retry" in error.message
    before = named.group(1)
    assert hub.head(repo_id, alice.token) == before  # the repo as created, no data commit

    result = alice.run(publish_saved, path=path, repo_id=repo_id, token=alice.token)

    assert hub.head(repo_id, alice.token) == result["commit"] != before
    assert alice.run(load_rows, repo_id=repo_id, token=alice.token) == {n: published_rows(d) for n, d in unique.items()}


# --- an interruption at every request of a push ----------------------------------------------------
#
# The sequence is read from the server's log of a clean push onto an existing repo (not written out
# here), so it follows publish() as it changes: more configs, more or fewer commits. The first and the
# last request of each route in it (every request with WAI_PUSH_FAULTS=every: 34 of them, 3.5 minutes)
# are then dropped in turn (the connection closed before an answer), on a fresh repo holding a first
# revision; whatever the client does with the loss (retry it, or raise), the previous revision must
# still load, the head must hold either the old rows or the new ones (never a mix), and publishing
# again must complete.
def _arm(route: str, skip: int) -> None:
    """Drop the request after `skip` earlier ones of `route` (the client calls the server's control route)."""
    import json as json_module
    import os
    import urllib.request

    body = json_module.dumps({"route": route, "mode": "drop", "times": 1, "skip": skip}).encode()
    request = urllib.request.Request(os.environ["HF_ENDPOINT"] + "/_local/faults", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10) as answer:
        answer.read()


def _disarm() -> None:
    import os
    import urllib.request

    request = urllib.request.Request(os.environ["HF_ENDPOINT"] + "/_local/faults", method="DELETE")
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10) as answer:
        answer.read()


def _rows_at(repo_id: str, token: str, revision: str | None) -> dict[str, list[dict[str, Any]]]:
    from datasets import load_dataset

    loaded = load_dataset(repo_id, "canonical", token=token, revision=revision, download_mode="force_redownload")
    return {name: list(split) for name, split in loaded.items()}


def push_interrupted(first: str, second: str, repo_id: str, token: str, route: str | None, skip: int) -> dict[str, Any]:
    """Publish `first`, then `second` with one request dropped (none when `route` is None), then load what
    is there, publish `second` again and load once more: what a user would see at each step."""
    from whileai_datasets.hub import publish

    before = dict(publish(load_from_disk(first), repo_id, token=token))
    outcome: dict[str, Any] = {"before": before["commit"], "error": None}
    if route is not None:
        _arm(route, skip)
    try:
        outcome["interrupted"] = dict(publish(load_from_disk(second), repo_id, token=token))["commit"]
    except Exception as err:  # noqa: BLE001  (what the user gets: its type and text are checked by the test)
        outcome["error"] = {"type": f"{type(err).__module__}.{type(err).__qualname__}", "message": str(err)}
    finally:
        _disarm()
    outcome["previous_rows"] = _rows_at(repo_id, token, before["commit"])
    outcome["head_rows"] = _rows_at(repo_id, token, None)
    retry = dict(publish(load_from_disk(second), repo_id, token=token))
    outcome["retry"] = retry["commit"]
    outcome["retry_rows"] = _rows_at(repo_id, token, None)
    from huggingface_hub import HfApi

    outcome["card"] = HfApi(token=token).hf_hub_download(repo_id, "README.md", repo_type="dataset",
                                                           revision=retry["commit"])
    with open(outcome["card"], encoding="utf-8") as handle:
        outcome["card"] = handle.read()
    return outcome


def push_interrupted_each(cases: list[dict[str, Any]], token: str) -> list[dict[str, Any]]:
    """`push_interrupted` for each case, in one client process (its imports are paid once)."""
    return [push_interrupted(token=token, **case) for case in cases]


def _push_sequence(hub: Any, alice: Any, rollouts: DatasetDict, tmp_path: Path) -> list[tuple[str, int]]:
    """(route, how many requests of that route came before it) for each request a clean second push sends."""
    repo = f"alice/sequence-{uuid.uuid4().hex[:8]}"
    first = _save(_unique(rollouts, repo + "-1"), tmp_path / "sequence-first")
    second = _save(_unique(rollouts, repo + "-2"), tmp_path / "sequence-second")
    alice.run(publish_saved, path=first, repo_id=repo, token=alice.token)
    mark = hub.mark()
    alice.run(publish_saved, path=second, repo_id=repo, token=alice.token)
    seen: dict[str, int] = {}
    sequence = []
    for entry in hub.requests(mark):
        route = entry["route"]
        if route is None or not (f"/{repo}" in entry["path"] or route in ("lfs-upload", "whoami")):
            continue
        sequence.append((route, seen.get(route, 0)))
        seen[route] = seen.get(route, 0) + 1
    return sequence


#: Interrupted pushes per conftest.CLIENT_TIMEOUT of the client process that runs them: a case takes about 4 s
#: (publishing, loading, client backoff).
CASES_PER_CLIENT = 5


def _sampled(sequence: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The requests to interrupt: each route's first and last (a push repeats preupload, LFS batch, upload and
    verify once per shard, and the ones between behave as these do); every one with WAI_PUSH_FAULTS=every."""
    if os.environ.get("WAI_PUSH_FAULTS") == "every":
        return sequence
    last = {route: skip for route, skip in sequence}
    return [(route, skip) for route, skip in sequence if skip in (0, last[route])]


def test_an_interruption_at_any_request_of_a_push_keeps_the_previous_revision_and_a_retry_completes(
        alice, hub, rollouts, tmp_path):
    whole = _push_sequence(hub, alice, rollouts, tmp_path)
    routes = {route for route, _ in whole}
    assert {"lfs-upload", "commit"} <= routes, whole  # the log really holds a push
    sequence = _sampled(whole)
    assert {route for route, _ in sequence} == routes, sequence  # every kind of request is interrupted
    cases, expected = [], []
    for position, (route, skip) in enumerate(sequence):
        repo = f"alice/interrupted-{position}-{uuid.uuid4().hex[:6]}"
        old, new = _unique(rollouts, repo + "-old"), _unique(rollouts, repo + "-new")
        first, second = _save(old, tmp_path / f"{position}-old"), _save(new, tmp_path / f"{position}-new")
        cases.append({"first": first, "second": second, "repo_id": repo, "route": route, "skip": skip})
        expected.append(tuple({n: published_rows(d) for n, d in data.items()} for data in (old, new)))
    # one client process for them all (its imports paid once), given the time the batches of CASES_PER_CLIENT had
    alice.timeout = alice.timeout * math.ceil(len(cases) / CASES_PER_CLIENT)
    seen_all = alice.run(push_interrupted_each, cases=cases, token=alice.token)
    assert len(seen_all) == len(cases)
    failures = []
    for position, ((route, skip), case, seen, (old_rows, new_rows)) in enumerate(
            zip(sequence, cases, seen_all, expected)):
        where = f"request {position} ({route} #{skip + 1})"
        if seen["error"] is not None and seen["error"]["type"] != PUBLISH_ERROR:
            failures.append(f"{where}: publish raised {seen['error']['type']}, not PublishError: "
                            f"{seen['error']['message']}")
        if seen["error"] is not None and not re.search(r"retry|publish again", seen["error"]["message"], re.IGNORECASE):
            failures.append(f"{where}: the error does not say to retry: {seen['error']['message']}")
        if seen["previous_rows"] != old_rows:
            failures.append(f"{where}: the previous revision {seen['before']} no longer loads its rows")
        if seen["head_rows"] not in (old_rows, new_rows):
            failures.append(f"{where}: the head holds neither the old rows nor the new ones")
        if seen["retry_rows"] != new_rows or case["repo_id"] not in seen["card"]:
            failures.append(f"{where}: publishing again did not complete (rows or card)")
    assert not failures, "\n".join(failures)
    assert len(sequence) >= 5
