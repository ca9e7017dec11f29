"""Faults around the files an export writes: two exports racing to one path, a
full disk (the output's and the datasets cache's); kills are in
tests/export/test_faults_kill.py.

Each test checks what a user would find afterwards: one complete output or
the old file (never a mix), no temp file, and the exact error.
The full-disk tests mount a small file system (an ext4 loop device, which
takes the JSONL writer's O_DIRECT path, or a tmpfs) and are skipped with the
reason where the test may not mount one.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.support.export_runs import ROOT, Driver, export_argv, sample_file, temps
from whileai_datasets import _files
from whileai_datasets.errors import WriteError
from whileai_datasets.shaping import writer as export_writer

# ------------------------------------------------------------ a small file system


def _mount(point: Path, image: Path) -> str | None:
    """Mount a ~4 MB file system at ``point``; None, or why not."""
    if os.geteuid() != 0:
        return "mounting a small file system needs root"
    tools = shutil.which("mkfs.ext4") and shutil.which("mount")
    if tools:
        with open(image, "wb") as handle:
            handle.truncate(4 << 20)
        made = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True)
        if made.returncode == 0 and not subprocess.run(["mount", "-o", "loop", str(image), str(point)],
                                                       capture_output=True).returncode:
            return None
    tmpfs = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(point)], capture_output=True)
    return None if tmpfs.returncode == 0 else f"cannot mount a loop device or a tmpfs: {tmpfs.stderr.decode().strip()}"


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    point = tmp_path / "small"
    point.mkdir()
    why = _mount(point, tmp_path / "small.img")
    if why is not None:
        pytest.skip(why)
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


@pytest.fixture(scope="module")
def driver() -> Iterator[Driver]:
    with Driver() as running:
        yield running


# ------------------------------------------------------------ races


def _race_once(folder: Path, sizes: tuple[int, int], existing: bool) -> None:
    """Two writers (the export's own) opened on one path, then committed at once."""
    target = folder / "out.jsonl"
    if existing:
        target.write_bytes(b"old\n")
    barrier = threading.Barrier(2)
    outcome: dict[str, Any] = {}
    payloads = {}
    writers = {}
    for name, rows in zip("ab", sizes):
        payloads[name] = pa.array([f'{{"writer": "{name}", "i": {i}}}\n' for i in range(rows)])
        writers[name] = export_writer.open_writer(str(target), export_writer.TRAINING_NULLS)

    def run(name: str) -> None:
        writer = writers[name]
        try:
            writer.write_encoded(payloads[name])
            barrier.wait()
            outcome[name] = writer.commit()
        except WriteError as err:
            outcome[name] = err
        finally:
            writer.abort()

    threads = [threading.Thread(target=run, args=(name,)) for name in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [name for name in "ab" if isinstance(outcome[name], str)]
    assert len(winners) == 1, outcome
    (loser,) = set("ab") - set(winners)
    assert "not replaced: another writer replaced this file while this one ran" in str(outcome[loser])
    lines = target.read_text().splitlines()
    assert len(lines) == len(payloads[winners[0]]) and {json.loads(line)["writer"] for line in lines} == set(winners)
    assert temps(folder) == []


def test_two_writers_to_one_path_leave_one_whole_file_and_say_whose(tmp_path: Path) -> None:
    rng = random.Random(21)
    for round_ in range(30):
        small, big = rng.randrange(1, 50), rng.randrange(5_000, 30_000)
        _race_once(tmp_path, (small, big) if round_ % 2 else (big, small), existing=round_ % 3 == 0)


def test_two_export_commands_to_one_path_one_wins_and_the_other_says_so(driver: Driver, tmp_path: Path) -> None:
    # both open the output before reading their input, so their writes overlap whichever finishes first
    inputs = {"small": sample_file(tmp_path / "small.jsonl", 150_000),
              "big": sample_file(tmp_path / "big.jsonl", 900_000)}
    out = tmp_path / "out" / "train.jsonl"
    pids = {name: driver.start(export_argv(path, out), tmp_path / f"cache-{name}", tmp_path / f"{name}.log")
            for name, path in inputs.items()}
    codes = {name: driver.wait(pid) for name, pid in pids.items()}
    logs = {name: (tmp_path / f"{name}.log").read_text() for name in inputs}
    assert sorted(codes.values()) == [0, 1], logs
    winner = next(name for name, code in codes.items() if code == 0)
    loser = next(name for name, code in codes.items() if code == 1)
    reported = re.search(r"^n_written\s+(\d+)$", logs[winner], re.MULTILINE)
    assert reported is not None
    lines = out.read_text().splitlines()
    assert len(lines) == int(reported.group(1)) and all(json.loads(line)["messages"] for line in lines)
    assert re.search(rf"^whileai-datasets export: {re.escape(str(out))}: not replaced: another writer replaced "
                     r"this file while this one ran .* this one's output was discarded\.", logs[loser], re.MULTILINE)
    assert "Traceback" not in logs[loser] and temps(out.parent) == []


# ------------------------------------------------------------ a full disk

FULL = (r"cannot write: no space left on device \([\d.]+ MB written\); the existing file is untouched\. "
        r"Free space on the file system that holds {folder} \([\d.,]+ (MB|bytes) free now\), or write to another one\.")


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_full_disk_leaves_the_old_file_and_no_temp(driver: Driver, small_fs: Path, tmp_path: Path,
                                                      suffix: str) -> None:
    source = sample_file(tmp_path / "run.jsonl", 4_000_000 if suffix == ".jsonl" else 8_000_000)
    out = small_fs / f"train{suffix}"
    out.write_bytes(b"the previous export\n")
    free_before = shutil.disk_usage(small_fs).free
    code = driver.wait(driver.start(export_argv(source, out), tmp_path / "cache", tmp_path / "log"))
    log = (tmp_path / "log").read_text()
    assert code == 1
    (line,) = [text for text in log.splitlines() if text.startswith("whileai-datasets export:")]
    expected = rf"whileai-datasets export: {re.escape(str(out))}: " + FULL.format(folder=re.escape(str(small_fs)))
    assert re.fullmatch(expected, line), line
    assert "Traceback" not in log
    assert out.read_bytes() == b"the previous export\n"
    assert sorted(set(os.listdir(small_fs)) - {"lost+found"}) == [out.name]
    assert shutil.disk_usage(small_fs).free >= free_before - (64 << 10)  # the temp's blocks were given back


def test_a_full_disk_under_a_small_output_writer_raises_write_error(small_fs: Path) -> None:
    target = small_fs / "page.html"
    with pytest.raises(WriteError, match=r"page\.html: cannot write: no space left on device .*; no file was left"):
        _files.write_text(target, "x" * (8 << 20))
    assert os.listdir(small_fs) in (["lost+found"], [])


def test_a_full_datasets_cache_names_the_cache_and_how_to_move_it(small_fs: Path, tmp_path: Path) -> None:
    source = sample_file(tmp_path / "run.jsonl", 4_000_000)
    cache = small_fs / "cache"
    env = {**os.environ, "HF_DATASETS_CACHE": str(cache)}
    command = [sys.executable, "-m", "whileai_datasets.cli.main", *export_argv(source, tmp_path / "out.jsonl")]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert re.search(rf"^whileai-datasets export: {re.escape(str(cache))}: cannot write the datasets cache: no space "
                     r"left on device while writing the Arrow files of the split; the partial files were removed and "
                     r"no dataset was returned\. Free space there, or move the cache to a disk with room: set "
                     r"HF_DATASETS_CACHE=/path/with/room \(or pass cache_dir= to load_dataset\)\.$",
                     done.stderr, re.MULTILINE), done.stderr
    for noise in ("Traceback", "DatasetGenerationError", "Exception ignored", "NoneType"):
        assert noise not in done.stderr
    assert not [p for p in cache.rglob("*.arrow")] and not (tmp_path / "out.jsonl").exists()
    assert temps(tmp_path) == []


SHUTDOWN = """
import io, sys
from whileai_datasets.reading import read_errors

def tables():
    with read_errors.read_failures("run.jsonl", "run.jsonl", lambda: io.BytesIO(b"")):
        yield 1
        yield 2

held = tables()
next(held)

class Late:
    def __del__(self):
        held.close()  # as datasets' generator is closed while the interpreter shuts down

sys.late = Late()
"""


def test_a_reader_closed_during_interpreter_shutdown_says_nothing(tmp_path: Path) -> None:
    # datasets leaves the table generator suspended when the cache write fails; it is closed at exit,
    # when imports and module globals no longer work
    done = subprocess.run([sys.executable, "-c", SHUTDOWN], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
