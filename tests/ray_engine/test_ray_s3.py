"""The Ray engine on object storage (a local S3-protocol server, tests/support/s3_server.py): read tasks open the
objects themselves and the parts are staged in the bucket, so no node needs a shared mount. Export, the audit
and tokenize give the local engine's output of the same file; nothing is staged or folded into a local
``s3:/`` folder afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.support import ray_session
from tests.conftest import SYSTEM_PROMPT, TOOLS, seeded_rows, write_jsonl
from tests.support.s3_server import Bucket

pytest.importorskip("ray.data")
pytestmark = [pytest.mark.ray, pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")]

import ray

import whileai_datasets
from whileai_datasets import WriteError, ray_engine
from whileai_datasets.auditing.on_ray import audit_on_ray

ray_runtime = pytest.fixture(scope="module", autouse=True)(ray_session.local_runtime)
SMALL = {"range_bytes": 24 << 10, "block_bytes": 8 << 10}  # several read tasks, so several parts


@pytest.fixture(scope="module")
def rows_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = seeded_rows(seed=4, mode="rl", repeats=3, budget=40)
    return write_jsonl(tmp_path_factory.mktemp("ray-s3") / "run.jsonl", rows)


def _parts(bucket: Bucket, prefix: str) -> list[str]:
    """The objects under ``prefix`` (not the empty folder marker pyarrow keeps once a folder's files are gone)."""
    return [k for k in bucket.listing() if k.startswith(prefix + "/") and not k.endswith("/")]


def test_export_from_and_to_s3_equals_the_local_export_and_stages_nothing(
        s3: Bucket, rows_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    uri = s3.put(rows_file, "runs/run.jsonl")
    options: dict[str, Any] = {"system_prompt": SYSTEM_PROMPT, "tools": TOOLS, "validate": False}
    local = whileai_datasets.export_dataset(str(rows_file), str(tmp_path / "local.jsonl"), **options)
    # the workers get the filesystem (they were started before this test's environment was set)
    ours = ray_engine.export_training(s3.uri("runs/"), s3.uri("out/train.jsonl"), filesystem=s3.filesystem(),
                                      **options, **SMALL)
    parts = _parts(s3, "out/train.jsonl")
    assert len(parts) > 1 and all(p.rsplit("/", 1)[1].startswith("part-") for p in parts)
    assert b"".join(s3.get(p) for p in parts) == (tmp_path / "local.jsonl").read_bytes()
    assert ours["path"] == s3.uri("out/train.jsonl")
    assert {k: v for k, v in ours.items() if k != "path"} == {k: v for k, v in local.items() if k != "path"}
    # a second export replaces the parts (one part now); nothing staged is left in the bucket
    ray_engine.export_training(uri, s3.uri("out/train.jsonl"), filesystem=s3.filesystem(), **options)
    assert len(_parts(s3, "out/train.jsonl")) == 1
    assert s3.get(_parts(s3, "out/train.jsonl")[0]) == (tmp_path / "local.jsonl").read_bytes()
    assert not [k for k in s3.listing() if ".whileai-" in k]
    assert sorted(os.listdir(tmp_path)) == ["local.jsonl"]


def test_a_missing_bucket_is_named_before_any_task(s3: Bucket, rows_file: Path) -> None:
    with pytest.raises(WriteError, match=r"^s3://no-such-bucket-y/out: no such bucket 'no-such-bucket-y'"):
        ray_engine.export_training(rows_file, "s3://no-such-bucket-y/out", system_prompt=SYSTEM_PROMPT,
                                   validate=False, filesystem=s3.filesystem())


def test_the_audit_and_tokenize_of_objects_equal_the_local_ones(s3: Bucket, rows_file: Path, tmp_path: Path) -> None:
    from tests.ray_engine.test_ray_tokenize import _local, _sorted
    from tests.support.tiny_lm import train_tokenizer, trl_template

    uri = s3.put(rows_file, "runs/run.jsonl")
    tokenizer = tmp_path / "tokenizer"
    built = train_tokenizer(rows_file.read_text().splitlines(), chat_template=trl_template("qwen2_5"))
    built.save_pretrained(tokenizer)
    ds = ray_engine.read_whileai(uri, system_prompt=SYSTEM_PROMPT, tools=TOOLS, row_key=True, block_bytes=16 << 10,
                                 filesystem=s3.filesystem())
    ours = ray_engine.tokenize(ds, tokenizer, concurrency=1, batch_size=16)
    table = pa.concat_tables(t for t in ray.get(ours.to_arrow_refs()) if t.num_rows)
    local = _local(rows_file, tokenizer, tmp_path / "cache")
    assert local.num_rows > 20
    assert _sorted(table) == local.to_pylist()

    from whileai_datasets.auditing.counting import checked_options

    options = {"system_prompt": SYSTEM_PROMPT, "tools": None, "strip_think": True, "mask_mode": "assistant",
               "unroll": False, "max_tool_output_chars": None, "format": "openai", "max_length": 64,
               "on_bad_row": "raise"}
    by_file = whileai_datasets.audit(str(rows_file), tokenizer=built, system_prompt=SYSTEM_PROMPT,
                                     strip_think=True, max_length=64).to_dict()
    by_uri = audit_on_ray(uri, tokenizer=built, template=None, options=checked_options(tokenized=True,
                          **options), concurrency=1, filesystem=s3.filesystem(), **SMALL).to_dict()
    assert by_uri["findings"]["truncated"]["rows"] > 0
    for name, histogram in by_file["histograms"].items():  # float sums added per block, not per chunk
        assert by_uri["histograms"][name].pop("mean") == pytest.approx(histogram.pop("mean"), rel=1e-12)
    assert json.dumps(by_uri, sort_keys=True) == json.dumps(by_file, sort_keys=True).replace(str(rows_file), uri)


def test_the_cli_exports_on_ray_with_credentials_from_the_environment(s3: Bucket, rows_file: Path,
                                                                       tmp_path: Path) -> None:
    """`export s3://... s3://... --engine ray --json` in a process of its own (its own Ray runtime, whose
    workers find the credentials in the environment): stdout is the report alone."""
    s3.put(rows_file, "runs/run.jsonl")
    whileai_datasets.export_dataset(str(rows_file), str(tmp_path / "local.jsonl"), system_prompt=SYSTEM_PROMPT,
                                    validate=False)
    (tmp_path / "system.txt").write_text(SYSTEM_PROMPT)
    argv = ["export", s3.uri("runs/run.jsonl"), s3.uri("cli/out.jsonl"), "--engine", "ray", "--no-validate",
            "--system-prompt-file", str(tmp_path / "system.txt"), "--json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]),
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", "import sys; from whileai_datasets import cli; "
                           "sys.exit(cli.main(sys.argv[1:]))", *argv], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["path"] == s3.uri("cli/out.jsonl") and report["n"] > 20
    parts = _parts(s3, "cli/out.jsonl")
    assert b"".join(s3.get(p) for p in parts) == (tmp_path / "local.jsonl").read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["local.jsonl", "system.txt"]
