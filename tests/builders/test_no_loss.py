"""``load_dataset`` says when rows it reads train nothing: how many, why, the first one (a NothingToTrainWarning).

The rows stay as whileai would write them (the parity tests hold); the warning is the only change.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from datasets import load_dataset

import whileai_datasets  # noqa: F401 (registers the builder)
from tests.conftest import write_jsonl
from whileai_datasets import NothingToTrainWarning

TALK = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "fine"}]
ASK = [{"role": "user", "content": "hello?"}]


def _rows(n_good: int, at: list[int]) -> list[dict[str, Any]]:
    return [{"messages": ASK if i in at else TALK} for i in range(n_good + len(at))]


def test_rows_with_no_assistant_turn_warn_with_the_count_and_the_first_row(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "asks.jsonl", _rows(3, [2, 4]))
    with pytest.warns(NothingToTrainWarning, match=r"^2 of 5 rows of split 'train' train nothing: 2 have no "
                                                   r"assistant turn; first: asks\.jsonl row 2\. They are kept"):
        ds = load_dataset("whileai/export", data_files=str(source), split="train")
    assert [sum(mask) for mask in ds["loss_mask"]] == [1, 1, 0, 1, 0]  # the rows themselves are unchanged


def test_every_row_training_says_nothing(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "talks.jsonl", _rows(4, []))
    with warnings.catch_warnings():
        warnings.simplefilter("error", NothingToTrainWarning)
        load_dataset("whileai/export", data_files=str(source), split="train")


def test_a_streamed_file_warns_too(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "asks.jsonl", _rows(2, [0]))
    stream = load_dataset("whileai/export", data_files=str(source), split="train", streaming=True)
    with pytest.warns(NothingToTrainWarning, match=r"^1 of 3 rows of asks\.jsonl train nothing: 1 have no assistant "
                                                   r"turn; first: asks\.jsonl row 0\."):
        assert len(list(stream)) == 3


def test_num_proc_jobs_merge_into_one_warning(tmp_path: Path) -> None:
    files = [write_jsonl(tmp_path / f"part{i}.jsonl", _rows(2, [1] if i else [])) for i in range(2)]
    with pytest.warns(NothingToTrainWarning) as seen:
        load_dataset("whileai/export", data_files=[str(f) for f in files], split="train", num_proc=2)
    said = [str(w.message) for w in seen if issubclass(w.category, NothingToTrainWarning)]
    assert len(said) == 1 and said[0].startswith("1 of 5 rows of split 'train' train nothing") \
        and "first: part1.jsonl row 1." in said[0]


def test_loading_again_from_the_cache_says_it_again(tmp_path: Path) -> None:
    """The second load reads the prepared split from the cache; the rows still train nothing."""
    source = write_jsonl(tmp_path / "asks.jsonl", _rows(3, [1]))
    for _ in range(2):
        with pytest.warns(NothingToTrainWarning, match=r"^1 of 4 rows of split 'train' train nothing: 1 have no "
                                                       r"assistant turn; first: asks\.jsonl row 1\."):
            load_dataset("whileai/export", data_files=str(source), split="train")
    with pytest.warns(NothingToTrainWarning, match=r"rows of split 'train' \(loaded as 'train\[:2\]'\) train"):
        load_dataset("whileai/export", data_files=str(source), split="train[:2]")
    with pytest.warns(NothingToTrainWarning, match=r"rows of split 'train' train nothing"):
        load_dataset("whileai/export", data_files=str(source))  # every split: a DatasetDict


def test_a_read_instruction_over_two_splits_names_each(tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "train.jsonl", _rows(2, [0]))
    test = write_jsonl(tmp_path / "test.jsonl", _rows(1, [1]))
    files = {"train": str(train), "test": str(test)}
    load_dataset("whileai/export", data_files=files)  # prepared (and said) once
    with pytest.warns(NothingToTrainWarning) as seen:
        load_dataset("whileai/export", data_files=files, split="train+test")
    said = " ".join(str(w.message) for w in seen if issubclass(w.category, NothingToTrainWarning))
    assert "1 of 3 rows of split 'train' (loaded as 'train+test')" in said
    assert "1 of 2 rows of split 'test' (loaded as 'train+test')" in said
