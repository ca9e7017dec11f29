"""``_files``: the temp names' owners and the sweep, and a folder of parts
swapped in whole (the Ray export's output) or refused when another export got
there first. The export-level faults are in tests/export/test_faults_io.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from whileai_datasets import _files
from whileai_datasets.errors import WriteError


def test_the_sweep_removes_only_temps_of_dead_owners_on_this_host(tmp_path: Path) -> None:
    finished = subprocess.Popen(["true"])
    finished.wait()
    names = {
        "dead": f".out.jsonl.whileai-{_files.owner_tag(finished.pid)}abcd.tmp",
        "alive": f".out.jsonl.whileai-{_files.owner_tag()}abcd.tmp",
        "other host": f".out.jsonl.whileai-{finished.pid}-{_files._BOOT}-00000000-abcd.tmp",
        "not ours": ".out.jsonl.whileai-notes.txt",
        "another target": f".in.jsonl.whileai-{_files.owner_tag(finished.pid)}abcd.tmp",
    }
    for name in names.values():
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "out.jsonl").write_bytes(b"old\n")
    replacement = _files.Replacement(tmp_path / "out.jsonl")
    replacement.discard()
    assert replacement.swept == [str(tmp_path / names["dead"])]
    assert sorted(os.listdir(tmp_path)) == sorted({*names.values(), "out.jsonl"} - {names["dead"]})


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two renames"])
def test_a_part_directory_is_swapped_in_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exchange: bool) -> None:
    if not exchange:
        monkeypatch.setattr(_files, "_exchange", lambda first, second: False)
    target = tmp_path / "train.parquet"
    target.mkdir()
    (target / "part-00000.parquet").write_bytes(b"old part")
    staging = _files.Replacement(target, folder=True)
    (Path(staging.path) / "part-00000.parquet").write_bytes(b"new part 0")
    (Path(staging.path) / "part-00001.parquet").write_bytes(b"new part 1")
    assert staging.commit() == str(target)
    staging.discard()
    assert {p.name: p.read_bytes() for p in target.iterdir()} == {
        "part-00000.parquet": b"new part 0", "part-00001.parquet": b"new part 1"}
    assert sorted(os.listdir(tmp_path)) == ["train.parquet"]


def test_a_part_directory_changed_meanwhile_is_not_replaced(tmp_path: Path) -> None:
    target = tmp_path / "train.parquet"
    staging = _files.Replacement(target, folder=True)
    target.mkdir()  # another export put its parts there first
    (target / "part-00000.parquet").write_bytes(b"theirs")
    with pytest.raises(WriteError, match=r"train\.parquet: not replaced: another writer replaced this file while "
                                         r"this one ran \(it did not exist when this one started\)"):
        staging.commit()
    assert [p.read_bytes() for p in target.iterdir()] == [b"theirs"]
    assert sorted(os.listdir(tmp_path)) == ["train.parquet"]
