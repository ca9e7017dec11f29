"""No row that trains nothing goes by in silence: export, tokenize and publish say how many, why, and
where the first one is (one warning class, ``NothingToTrainWarning``); the export also says when a
row opens with two system messages. The rows themselves stay whileai's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from datasets import Dataset, Features, Json, List, Value

from tests.conftest import read_jsonl, write_jsonl
from tests.support.tiny_lm import train_tokenizer
from whileai_datasets import DuplicateSystemWarning, ExportFormatError, NothingToTrainWarning, export_dataset
from whileai_datasets.errors import PublishError
from whileai_datasets.hub import configs, streaming
from whileai_datasets.rows.features import Message
from whileai_datasets.tokenize import UnsupervisedRowsWarning, tokenize

FEATURES = Features({"messages": List(Message()), "loss_mask": List(Value("int8")), "tools": Json(),
                     "prompt": Value("string"), "scenario_id": Value("string")})
TALK = [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "fine thanks"}]


def test_export_of_rows_with_no_assistant_turn_warns_and_counts_them(tmp_path: Path) -> None:
    """Rows under a key this package does not read are refused by the builder (issue 29); rows it reads
    that train nothing are written as whileai writes them, counted and said aloud."""
    source = write_jsonl(tmp_path / "asks.jsonl", [{"messages": TALK[:1]}] * 2 + [{"messages": TALK}])
    with pytest.warns(NothingToTrainWarning, match=r"2 of 3 rows of .*asks\.jsonl train nothing: 2 have no "
                                                   r"assistant turn \(first: row 0\)"):
        report = export_dataset(str(source), str(tmp_path / "out.jsonl"), system_prompt="Be brief.")
    assert report["rows_without_loss"] == 2 and report["trained_messages"] == 1
    assert len(read_jsonl(tmp_path / "out.jsonl")) == 3  # written as whileai writes them


def test_export_of_rows_under_a_key_it_does_not_read_names_the_keys(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "eval.jsonl", [{"question": "q", "reply": "r"}] * 2 + [{"messages": TALK}])
    with pytest.raises(ExportFormatError, match=r"eval\.jsonl line 1 \(row 0\): no conversation to train on: the "
                                                r"row has 'question', 'reply'"):
        export_dataset(str(source), str(tmp_path / "out.jsonl"), system_prompt="Be brief.")
    assert not (tmp_path / "out.jsonl").exists()


def test_export_with_every_row_training_adds_no_key_and_no_warning(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "rows.jsonl", [{"messages": TALK}])
    report = export_dataset(str(source), str(tmp_path / "out.jsonl"))
    assert "rows_without_loss" not in report


def test_export_in_completion_shape_counts_the_rows_it_drops(tmp_path: Path) -> None:
    rows = [{"messages": TALK}, {"messages": TALK[:1]}]
    with pytest.warns(NothingToTrainWarning, match=r"1 of 2 rows .* 1 had no assistant turn and were dropped"):
        report = export_dataset(rows, str(tmp_path / "out.jsonl"), format="trl", mask_mode="final")
    assert report["rows_without_loss"] == report["no_completion_dropped"] == 1


def test_system_prompt_on_rows_with_their_own_warns_where(tmp_path: Path) -> None:
    own = {"messages": [{"role": "system", "content": "Own."}, *TALK]}
    source = write_jsonl(tmp_path / "rows.jsonl", [{"messages": TALK}, own])
    with pytest.warns(DuplicateSystemWarning, match=r"1 rows open with two system messages \(first: row 1 of "):
        export_dataset(str(source), str(tmp_path / "out.jsonl"), system_prompt="Be brief.")
    assert [m["role"] for m in read_jsonl(tmp_path / "out.jsonl")[1]["messages"]] == ["system", "system", "user",
                                                                                     "assistant"]


def test_tokenize_names_the_cause_and_the_first_row_it_drops(load: Any, tmp_path: Path) -> None:
    chatml = "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
    tokenizer = train_tokenizer(["hello there fine thanks"] * 20, chat_template=chatml, vocab_size=300)
    long = [{"role": "user", "content": "hello there " * 40}, TALK[1]]
    source = write_jsonl(tmp_path / "rows.jsonl", [{"messages": TALK}, {"messages": long}])
    ds = load(source)
    assert issubclass(UnsupervisedRowsWarning, NothingToTrainWarning)
    with pytest.warns(UnsupervisedRowsWarning, match=r"dropped 1 of 2 rows in this batch: no token of theirs is "
                                                     r"supervised \(0 with no assistant turn .*, 1 whose supervision "
                                                     r"max_length cut off\); first: row 1 \(max_length cut all"):
        out = ds.map(tokenize(tokenizer, max_length=30), batched=True, with_indices=True)
    assert len(out) == 1
    kept = ds.map(tokenize(tokenizer, max_length=30, keep_unsupervised=True), batched=True)
    assert kept["num_supervised_tokens"][1] == 0 and kept["supervised_tokens_truncated"][1] > 0


def _split(masks: list[list[int]]) -> Dataset:
    return Dataset.from_dict({"messages": [TALK] * len(masks), "loss_mask": masks, "tools": [None] * len(masks),
                              "prompt": ["hello"] * len(masks), "scenario_id": ["s"] * len(masks)}, features=FEATURES)


def test_publish_warns_before_any_request_about_rows_that_train_nothing() -> None:
    with pytest.warns(NothingToTrainWarning, match=r"1 of 2 rows of split 'train' train nothing .*first: row 1"):
        streaming.survey({"train": _split([[0, 1], [0, 0]])}, configs.Extras())


def test_publish_refuses_a_split_that_trains_nothing_at_all() -> None:
    with pytest.raises(PublishError, match=r"no rows in split 'train': none of its 2 rows trains anything"):
        streaming.survey({"train": _split([[0, 0], [0, 0]])}, configs.Extras())


def test_a_row_with_no_assistant_turn_is_counted_and_the_report_stays_json(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "rows.jsonl", [{"messages": TALK[:1]}])
    with pytest.warns(NothingToTrainWarning, match="1 of 1 rows"):
        report = export_dataset(str(source), str(tmp_path / "out.jsonl"))
    assert json.loads(json.dumps(report))["rows_without_loss"] == 1
