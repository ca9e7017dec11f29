"""A session dataset's whole files read by the parse workers: the rows, their order, the warnings, the skipped
rows and the errors of one process, with this process reading no file itself."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import warnings
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA
from whileai_datasets import ExportFormatError, bad_rows
from whileai_datasets.builders import file_workers, whileai_export
from whileai_datasets.builders.bad_rows import leak_facts
from whileai_datasets.errors import ParseWorkerError
from whileai_datasets.reading import parallel
from whileai_datasets.reading.reader import BadRows
from whileai_datasets.rows.canonical import Normalizer, Options

SESSIONS = DATA / "sessions"


def _folder(tmp_path: Path) -> list[Path]:
    """Every agent's fixture session, compressed copies, and files of rows (one with a bad line, one with keys
    no shape reads), listed out of name order: the files' order is the one given."""
    folder = tmp_path / "logs"
    folder.mkdir()
    files = [Path(shutil.copy(path, folder / path.name)) for path in sorted(SESSIONS.iterdir()) if path.is_file()]
    packed = folder / "rollout.jsonl.gz"
    packed.write_bytes(gzip.compress((SESSIONS / "codex.jsonl").read_bytes()))
    files.append(packed)
    zstd = pytest.importorskip("zstandard")
    packed = folder / "claude.jsonl.zst"
    packed.write_bytes(zstd.ZstdCompressor().compress((SESSIONS / "claude_code.jsonl").read_bytes()))
    files.append(packed)
    rows = folder / "rows.jsonl"
    good = json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})
    rows.write_text("\n".join([good, "{not json", good]) + "\n")
    files.append(rows)
    files.append(Path(shutil.copy(DATA / "misspelt_keys.jsonl", folder / "misspelt_keys.jsonl")))
    files = files[::-1]
    # an OpenHands V1 conversation folder (one file per event, read whole by its reader in this process) midway
    conversation = Path(shutil.copytree(SESSIONS / "openhands_v1", folder / "openhands_v1"))
    events = sorted(conversation.glob("*/base_state.json")) + sorted(conversation.glob("*/events/event-*.json"))
    return files[: len(files) // 2] + events + files[len(files) // 2 :]


def _load(load: Any, files: list[Path], cache: Path, **kwargs: Any) -> tuple[Any, list[tuple[str, str]]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = load([str(f) for f in files], cache_dir=str(cache), **kwargs)
    return ds, [(w.category.__name__, str(w.message)) for w in caught if w.category.__module__.startswith("whileai")]


@pytest.mark.parametrize("group_bytes", [None, 6 << 10])
def test_workers_read_a_session_folder_as_one_process_does(
    tmp_path: Path, load: Any, monkeypatch: pytest.MonkeyPatch, group_bytes: int | None
) -> None:
    """All the files in one worker's group, or (``group_bytes``) in groups of a few files each, several at once."""
    files = _folder(tmp_path)
    one, said_one = _load(load, files, tmp_path / "one", parse_workers=1, on_bad_row="skip", leak_facts=True)
    if group_bytes is not None:
        monkeypatch.setattr(parallel, "PIECE_MIN_BYTES", group_bytes)
        monkeypatch.setattr(parallel, "PIECE_MAX_BYTES", group_bytes)

    in_process = whileai_export.WhileaiExport._shard_tables

    def read_here(builder: Any, handle: Any, file: str, *args: Any) -> Any:
        assert os.path.isdir(file), "this process read a file itself"  # (a V1 folder is read here, by its reader)
        return in_process(builder, handle, file, *args)

    monkeypatch.setattr(whileai_export.WhileaiExport, "_shard_tables", read_here)
    two, said_two = _load(load, files, tmp_path / "two", parse_workers=2, on_bad_row="skip", leak_facts=True)
    assert list(two) == list(one)
    assert two.column_names == one.column_names
    assert said_two == said_one
    assert {kind for kind, _ in said_one} >= {"BadRowsWarning", "UnreadKeysWarning"}
    assert bad_rows(two) == bad_rows(one) and bad_rows(one)["locations"] == ["rows.jsonl line 2 (row 1)"]
    assert leak_facts(two) == leak_facts(one) and leak_facts(one)["n_rows"] == one.num_rows
    # every file's rows, in the order the files were given
    sources = [name for name in two["source_file"] if name is not None]  # (rows files have no source_file)
    rows_files = ("rows.jsonl", "misspelt_keys.jsonl")
    # (the V1 folder's rows are named by the folder, where its first file was)
    expected = [f.parents[1].name if "openhands_v1" in f.parts and f.parent.name == "events" else
                f.parent.name if "openhands_v1" in f.parts else f.name for f in files if f.name not in rows_files]
    assert list(dict.fromkeys(sources)) == list(dict.fromkeys(expected))


def _cut_last_line(folder: Path) -> str:
    data = (SESSIONS / "claude_code.jsonl").read_bytes()
    (folder / "cut.jsonl").write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 40])
    return "cut.jsonl"


