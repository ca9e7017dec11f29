"""The audit says every warning the export gives, with the same counts, and the max_length a trainer needs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

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
    from tests.support.tiny_lm import train_tokenizer, trl_template

    talk = [{"role": "user", "content": "where is my order"}, {"role": "assistant", "content": "it ships today"}]
    source = write_jsonl(tmp_path / "rows.jsonl", [{"messages": talk}] * 3)
    tokenizer = train_tokenizer(["where is my order it ships today"] * 5, chat_template=trl_template("qwen2_5"))
    text = audit(str(source), tokenizer=tokenizer, max_length=512).format()
    assert text.endswith("(these counts are at max_length=512: train with SFTConfig(max_length=512); a trainer "
                         "with a shorter one cuts again, which whileai_datasets.check_max_length catches)")


def test_a_huge_tool_output_is_named_with_the_cap_and_show_mask_prints_its_ends(
        tmp_path: Path, capsys: Any) -> None:
    from tests.support.tiny_lm import train_tokenizer, trl_template
    from whileai_datasets import cli

    call = {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}
    huge = "line of log output\n" * 8_000  # 152,000 characters
    rows = [{"messages": [{"role": "user", "content": "find it"},
                          {"role": "assistant", "content": "", "tool_calls": [call]},
                          {"role": "tool", "tool_call_id": "c1", "content": huge},
                          {"role": "assistant", "content": "found it"}]}]
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    found = audit(str(source)).to_dict()["findings"]["long_tool_output"]
    assert (found["rows"], found["amount"], found["first"][0]["line"]) == (1, len(huge), 1)
    assert "max_tool_output_chars" in found["description"]
    assert audit(str(source), max_tool_output_chars=2000).count("long_tool_output") == 0
    tokenizer = train_tokenizer(["find it found it line of log output grep"] * 5, chat_template=trl_template("qwen2_5"))
    tokenizer.save_pretrained(tmp_path / "tok")
    assert cli.main(["show-mask", str(source), "--tokenizer", str(tmp_path / "tok"), "--no-color"]) == 0
    out = capsys.readouterr().out
    assert len(out) < 5_000 and "characters not shown; a tool output this long can be cut before training with " \
                                "--max-tool-output-chars N" in out
