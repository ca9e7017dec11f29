"""Export, tokenize and the audit on a real three-node Ray cluster that loses a worker node mid-job.

The cluster (tests/support/ray_cluster.py) is one for the module: a head node with no CPUs where this process's driver
runs, and two one-CPU worker nodes. Each test kills a worker node (raylet and workers at once, no graceful
shutdown) once part of the job is done and tasks and actors are in flight, and a fresh node joins, as spot
capacity comes and goes; the job's output must equal the local engine's, with nothing left behind.
"""

from __future__ import annotations

import glob
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests.support import ray_cluster
from tests.conftest import SYSTEM_PROMPT, TOOLS, seeded_rows, write_jsonl

pytest.importorskip("ray.data")

import ray

import whileai_datasets
from whileai_datasets import audit, ray_engine
from whileai_datasets.auditing.on_ray import audit_on_ray

pytestmark = [pytest.mark.ray, pytest.mark.cluster,
              pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")]
KEY = ["source_file", "source_offset"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[ray_cluster.ThreeNodes]:
    with ray_cluster.three_nodes() as nodes:
        yield nodes


@pytest.fixture(scope="module")
def rows_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = seeded_rows(seed=7, mode="rl", repeats=2, budget=24)
    # copies with their scenarios renamed, so that groups of several sizes span the blocks
    rows = [{**row, "scenario_id": f"{row.get('scenario_id')}-{c % 3}"} for c in range(8) for row in base]
    return write_jsonl(tmp_path_factory.mktemp("cluster") / "run.jsonl", rows)


def left_behind(folder: Path, keep: set[str]) -> list[str]:
    """Whatever a job left in ``folder`` besides ``keep`` (staging folders, temp files)."""
    return sorted(name for name in os.listdir(folder) if name not in keep)


def test_every_node_of_the_cluster_listens_on_loopback_only(cluster: ray_cluster.ThreeNodes) -> None:
    addresses = ray_cluster.listening_addresses(ray_cluster.started_processes())
    assert addresses  # the GCS, the raylets and their object managers at least
    assert [a for a in addresses if not ray_cluster.is_loopback(a)] == []
    assert len([n for n in ray.nodes() if n["Alive"]]) == 3
    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}


def test_export_survives_a_lost_node_with_the_local_bytes(cluster: ray_cluster.ThreeNodes, rows_file: Path,
                                                           tmp_path: Path) -> None:
    options: dict[str, Any] = {"system_prompt": SYSTEM_PROMPT, "tools": TOOLS, "max_tool_output_chars": 40,
                               "validate": False}
    local = whileai_datasets.export_dataset(str(rows_file), str(tmp_path / "local.jsonl"), **options)
    out = tmp_path / "ray.jsonl"
    killed = len(cluster.killed)
    # the parts are staged in a hidden temp folder beside OUT: the node dies once the first part is there
    with cluster.kill_when(lambda: bool(glob.glob(f"{tmp_path}/.ray.jsonl.*/part-*"))):
        ours = ray_engine.export_training(rows_file, out, **options, range_bytes=16 << 10, block_bytes=8 << 10)
    assert len(cluster.killed) == killed + 1  # a node did die mid-job
    parts = sorted(os.listdir(out))  # a dead task's temp file would be here: none is
    assert len(parts) > 3 and all(name.startswith("part-") and name.endswith(".jsonl") for name in parts)
    assert b"".join((out / name).read_bytes() for name in parts) == (tmp_path / "local.jsonl").read_bytes()
    assert {k: v for k, v in ours.items() if k != "path"} == {k: v for k, v in local.items() if k != "path"}
    assert left_behind(tmp_path, {"local.jsonl", "ray.jsonl"}) == []


def test_tokenize_survives_a_lost_node_with_the_local_rows(cluster: ray_cluster.ThreeNodes, rows_file: Path,
                                                           tokenizer_dir: Path, tmp_path: Path) -> None:
    import datasets
    from transformers import AutoTokenizer

    from whileai_datasets.tokenize.token_masks import tokenize

    ds = ray_engine.read_whileai(rows_file, system_prompt=SYSTEM_PROMPT, tools=TOOLS, row_key=True,
                                 range_bytes=16 << 10, block_bytes=8 << 10)
    killed = len(cluster.killed)
    tables = []
    for table in ray_engine.tokenize(ds, tokenizer_dir, concurrency=1, batch_size=16).iter_batches(
            batch_format="pyarrow", batch_size=None):
        tables.append(table)
        if len(tables) == 2:  # two blocks done, the actor busy with more, reads in flight
            cluster.kill_worker()
    assert len(cluster.killed) == killed + 1
    ours = pa.concat_tables(t for t in tables if t.num_rows)
    order = pc.sort_indices(ours, sort_keys=[(k, "ascending") for k in KEY])
    loaded = datasets.load_dataset("whileai/export", data_files=str(rows_file), split="train",
                                   cache_dir=str(tmp_path / "cache"), system_prompt=SYSTEM_PROMPT,
                                   tools=json.loads(json.dumps(TOOLS)))
    local = tokenize(AutoTokenizer.from_pretrained(str(tokenizer_dir)))(loaded.with_format("arrow")[:])
    assert ours.num_rows == local.num_rows > 50  # no row twice, none lost
    assert ours.take(order).drop_columns(KEY).to_pylist() == local.to_pylist()


def test_audit_survives_a_lost_node_with_the_local_figures(cluster: ray_cluster.ThreeNodes, rows_file: Path,
                                                           tokenizer_dir: Path) -> None:
    from transformers import AutoTokenizer

    from whileai_datasets.auditing import counting

    local = audit(str(rows_file), tokenizer=AutoTokenizer.from_pretrained(str(tokenizer_dir)), max_length=64,
                  system_prompt=SYSTEM_PROMPT).to_dict()
    killed = len(cluster.killed)
    seen: list[int] = []

    def kill_after_two_blocks(done: int, total: int | None) -> None:
        seen.append(done)
        if len(seen) == 2:  # two blocks counted, the two actors busy with more
            cluster.kill_worker()

    options = counting.checked_options(tokenized=True, system_prompt=SYSTEM_PROMPT, tools=None, strip_think=False,
                                       mask_mode="assistant", unroll=False, max_tool_output_chars=None,
                                       format="openai", max_length=64, on_bad_row="raise")
    found = audit_on_ray(str(rows_file), tokenizer=str(tokenizer_dir), template=None, options=options,
                         progress=kill_after_two_blocks, concurrency=2, range_bytes=16 << 10, block_bytes=8 << 10)
    assert len(cluster.killed) == killed + 1 and len(seen) > 2
    mine, local = (json.loads(json.dumps(d, default=str)) for d in (found.to_dict(), local))
    for name, histogram in local["histograms"].items():
        assert mine["histograms"][name].pop("mean") == pytest.approx(histogram.pop("mean"), rel=1e-12)
    assert mine == local


def test_json_stays_alone_on_stdout_whatever_ray_prints(cluster: ray_cluster.ThreeNodes,
                                                        capfd: pytest.CaptureFixture[str]) -> None:
    """The CLI's runtime sends what Ray forwards from its workers (and its own lines) to stderr."""
    from whileai_datasets.cli import ray_options

    @ray.remote(num_cpus=1)
    def noisy() -> int:
        print("a line a worker printed")
        return 1

    err = ""
    with ray_options.runtime(None):
        assert ray.get(noisy.remote()) == 1
        end = time.monotonic() + 30
        while "a line a worker printed" not in err and time.monotonic() < end:  # forwarded in batches
            time.sleep(0.2)
            out, more = capfd.readouterr()
            assert out == ""
            err += more
    print(json.dumps({"ok": True}))
    out, more = capfd.readouterr()
    assert "a line a worker printed" in err
    assert json.loads(out) == {"ok": True}
