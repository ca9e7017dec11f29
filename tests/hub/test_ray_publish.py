"""`push --engine ray`: the workers build the shards, the driver commits; the repo equals a local push's.

Functions without a `test_` prefix run in a client process (see conftest: `Identity.run`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import SYSTEM_PROMPT, seeded_rows, write_jsonl
from tests.hub.test_hub_cli import push

pytest.importorskip("ray.data")
pytestmark = pytest.mark.ray


def push_on_ray(argv: list[str], source: str, repo_id: str, front_repo_id: str, system: str,
                staging: str) -> dict[str, Any]:
    """`push ... --engine ray` with `argv`; `ray_engine.publish_rollouts` of `source` to `repo_id` in small
    blocks (several shards per split, gathered in file order), written by the workers to `staging`; and the
    front door's `publish_rollouts(engine="ray")` to `front_repo_id`, on one local Ray runtime."""
    import warnings

    import ray

    # Ray Data's DataContext warns about its own deprecated fields while it initialises them
    warnings.filterwarnings("ignore", category=DeprecationWarning, module="ray.data.context")
    import whileai_datasets
    from whileai_datasets.hub import HoldOut
    from whileai_datasets.ray_engine.publish import publish_rollouts

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        done = push(argv)
        options = whileai_datasets.TrainingOptions.whileai_export(system_prompt=system, max_tool_output_chars=40)
        blocks = publish_rollouts(source, repo_id, options, hold_out=HoldOut("scenario_id", test_size=0.3),
                                  staging=staging, range_bytes=64 << 10, block_bytes=16 << 10)
        front = whileai_datasets.publish_rollouts(source, front_repo_id, system_prompt=system, max_tool_output_chars=40,
                                                  split_key="scenario_id", test_size=0.3, engine="ray")
        return {**done, "blocks": dict(blocks), "front": dict(front)}
    finally:
        ray.shutdown()


def repo_view(repo_id: str, token: str) -> dict[str, Any]:
    """Every config's rows and features, the card's YAML, the files per config folder and their schemas."""
    import pyarrow.parquet as pq
    from datasets import load_dataset
    from huggingface_hub import DatasetCard, HfApi, hf_hub_download

    api = HfApi(token=token)
    card = DatasetCard.load(hf_hub_download(repo_id, "README.md", repo_type="dataset", token=token))
    files = sorted(api.list_repo_files(repo_id, repo_type="dataset"))
    schemas = {f.split("/")[0]: str(pq.read_schema(hf_hub_download(repo_id, f, repo_type="dataset", token=token)))
               for f in files if f.endswith(".parquet")}
    configs = {}
    for name in ("default", "canonical", "messages", "sharegpt"):
        loaded = load_dataset(repo_id, name, token=token)
        configs[name] = {split: {"rows": list(part), "features": repr(part.features)}  # Json decoded on 4.x too
                         for split, part in loaded.items()}
    data = card.data.to_dict()
    return {"configs": configs, "yaml": {k: data[k] for k in ("configs", "dataset_info")},
            "folders": sorted({f.split("/")[0] for f in files}), "schemas": schemas}


def repo_views(repo_ids: list[str], token: str) -> list[dict[str, Any]]:
    """`repo_view` of each repo, in one client process (its imports are paid once)."""
    return [repo_view(repo_id, token) for repo_id in repo_ids]


