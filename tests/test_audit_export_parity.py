"""The audit says every warning the export gives, with the same counts, and the max_length a trainer needs."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import write_jsonl
from whileai_datasets import audit, export_dataset


def test_the_audit_counts_the_rows_the_export_warns_about(tmp_path: Path) -> None:
    talk = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    shapes = ((1.0, "stop"), (0.2, "length"), (None, "length"), (0.9, None), (0.49, "stop"))
    source = write_jsonl(tmp_path / "rows.jsonl", [{"messages": talk, "reward": reward, "finish_reason": why}
                                                   for reward, why in shapes])
    said = " ".join(export_dataset(str(source), str(tmp_path / "out.jsonl"))["warnings"])
    cut, low = (int(n) for n in re.findall(r"(\d+) of 5 rows (?:were cut by the reply token cap|have reward below)",
                                           said))
    found = audit(str(source)).to_dict()["findings"]
    assert (found["cut_by_token_cap"]["rows"], found["low_reward"]["rows"]) == (cut, low) == (2, 2)
    assert [e["line"] for e in found["cut_by_token_cap"]["first"]] == [2, 3]
    assert [e["row"] for e in found["low_reward"]["first"]] == [1, 4]


def test_the_audit_names_the_trainer_max_length_its_counts_hold_for(tmp_path: Path) -> None:
    from tests.tiny_lm import train_tokenizer, trl_template

    talk = [{"role": "user", "content": "where is my order"}, {"role": "assistant", "content": "it ships today"}]
    source = write_jsonl(tmp_path / "rows.jsonl", [{"messages": talk}] * 3)
    tokenizer = train_tokenizer(["where is my order it ships today"] * 5, chat_template=trl_template("qwen2_5"))
    text = audit(str(source), tokenizer=tokenizer, max_length=512).format()
    assert text.endswith("(these counts are at max_length=512: train with SFTConfig(max_length=512); a trainer "
                         "with a shorter one cuts again, which whileai_datasets.check_max_length catches)")
