"""The rows and the tokenizer the tokenizing tests share (trained once for the package)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA, read_jsonl, seeded_rows, write_jsonl
from tests.support.tiny_lm import train_tokenizer, trl_template


@pytest.fixture(scope="package")
def rows_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = seeded_rows(seed=5, mode="rl", repeats=2) + read_jsonl(DATA / "engine_multiturn.jsonl")
    return write_jsonl(tmp_path_factory.mktemp("tok") / "rows.jsonl", rows)


@pytest.fixture(scope="package")
def qwen_tokenizer(rows_file: Path) -> Any:
    texts = [json.dumps(row) for row in read_jsonl(rows_file)]
    return train_tokenizer(texts, chat_template=trl_template("qwen2_5"))
