"""Publishing at scale: memory flat in the row count, an interrupted publish resumed without sending
a stored shard again, and `push`'s options for raw rollouts.

Functions without a `test_` prefix run in a client process (see conftest: `Identity.run`).
"""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import SYSTEM_PROMPT, TOOLS, seeded_rows, write_jsonl
from tests.hub.test_hub_cli import push

PUBLISH_ERROR = "whileai_datasets.errors.PublishError"


# --- client side ---------------------------------------------------------------------------------
def make_rows(path: str, n: int, tag: str) -> None:
    """`n` canonical rows whose texts are all different (no shared strings), saved with save_to_disk."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from datasets import Dataset
    from datasets import table as datasets_table

    ids = pa.array(range(n)).cast(pa.string())
    roles = ["system", "user", "assistant", "tool", "assistant"]

    def text(prefix: str, width: int) -> pa.Array:
        return pc.binary_join_element_wise(f"{tag} {prefix} ", ids, " " + "x" * width, "")

    contents = pa.concat_arrays([text("rules", 120), text("ask", 200), text("call", 40), text("result", 600),
                                 text("answer", 300)])  # message k of row i at k * n + i
    row_major = pa.array([k * n + i for i in range(n) for k in range(len(roles))])
    flat = pa.StructArray.from_arrays([pa.array(roles * n), contents.take(row_major)], names=["role", "content"])
    offsets = pa.array(range(0, 5 * n + 1, 5), pa.int32())
    messages = pa.ListArray.from_arrays(offsets, flat)
    mask = pa.ListArray.from_arrays(offsets, pa.array([0, 0, 1, 0, 1] * n, pa.int8()))
    table = pa.table({"messages": messages, "loss_mask": mask,
                      "scenario_id": pc.binary_join_element_wise("s", pa.array([i % 997 for i in range(n)]).cast(
                          pa.string()), "")})
    Dataset(datasets_table.InMemoryTable(table)).save_to_disk(path)


def publish_measured(path: str, repo_id: str, token: str, max_shard_size: str | None = None) -> dict[str, Any]:
    """Publish the saved rows split by scenario; the peak RSS of this process, in MB."""
    import resource

    from datasets import load_from_disk

    from whileai_datasets.hub import publish, split_by

    parts = split_by(load_from_disk(path), "scenario_id", test_size=0.1)
    result = dict(publish(parts, repo_id, token=token, split_key="scenario_id", max_shard_size=max_shard_size))
    result["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def publish_error(path: str, repo_id: str, token: str, max_shard_size: str) -> dict[str, Any]:
    """`publish_measured`, expected to fail: what it raised."""
    try:
        publish_measured(path, repo_id, token, max_shard_size)
    except Exception as err:  # noqa: BLE001  (the test checks its type and text)
        return {"type": f"{type(err).__module__}.{type(err).__qualname__}", "message": str(err)}
    return {"type": None, "message": ""}


def repo_shards(repo_id: str, token: str) -> dict[str, Any]:
    """The parquet files the head holds, with their LFS sha256."""
    from huggingface_hub import HfApi

    entries = HfApi(token=token).list_repo_tree(repo_id, repo_type="dataset", recursive=True, expand=True)
    return {e.path: e.lfs.sha256 for e in entries if e.path.endswith(".parquet") and getattr(e, "lfs", None)}


def load_configs(repo_id: str, token: str) -> dict[str, Any]:
    from datasets import load_dataset

    # rows, not to_list(): to_list() gives Json (the canonical messages) as text on datasets 4.x
    return {name: {split: list(part) for split, part in load_dataset(repo_id, name, token=token).items()}
            for name in ("default", "canonical")}


# --- memory ----------------------------------------------------------------------------------------
def test_peak_memory_of_a_publish_is_flat_in_the_row_count(alice, repo_id, tmp_path):
    small, large = 10_000, 40_000
    alice.run_each(*((make_rows, {"path": str(tmp_path / f"rows-{n}"), "n": n, "tag": f"{repo_id}-{n}"})
                     for n in (small, large)))

    peaks = {n: alice.run(publish_measured, path=str(tmp_path / f"rows-{n}"), repo_id=f"{repo_id}-{n}",
                          token=alice.token)["peak_mb"] for n in (small, large)}

    # Holding the splits (as publish did) costs ~10 MB per 1,000 of these rows: 300 MB more for 30,000 rows.
    assert peaks[large] - peaks[small] < 120, peaks


# --- resume ----------------------------------------------------------------------------------------
def test_a_publish_interrupted_mid_upload_resumes_without_resending_a_stored_shard(alice, hub, repo_id, tmp_path):
    path = str(tmp_path / "rows")
    stored_before_failure = 3
    # the fourth shard's upload fails, again on every retry: the publish stops there
    hub.fail("lfs-upload", "500", times=1000, skip=stored_before_failure, retry_after=0)
    mark = hub.mark()

    # the rows are made in the same client process (they send nothing to the server)
    _, error = alice.run_each((make_rows, {"path": path, "n": 3000, "tag": repo_id}),
                              (publish_error, {"path": path, "repo_id": repo_id, "token": alice.token,
                                               "max_shard_size": "200KB"}))

    first = [e for e in hub.requests(mark) if e["route"] == "lfs-upload"]
    assert error["type"] == PUBLISH_ERROR and "run publish again to retry" in error["message"], error
    assert [e["status"] for e in first if e["status"] == 200] == [200] * stored_before_failure
    assert "commit" not in [e["route"] for e in hub.requests(mark, repo=repo_id)]
    hub.clear_faults()
    mark = hub.mark()

    # the shards are listed in the same client process (listing uploads nothing)
    result, shards = alice.run_each((publish_measured, {"path": path, "repo_id": repo_id, "token": alice.token,
                                                        "max_shard_size": "200KB"}),
                                    (repo_shards, {"repo_id": repo_id, "token": alice.token}))

    second = [e for e in hub.requests(mark) if e["route"] == "lfs-upload"]
    assert hub.head(repo_id, alice.token) == result["commit"]
    assert len(shards) > stored_before_failure + 2
    # every shard went up exactly once over the two runs: the stored ones were not sent again
    assert len(second) == len(set(shards.values())) - stored_before_failure
    assert all(e["status"] == 200 for e in second)


# --- push: the options export takes for raw rollouts ------------------------------------------------
def test_push_takes_exports_options_for_raw_rollouts(alice, repo_id, tmp_path):
    source = write_jsonl(tmp_path / "run.jsonl", seeded_rows(seed=3, mode="sft", budget=10))
    (tmp_path / "system.txt").write_text(SYSTEM_PROMPT)
    (tmp_path / "tools.json").write_text(json.dumps(TOOLS))
    flags = ["--system-prompt-file", str(tmp_path / "system.txt"), "--tools", str(tmp_path / "tools.json"),
             "--max-tool-output-chars", "12"]
    alice.env_token = True

    done = alice.run(push, argv=[str(source), repo_id, *flags])
    exported = alice.run(export, argv=[str(source), str(tmp_path / "train.jsonl"), *flags])

    assert done["code"] == 0, done["stderr"]
    assert "warning" not in done["stderr"]
    assert exported["code"] == 0, exported["stderr"]
    rows = alice.run(load_configs, repo_id=repo_id, token=alice.token)["canonical"]["train"]
    written = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert [r["messages"] for r in rows] == [w["messages"] for w in written]  # what export writes, exactly
    assert all(r["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT} for r in rows)
    assert any(m["content"].endswith(" chars of tool output truncated]") for r in rows for m in r["messages"]
               if m["role"] == "tool")


def test_push_of_raw_rollouts_without_a_system_prompt_warns_naming_the_flag(alice, repo_id, tmp_path):
    source = write_jsonl(tmp_path / "run.jsonl", seeded_rows(seed=4, mode="sft", budget=6))
    alice.env_token = True

    done = alice.run(push, argv=[str(source), repo_id])

    assert done["code"] == 0, done["stderr"]
    assert "warning:" in done["stderr"] and "rows have no system message" in done["stderr"]
    assert "--system-prompt-file" in done["stderr"]


def test_push_refuses_raw_rollout_options_on_exported_rows(saved_rollouts, capsys, tmp_path):
    (tmp_path / "system.txt").write_text("rules")
    from whileai_datasets.cli.main import main

    code = main(["push", saved_rollouts, "alice/x", "--system-prompt-file", str(tmp_path / "system.txt")])

    assert code == 1
    assert "--system-prompt-file shape raw rollouts, but SOURCE holds rows already exported" in capsys.readouterr().err


def export(argv: list[str]) -> dict[str, Any]:
    import contextlib
    import io

    from whileai_datasets.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["export", *argv, "--json"])
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}

