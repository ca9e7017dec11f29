"""A URI (s3://, gs://) given where a local path is expected is refused by name, and nothing is created."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import SYSTEM_PROMPT, seeded_rows, write_jsonl
from whileai_datasets import ExportFormatError, cli, export_dataset


def test_the_cli_refuses_a_uri_for_in_or_out_and_creates_no_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "in.jsonl", seeded_rows(seed=1))
    for argv, name in ((["export", "s3://bucket/in.jsonl", "out.jsonl"], "IN"),
                       (["export", "in.jsonl", "gs://bucket/prefix/out.jsonl"], "OUT"),
                       (["push", "s3://bucket/in.jsonl", "me/repo"], "SOURCE")):
        with pytest.raises(SystemExit) as exited:
            cli.main(argv)
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert f"argument {name}: {argv[1] if name != 'OUT' else argv[2]}: " in err
        assert "URIs are not read or written here: expected a path on this machine" in err
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl"]  # no s3:/bucket or gs:/bucket folder tree


def test_export_dataset_names_a_uri_input_and_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    source = write_jsonl(tmp_path / "in.jsonl", seeded_rows(seed=1))
    with pytest.raises(ExportFormatError, match=r"^s3://bucket/in\.jsonl: s3:// URIs are not read or written here"):
        export_dataset("s3://bucket/in.jsonl", "out.jsonl", system_prompt=SYSTEM_PROMPT)
    with pytest.raises(ExportFormatError, match=r"^s3://bucket/out\.jsonl: s3:// URIs .*mount the bucket"):
        export_dataset(str(source), "s3://bucket/out.jsonl", system_prompt=SYSTEM_PROMPT, validate=False)
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl"]
