"""The JSONL writer's direct (O_DIRECT) file: the bytes on disk are exactly
the bytes written, whatever the sizes of the pieces and wherever the stage
boundaries fall; where the file system refuses direct writes, the file is
written the ordinary way with the same bytes."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from whileai_datasets.shaping import direct_file
from whileai_datasets.shaping.direct_file import ALIGN, STAGE_BYTES, DirectFile, open_for_writing

SIZES = [0, 1, ALIGN - 1, ALIGN, ALIGN + 1, STAGE_BYTES - 1, STAGE_BYTES, STAGE_BYTES + 1, 3 * STAGE_BYTES + 12345]


def _write(path: Path, pieces: list[bytes]) -> object:
    handle = open_for_writing(str(path))
    for piece in pieces:
        assert handle.write(memoryview(piece)) == len(piece)
    handle.close()
    return handle


@pytest.mark.parametrize("size", SIZES)
def test_the_file_holds_exactly_the_bytes_written(tmp_path: Path, size: int) -> None:
    rng = random.Random(size)
    data = rng.randbytes(size)
    cuts = sorted(rng.randrange(size + 1) for _ in range(7))
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, size])]
    _write(tmp_path / "out.jsonl", pieces)
    assert (tmp_path / "out.jsonl").read_bytes() == data


def test_an_existing_file_is_replaced_not_overlaid(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_bytes(b"x" * (2 * STAGE_BYTES))
    _write(path, [b'{"a": 1}\n'])
    assert path.read_bytes() == b'{"a": 1}\n'


def test_without_o_direct_the_file_is_written_the_ordinary_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the OS has no O_DIRECT (macOS, Windows), an ordinary file with the same bytes."""
    monkeypatch.delattr(os, "O_DIRECT", raising=False)
    path = tmp_path / "out.jsonl"
    handle = _write(path, [b"one\n", b"two\n" * 5000])
    assert not isinstance(handle, DirectFile)
    assert path.read_bytes() == b"one\n" + b"two\n" * 5000


@pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="O_DIRECT is Linux's")
def test_where_the_file_system_takes_it_the_file_is_written_direct(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_DIRECT))
    except OSError:
        pytest.skip("this file system refuses O_DIRECT")
    handle = _write(tmp_path / "out.jsonl", [b"x" * (STAGE_BYTES + 3)])
    assert isinstance(handle, DirectFile)
    assert (tmp_path / "out.jsonl").stat().st_size == STAGE_BYTES + 3


def test_the_export_writes_the_same_file_direct_and_buffered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import whileai_datasets
    from tests.conftest import seeded_rows, write_jsonl
    from whileai_datasets.shaping import writer

    path = write_jsonl(tmp_path / "run.jsonl", seeded_rows(seed=3, mode="rl", repeats=2, budget=120))
    options = {"unroll": True, "max_tool_output_chars": 200, "validate": False}
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    whileai_datasets.export_dataset(str(path), str(tmp_path / "direct.jsonl"), **options)
    monkeypatch.setattr(writer, "DIRECT_WRITES", False)
    whileai_datasets.export_dataset(str(path), str(tmp_path / "buffered.jsonl"), **options)
    direct = (tmp_path / "direct.jsonl").read_bytes()
    assert direct == (tmp_path / "buffered.jsonl").read_bytes()
    assert direct.count(b"\n") > 100 and direct.endswith(b"\n")
    assert not list(tmp_path.glob(".direct.jsonl.*")) and not list(tmp_path.glob(".buffered.jsonl.*"))  # no temp left


def test_the_stage_is_a_multiple_of_the_alignment() -> None:
    assert STAGE_BYTES % ALIGN == 0 and direct_file.ALIGN >= 512