def test_push_on_ray_publishes_the_repo_a_local_push_publishes(alice, tmp_path):
    rows = seeded_rows(seed=5, mode="rl", repeats=2, budget=16)
    for row in rows[-3::2]:  # two assistant turns in a row late in the file: a trainer gap in a later block
        row["messages"].append({"role": "assistant", "content": "Anything else I can do?"})
    source = write_jsonl(tmp_path / "run.jsonl", rows)
    (tmp_path / "system.txt").write_text(SYSTEM_PROMPT)
    staging = tmp_path / "staging"  # a folder every node would mount
    staging.mkdir()
    options = ["--split-by", "scenario_id", "--test-size", "0.3", "--system-prompt-file", str(tmp_path / "system.txt"),
               "--max-tool-output-chars", "40", "--json"]
    name = tmp_path.name[-8:]
    local, on_ray, in_blocks = f"alice/local-{name}", f"alice/ray-{name}", f"alice/blocks-{name}"
    front = f"alice/front-{name}"
    alice.env_token = True
    alice.timeout = 900

    by_local = alice.run(push, argv=[str(source), local, *options])
    by_ray = alice.run(push_on_ray, argv=[str(source), on_ray, *options, "--engine", "ray"], source=str(source),
                       repo_id=in_blocks, front_repo_id=front, system=SYSTEM_PROMPT, staging=str(staging))

    assert by_local["code"] == 0, by_local["stderr"]
    assert by_ray["code"] == 0, by_ray["stderr"]
    assert json.loads(by_ray["stdout"])["configs"] == json.loads(by_local["stdout"])["configs"]
    assert by_ray["blocks"]["configs"] == json.loads(by_local["stdout"])["configs"] == by_ray["front"]["configs"]
    trainers = json.loads(by_local["stdout"])["trainers"]
    doubled = trainers["ms-swift"]["inexact"]["consecutive_assistant_turns"]
    assert json.loads(by_ray["stdout"])["trainers"] == trainers == by_ray["blocks"]["trainers"]
    one, *others = alice.run(repo_views, repo_ids=[local, on_ray, in_blocks, front], token=alice.token)
    # the first doubled turn, located in its split: the rows of the blocks before it counted
    located = [f"split {split!r}, row {i}, messages[{len(r['messages']) - 1}]"
               for split in ("train", "holdout") for i, r in enumerate(one["configs"]["canonical"][split]["rows"])
               if [m["role"] for m in r["messages"][-2:]] == ["assistant", "assistant"]]
    assert doubled == {"rows": 2, "first": located[0], "effect": doubled["effect"]} and len(located) == 2
    assert set(one["configs"]["canonical"]) == {"train", "holdout"}
    assert len(others) == 3
    for other in others:
        assert other["configs"] == one["configs"]  # the same rows, in the same order, with the same features
        assert other["yaml"] == one["yaml"]
        assert other["folders"] == one["folders"]
        assert {"README.md", "canonical", "data", "messages", "sharegpt"} <= set(one["folders"])
        assert other["schemas"] == one["schemas"]
    assert list(staging.iterdir()) == []  # the staged shards went into the commit, their folder with them


def publish_both_warned(source: str, local_repo: str, ray_repo: str) -> dict[str, Any]:
    """`publish_rollouts` of `source` on each engine, with the `UnreadKeysWarning`s each raised (message, file)."""
    import warnings

    import ray

    import whileai_datasets

    said = {}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        for engine, repo_id in (("local", local_repo), ("ray", ray_repo)):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                whileai_datasets.publish_rollouts(source, repo_id, engine=engine)
            said[engine] = [(str(w.message), w.filename) for w in caught
                            if w.category is whileai_datasets.UnreadKeysWarning]
    finally:
        ray.shutdown()
    return said


def test_the_ray_publish_says_unread_keys_as_the_local_publish(alice, tmp_path):
    rows = seeded_rows(seed=6, mode="rl", budget=8)
    marked = [1, len(rows) - 2]
    for i in marked:
        message = dict(rows[i]["messages"][-1])
        message["contnet"] = message.pop("content", None) or "misspelt"
        rows[i] = {**rows[i], "messages": [*rows[i]["messages"][:-1], message]}
    source = write_jsonl(tmp_path / "run.jsonl", rows)
    alice.env_token = True
    alice.timeout = 600
    name = tmp_path.name[-8:]

    said = alice.run(publish_both_warned, source=str(source), local_repo=f"alice/warned-local-{name}",
                     ray_repo=f"alice/warned-ray-{name}")

    (local, _), = said["local"]
    (ours, where), = said["ray"]
    assert where == __file__  # the caller's line, not the package's
    assert ours.startswith(f"{source}: ") and "message key 'contnet' in 2 message(s)" in ours
    assert ours.split(": ", 1)[1] == local.split(": ", 1)[1]  # all but where: the local names its split
