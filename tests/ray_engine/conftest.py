"""Fixtures the Ray engine's test modules share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.tiny_lm import train_tokenizer, trl_template


@pytest.fixture(scope="module")
def tokenizer_dir(rows_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tokenizer trained on the requesting module's ``rows_file``, with Qwen2.5's chat template, saved to a
    folder (Ray's actors build it from its path)."""
    folder = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer(rows_file.read_text().splitlines(), chat_template=trl_template("qwen2_5")).save_pretrained(folder)
    return folder
