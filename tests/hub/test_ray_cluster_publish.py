"""`publish_rollouts` on a three-node Ray cluster (tests/support/ray_cluster.py) that loses a worker node mid-job: the
repo equals a local push's, in one commit, and no shard is left behind. No folder is shared: the shards come back
to the driver through Ray's object store.

Functions without a `test_` prefix run in a client process (see conftest: `Identity.run`), which connects to
the cluster this test process started.
"""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.support import ray_cluster
from tests.conftest import SYSTEM_PROMPT, seeded_rows, write_jsonl
from tests.hub.test_hub_cli import push
from tests.hub.test_ray_publish import repo_views

pytest.importorskip("ray.data")
pytestmark = [pytest.mark.ray, pytest.mark.cluster,
              pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")]


def publish_on_cluster(address: str, source: str, repo_id: str, driver_tmp: str) -> dict[str, Any]:
    """`publish_rollouts` on the cluster at `address`, in small blocks (several shards per split), the driver's
    temporary files in `driver_tmp`; then the repo's commits."""
    import tempfile
    import warnings

    import ray
    from huggingface_hub import HfApi

    warnings.filterwarnings("ignore", category=DeprecationWarning, module="ray.data.context")
    from whileai_datasets import TrainingOptions
    from whileai_datasets.hub import HoldOut
    from whileai_datasets.ray_engine.publish import publish_rollouts

    tempfile.tempdir = driver_tmp  # where the shards wait for the commit: the test watches it
    ray.init(address=address, log_to_driver=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        done = publish_rollouts(source, repo_id, TrainingOptions.whileai_export(system_prompt=SYSTEM_PROMPT),
                                hold_out=HoldOut("scenario_id", test_size=0.3), range_bytes=32 << 10,
                                block_bytes=16 << 10)
    finally:
        ray.shutdown()
    commits = HfApi().list_repo_commits(repo_id, repo_type="dataset")
    return {"configs": dict(done)["configs"], "commits": [c.title for c in commits]}


def test_publish_survives_a_lost_node_with_one_commit_of_the_local_rows(alice, tmp_path: Path) -> None:
    base = seeded_rows(seed=5, mode="rl", repeats=2, budget=24)
    rows = [{**row, "scenario_id": f"{row.get('scenario_id')}-{c % 3}"} for c in range(4) for row in base]
    source = write_jsonl(tmp_path / "run.jsonl", rows)
    (tmp_path / "system.txt").write_text(SYSTEM_PROMPT)
    driver_tmp = tmp_path / "driver-tmp"
    driver_tmp.mkdir()
    name = tmp_path.name[-8:]
    local, on_ray = f"alice/local-{name}", f"alice/cluster-{name}"
    alice.env_token = True
    alice.timeout = 900
    by_local = alice.run(push, argv=[str(source), local, "--split-by", "scenario_id", "--test-size", "0.3",
                                     "--system-prompt-file", str(tmp_path / "system.txt"), "--json"])
    assert by_local["code"] == 0, by_local["stderr"]
    with ray_cluster.three_nodes() as cluster:
        # the node dies once the first shard has come back to the driver
        with cluster.kill_when(lambda: bool(glob.glob(f"{driver_tmp}/**/.blocks/**/*.parquet", recursive=True))):
            by_ray = alice.run(publish_on_cluster, address=cluster.address, source=str(source), repo_id=on_ray,
                               driver_tmp=str(driver_tmp))
        assert len(cluster.killed) == 1
    assert by_ray["configs"] == json.loads(by_local["stdout"])["configs"]
    assert len(by_ray["commits"]) == 2  # the repo's creation, then the one commit of the publish
    one, other = alice.run(repo_views, repo_ids=[local, on_ray], token=alice.token)
    assert other["configs"] == one["configs"]  # the same rows, in the same order: none twice, none lost
    assert other["yaml"] == one["yaml"] and other["schemas"] == one["schemas"]
    assert os.listdir(driver_tmp) == []
