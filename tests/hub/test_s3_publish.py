"""`push` from an object in a bucket (a local S3-protocol server, tests/support/s3_server.py), on both engines: the repo
equals the push of the same file from disk.

Functions without a `test_` prefix run in a client process (see conftest: `Identity.run`); it inherits the
bucket's credentials from the environment, as a user's shell would hand them on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SYSTEM_PROMPT, seeded_rows, write_jsonl
from tests.hub.test_hub_cli import push
from tests.hub.test_ray_publish import repo_views
from tests.support.s3_server import Bucket

pytest.importorskip("ray.data")
pytestmark = [pytest.mark.ray, pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")]


def pushes(calls: list[list[str]]) -> list[dict[str, Any]]:
    """`push` with each argv in turn, in one client process (`--engine ray` starts its own Ray runtime)."""
    import warnings

    warnings.filterwarnings("ignore", category=DeprecationWarning, module="ray.data.context")
    return [push(argv) for argv in calls]


def test_push_from_s3_on_both_engines_publishes_the_repo_of_the_file(alice, s3: Bucket, tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "run.jsonl", seeded_rows(seed=5, mode="rl", repeats=2, budget=16))
    uri = s3.put(source, "runs/run.jsonl")
    (tmp_path / "system.txt").write_text(SYSTEM_PROMPT)
    options = ["--split-by", "scenario_id", "--test-size", "0.3", "--system-prompt-file", str(tmp_path / "system.txt"),
               "--json"]
    name = tmp_path.name[-8:]
    repos = [f"alice/file-{name}", f"alice/s3-{name}", f"alice/s3-ray-{name}"]
    alice.env_token = True
    alice.timeout = 900
    results = alice.run(pushes, calls=[[str(source), repos[0], *options], [uri, repos[1], *options],
                                       [uri, repos[2], *options, "--engine", "ray"]])
    for result in results:
        assert result["code"] == 0, result["stderr"]
    reports = [json.loads(result["stdout"]) for result in results]
    assert reports[1]["configs"] == reports[2]["configs"] == reports[0]["configs"]
    one, *others = alice.run(repo_views, repo_ids=repos, token=alice.token)
    assert one["configs"]["canonical"]["train"]["rows"]
    for other in others:
        assert other["configs"] == one["configs"]  # the same rows, in the same order, with the same features
        assert other["yaml"] == one["yaml"] and other["schemas"] == one["schemas"]
