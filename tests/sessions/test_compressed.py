"""Compressed session logs (``.jsonl.gz``, ``.json.gz``) are told by their content as the plain files are, and
show-mask takes a session file."""

from __future__ import annotations

import gzip
import json
import shutil
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


@pytest.mark.parametrize("name", ["codex.jsonl", "claude_code.jsonl", "cline.json"])
def test_a_gzipped_session_reads_the_rows_of_the_plain_file(name: str, tmp_path: Path) -> None:
    packed = _gzip(DATA / name, tmp_path / "logs" / f"{name}.gz")
    plain, compressed = _load(DATA / name, tmp_path / "a"), _load(packed, tmp_path / "b")
    assert compressed.num_rows == plain.num_rows > 0
    for column in ("messages", "tools", "agent", "session_id", "conversation", "session_notes"):
        assert compressed[column] == plain[column], column
    assert set(compressed["source_file"]) == {f"{name}.gz"}


def test_a_session_folder_finds_its_gzipped_logs(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    _gzip(DATA / "codex.jsonl", folder / "2026" / "rollout-1.jsonl.gz")
    _gzip(DATA / "hermes.jsonl", folder / "hermes.json.gz")  # told by content, whatever its name says
    rows = folder / "rows.jsonl"  # whileai rows beside the sessions: no session
    rows.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                             {"role": "assistant", "content": "hello"}]}) + "\n")
    _gzip(rows, folder / "rows.jsonl.gz")
    found, others = detect.session_files(str(folder))
    assert sorted(found) == [str(folder / "2026" / "rollout-1.jsonl.gz"), str(folder / "hermes.json.gz")]
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
