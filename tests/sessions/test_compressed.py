"""Compressed session logs (``.jsonl.gz``, ``.json.gz``, bz2, xz, zstd, lz4) are told by their content as the plain
files are, a missing codec package is named, and show-mask takes a session file."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.tiny_lm import train_tokenizer
from whileai_datasets import ChatTemplate, cli
from whileai_datasets.sessions import detect

DATA = Path(__file__).resolve().parents[1] / "data" / "sessions"


def _load(path: Path, cache: Path) -> Any:
    import datasets

    return datasets.load_dataset("whileai/export", data_files=str(path), split="train", cache_dir=str(cache))


def _gzip(source: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    with source.open("rb") as plain, gzip.open(target, "wb") as packed:
        shutil.copyfileobj(plain, packed)
    return target


def _compress(source: Path, target: Path, codec: str) -> Path:
    """``source`` written compressed with ``codec`` (its own package's writer)."""
    if codec == "gz":
        return _gzip(source, target)
    data = source.read_bytes()
    if codec == "zst":
        data = pytest.importorskip("zstandard").ZstdCompressor().compress(data)
    elif codec == "lz4":
        data = pytest.importorskip("lz4.frame").compress(data)
    else:
        data = bz2.compress(data) if codec == "bz2" else lzma.compress(data)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


@pytest.mark.parametrize(("name", "codec"), [
    ("codex.jsonl", "gz"), ("claude_code.jsonl", "gz"), ("cline.json", "gz"),
    ("codex.jsonl", "bz2"), ("codex.jsonl", "xz"), ("claude_code.jsonl", "zst"), ("cline.json", "zst"),
    ("codex.jsonl", "lz4"), ("cline.json", "lz4"),
])
def test_a_compressed_session_reads_the_rows_of_the_plain_file(name: str, codec: str, tmp_path: Path) -> None:
    """(A pretty-printed ``.json`` session is parsed whole to be told: a zstd stream cannot seek to its end to
    learn its size, nor go back, so it is read again from the start.)"""
    packed = _compress(DATA / name, tmp_path / "logs" / f"{name}.{codec}", codec)
    plain, compressed = _load(DATA / name, tmp_path / "a"), _load(packed, tmp_path / "b")
    assert compressed.num_rows == plain.num_rows > 0
    for column in ("messages", "tools", "agent", "session_id", "conversation", "session_notes"):
        assert compressed[column] == plain[column], column
    assert set(compressed["source_file"]) == {f"{name}.{codec}"}


def test_a_zstd_session_without_its_package_is_refused_naming_it(tmp_path: Path) -> None:
    packed = _compress(DATA / "codex.jsonl", tmp_path / "rollout.jsonl.zst", "zst")
    code = (
        "import sys; sys.modules['zstandard'] = None\n"  # as if it were not installed
        "import datasets, whileai_datasets\n"
        "from whileai_datasets.sessions import detect\n"
        "for attempt in ("
        f"lambda: datasets.load_dataset('whileai/export', data_files={str(packed)!r}, split='train',"
        f" cache_dir={str(tmp_path / 'cache')!r}), lambda: detect.session_files({str(tmp_path)!r})):\n"
        "    try:\n"
        "        attempt()\n"
        "    except whileai_datasets.ExportFormatError as err:\n"
        "        print(err)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    said = ("cannot decompress a zstd file: zstandard is not installed. pip install zstandard, or decompress the file "
            "first.")
    assert out.splitlines() == [f"rollout.jsonl.zst: {said}", f"{packed}: {said}"]


def test_a_session_folder_finds_its_gzipped_logs(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    _gzip(DATA / "codex.jsonl", folder / "2026" / "rollout-1.jsonl.gz")
    _gzip(DATA / "hermes.jsonl", folder / "hermes.json.gz")  # told by content, whatever its name says
    _compress(DATA / "claude_code.jsonl", folder / "claude" / "a.jsonl.zst", "zst")
    _compress(DATA / "pi.jsonl", folder / "pi" / "b.jsonl.lz4", "lz4")
    rows = folder / "rows.jsonl"  # whileai rows beside the sessions: no session
    rows.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                             {"role": "assistant", "content": "hello"}]}) + "\n")
    _gzip(rows, folder / "rows.jsonl.gz")
    found, others = detect.session_files(str(folder))
    assert sorted(found) == [str(folder / "2026" / "rollout-1.jsonl.gz"), str(folder / "claude" / "a.jsonl.zst"),
                             str(folder / "hermes.json.gz"), str(folder / "pi" / "b.jsonl.lz4")]
    assert others == [str(folder / "rows.jsonl"), str(folder / "rows.jsonl.gz")]


@pytest.mark.parametrize("compressed", [False, True])
def test_show_mask_takes_a_session_file(compressed: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = DATA / "codex.jsonl"
    path = _gzip(source, tmp_path / "rollout.jsonl.gz") if compressed else source
    folder = tmp_path / "tok"
    train_tokenizer([source.read_text()] * 2, chat_template=ChatTemplate.shipped("qwen3").text,
                    vocab_size=400).save_pretrained(str(folder))
    row = _load(source, tmp_path / "c")[0]
    answer = next(m["content"] for m in reversed(row["messages"]) if m["role"] == "assistant" and m["content"])
    code = cli.main(["show-mask", str(path), "--tokenizer", str(folder), "--no-color"])
    out = capsys.readouterr().out
    assert code == 0 and answer.splitlines()[0] in out and "[[" in out