def _unknown_log(folder: Path) -> str:
    events = [{"type": "run.start", "timestamp": "2026-11-02T10:00:00Z", "data": {"goal": "x"}},
              {"type": "run.step", "timestamp": "2026-11-02T10:00:01Z", "data": {"tool": "ls"}}]
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return "events.jsonl"


def _cut_zstd(folder: Path) -> str:
    zstd = pytest.importorskip("zstandard")
    packed = zstd.ZstdCompressor().compress((SESSIONS / "codex.jsonl").read_bytes())
    (folder / "rollout.jsonl.zst").write_bytes(packed[: len(packed) * 2 // 3])
    return "rollout.jsonl.zst"


@pytest.mark.parametrize("make_bad", [_cut_last_line, _unknown_log, _cut_zstd])
def test_a_bad_file_among_others_is_refused_naming_its_file_and_line(
    tmp_path: Path, load: Any, make_bad: Any
) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    before = [shutil.copy(SESSIONS / name, folder / name) for name in ("codex.jsonl", "pi.jsonl", "gemini.jsonl")]
    bad = folder / make_bad(folder)
    after = [shutil.copy(SESSIONS / name, folder / name) for name in ("droid.jsonl", "hermes.jsonl")]
    files = [str(f) for f in (*before, bad, *after)]
    errors, before_error = [], []
    for workers in (1, 2):
        with pytest.raises(ExportFormatError) as raised:
            load(files, cache_dir=str(tmp_path / str(workers)), parse_workers=workers)
        errors.append((type(raised.value), str(raised.value)))
        streamed: list[Any] = []  # streamed, the rows of the files before it come first
        with pytest.raises(ExportFormatError):
            streamed.extend(load(files, streaming=True, parse_workers=workers))
        before_error.append(streamed)
    assert errors[0] == errors[1]
    assert errors[0][1].startswith(f"{bad.name} line ")
    assert before_error[1] == before_error[0] and len(before_error[0]) > 3


def test_a_dead_worker_is_named_with_the_file_it_was_reading(tmp_path: Path) -> None:
    names = ["codex.jsonl", "pi.jsonl", "gemini.jsonl", "droid.jsonl", "hermes.jsonl", "claude_code.jsonl"] * 2
    normalizer = Normalizer("default", Options(), sessions=True)
    files = [file_workers.WholeFile(str(SESSIONS / name), str(SESSIONS / name), name,
                                    partial(open, str(SESSIONS / name), "rb")) for name in names]
    jobs = [([shard], file_workers.file_job([whole], normalizer, chunk_rows=100, on_bad_row="raise", leaks=False))
            for shard, whole in enumerate(files)]
    pool = parallel.RangeReader(normalizer, workers=2, chunk_rows=100, on_bad_row="raise")
    reader = file_workers.FileReader(pool, jobs)
    try:
        assert list(reader.tables(0, names[0], BadRows(), None))
        assert pool._pool is not None
        for pid in list(pool._pool._processes):
            os.kill(pid, signal.SIGKILL)
        with pytest.raises(ParseWorkerError, match=r"^\w+\.jsonl: a worker process parsing the file died "
                           r"\(killed by SIGKILL"):
            for shard in range(1, len(names)):
                list(reader.tables(shard, names[shard], BadRows(), None))
    finally:
        reader.close()
        pool.close()


def test_groups_are_runs_of_consecutive_files_up_to_a_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "PIECE_MIN_BYTES", 100)
    monkeypatch.setattr(parallel, "PIECE_MAX_BYTES", 100)
    # shard 3 is no local file (a remote or still-compressed stream): read in this process, between groups
    sizes = {0: 40, 1: 40, 2: 40, 4: 30, 5: 500, 6: 10, 7: 10}
    assert file_workers.groups(sizes, workers=2) == [[0, 1], [2], [4], [5], [6, 7]]


def test_workers_hand_the_session_readers_their_options(tmp_path: Path, load: Any) -> None:
    """``branches="current"`` reaches pi's and OpenClaw's readers in the workers too."""
    files = [str(SESSIONS / name) for name in ("pi.jsonl", "openclaw.jsonl", "codex.jsonl")]
    one = load(files, cache_dir=str(tmp_path / "one"), parse_workers=1, branches="current")
    two = load(files, cache_dir=str(tmp_path / "two"), parse_workers=2, branches="current")
    every = load(files, cache_dir=str(tmp_path / "all"), parse_workers=2)
    assert list(two) == list(one)
    assert two.num_rows < every.num_rows
