"""URIs in and out on the local engine, against a local S3-protocol server (tests/support/s3_server.py): what a URI
names is read and written through pyarrow.fs, equal to the local files; a bad scheme, a missing bucket or
object and denied credentials are named with the URI; nothing is folded into an ``s3:/bucket`` folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import SYSTEM_PROMPT, seeded_rows, write_jsonl
from tests.support.s3_server import Bucket
from whileai_datasets import ExportFormatError, WriteError, audit, cli, export_dataset


@pytest.fixture
def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return write_jsonl(tmp_path / "in.jsonl", seeded_rows(seed=1))


def test_export_reads_and_writes_objects_equal_to_the_local_export(s3: Bucket, source: Path, tmp_path: Path) -> None:
    uri = s3.put(source, "runs/in.jsonl")
    local = export_dataset(str(source), "local.jsonl", system_prompt=SYSTEM_PROMPT, validate=False)
    ours = export_dataset(uri, s3.uri("out/train.jsonl"), system_prompt=SYSTEM_PROMPT, validate=False)
    assert s3.get("out/train.jsonl") == (tmp_path / "local.jsonl").read_bytes()
    assert ours["path"] == s3.uri("out/train.jsonl")
    assert {k: v for k, v in ours.items() if k != "path"} == {k: v for k, v in local.items() if k != "path"}
    # no output given: whileai's default name, beside the object
    export_dataset(uri, system_prompt=SYSTEM_PROMPT, validate=False, filesystem=s3.filesystem())
    assert s3.get("runs/in.train.jsonl") == s3.get("out/train.jsonl")
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl", "local.jsonl"]  # no s3:/bucket folder tree


def test_the_cli_exports_between_uris_and_the_audit_of_an_object_equals_the_files(
        s3: Bucket, source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = s3.put(source, "runs/in.jsonl")
    assert cli.main(["export", uri, s3.uri("out/train.parquet"), "--no-validate", "--json"]) == 0
    assert cli.main(["export", str(source), "local.parquet", "--no-validate", "--json"]) == 0
    import pyarrow.parquet as pq

    written = pq.read_table(f"{s3.name}/out/train.parquet", filesystem=s3.filesystem())
    assert written.to_pylist() == pq.read_table(tmp_path / "local.parquet").to_pylist()
    capsys.readouterr()
    assert cli.main(["audit", s3.uri("runs/"), "--system-prompt", SYSTEM_PROMPT, "--json"]) == 0
    by_prefix = json.loads(capsys.readouterr().out)
    by_uri = audit(uri, system_prompt=SYSTEM_PROMPT).to_dict()
    by_file = audit(str(source), system_prompt=SYSTEM_PROMPT).to_dict()
    assert by_prefix["source"] == s3.uri("runs/") and by_prefix["rows"] == by_file["rows"] == 24
    assert by_uri.pop("source") == uri
    by_file.pop("source")
    text = json.dumps(by_uri, sort_keys=True)
    assert "whileai-" not in text and f'"file": "{uri}"' in text  # rows are named by the object, not a temp copy
    assert text == json.dumps(by_file, sort_keys=True).replace(str(source), uri)
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl", "local.parquet"]


def test_bad_uris_missing_buckets_and_denied_credentials_are_named(s3: Bucket, source: Path, tmp_path: Path) -> None:
    uri = s3.put(source, "runs/in.jsonl")
    options = {"system_prompt": SYSTEM_PROMPT, "validate": False}
    with pytest.raises(ExportFormatError, match=r"^nope://b/in\.jsonl: nope:// is not a scheme pyarrow\.fs or fsspec"):
        export_dataset("nope://b/in.jsonl", "out.jsonl", **options)
    with pytest.raises(ExportFormatError, match=r"^s3://no-such-bucket-x/in\.jsonl: no such bucket 'no-such-bucket-x'"
                                                r".*Create the bucket"):
        export_dataset("s3://no-such-bucket-x/in.jsonl", "out.jsonl", **options)
    with pytest.raises(WriteError, match=r"^s3://no-such-bucket-x/o\.jsonl: no such bucket .*cannot write"):
        export_dataset(str(source), "s3://no-such-bucket-x/o.jsonl", **options)
    with pytest.raises(ExportFormatError, match=rf"^{s3.uri('runs/missing')}\.jsonl: no such object"):
        export_dataset(s3.uri("runs/missing.jsonl"), "out.jsonl", **options)
    with s3.auth_enforced(), pytest.raises(ExportFormatError, match=rf"^{uri}: access denied: the credentials may "
                                                                    r"not read this URI.*AWS_ACCESS_KEY_ID"):
        export_dataset(uri, "out.jsonl", **options)
    with s3.auth_enforced(), pytest.raises(ExportFormatError, match=r"access denied.*pass filesystem="):
        export_dataset(uri, "out.jsonl", filesystem=s3.filesystem(secret="wrong-secret"), **options)
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl"]  # no s3:/ or nope:/ folder tree, no output
    assert s3.listing() == ["runs/in.jsonl"]


def test_an_output_uri_that_is_the_input_uri_is_refused(s3: Bucket, source: Path) -> None:
    uri = s3.put(source, "runs/in.jsonl")
    with pytest.raises(ExportFormatError, match=r"would write over the input .*the same URI"):
        export_dataset(uri, uri, system_prompt=SYSTEM_PROMPT, validate=False)
    assert s3.get("runs/in.jsonl") == source.read_bytes()


def test_a_staging_prefix_left_by_a_dead_export_is_removed_by_the_next_one(s3: Bucket, source: Path) -> None:
    """A Ray export's driver killed mid-job leaves its parts under a hidden prefix beside OUT; the next export
    to OUT removes it (its owner process is gone), and never one of a live export."""
    import subprocess
    import sys

    from whileai_datasets import _files, _storage

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    dead = f"out/.train.jsonl.whileai-{_files.owner_tag(int(done.stdout))}0000.tmp/part-00000.jsonl"
    live = f"out/.train.jsonl.whileai-{_files.owner_tag()}1111.tmp/part-00000.jsonl"
    for key in (dead, live):
        s3.put(source, key)
    staging = _storage.ObjectStaging(s3.uri("out/train.jsonl"))
    assert staging.swept == [s3.uri(dead.rsplit("/", 1)[0])]
    assert [k for k in s3.listing() if not k.endswith("/")] == [live]  # a live export's staging is kept
