"""Flags must be bools and counts whole numbers, at every entry point; nothing is written on a refusal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import seeded_rows, write_jsonl
from whileai_datasets import OptionError, cli, export_dataset, export_preference

FLAG = r"^{name} must be True or False, got {shown}\. Pass {name}=True or {name}=False; a string such as " \
       r"'no' is not read as False\.$"
CAP = r"^max_tool_output_chars must be a whole number, 0 or more, or None, got {shown}\. " \
      r"Pass the number of characters a tool message keeps \(0 keeps none\), or None for no cut\.$"


@pytest.fixture(scope="module")
def rows_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("options") / "rows.jsonl", seeded_rows(seed=3))


@pytest.mark.parametrize(("option", "value", "pattern"), [
    ("unroll", "no", FLAG.format(name="unroll", shown="str 'no'")),
    ("validate", "no", FLAG.format(name="validate", shown="str 'no'")),
    ("strip_think", "no", FLAG.format(name="strip_think", shown="str 'no'")),
    ("unroll", 1, FLAG.format(name="unroll", shown="int 1")),
    ("max_tool_output_chars", -1, CAP.format(shown="int -1")),
    ("max_tool_output_chars", "10", CAP.format(shown="str '10'")),
    ("max_tool_output_chars", 2.5, CAP.format(shown="float 2.5")),
    ("max_tool_output_chars", True, CAP.format(shown="bool True")),
])
def test_export_dataset_refuses_a_bad_option_before_writing(rows_file: Path, tmp_path: Path, option: str,
                                                            value: Any, pattern: str) -> None:
    out = tmp_path / "out.jsonl"
    with pytest.raises(OptionError, match=pattern):
        export_dataset(str(rows_file), str(out), **{option: value})
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_export_dataset_takes_zero_and_none_as_the_cap(rows_file: Path, tmp_path: Path) -> None:
    for cap in (0, None):
        report = export_dataset(str(rows_file), str(tmp_path / f"{cap}.jsonl"), max_tool_output_chars=cap,
                               validate=False)
        assert report["max_tool_output_chars"] == cap and report["unrolled"] is False


@pytest.mark.parametrize("option", ["strip_think", "validate", "drop_ties"])
def test_export_preference_refuses_a_flag_that_is_not_a_bool(tmp_path: Path, option: str) -> None:
    with pytest.raises(OptionError, match=FLAG.format(name=option, shown="str 'no'")):
        export_preference([], str(tmp_path / "pairs.jsonl"), **{option: "no"})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("option", "value", "pattern"), [
    ("keep_message_keys", "no", FLAG.format(name="keep_message_keys", shown="str 'no'")),
    ("leak_facts", "yes", FLAG.format(name="leak_facts", shown="str 'yes'")),
    ("chunk_rows", "10", r"^chunk_rows must be a whole number, 1 or more, got str '10'\. Pass a "
                         r"positive number of rows per Arrow chunk\.$"),
])
def test_the_builder_refuses_a_bad_config_option(load: Any, rows_file: Path, option: str, value: Any,
                                                 pattern: str) -> None:
    with pytest.raises(OptionError, match=pattern):
        load(rows_file, **{option: value})


@pytest.mark.parametrize("value", ["-1", "2.5", "ten"])
def test_the_cli_refuses_a_cap_that_is_not_a_whole_number(rows_file: Path, tmp_path: Path, value: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="2"):
        cli.main(["export", str(rows_file), str(tmp_path / "out.jsonl"), "--max-tool-output-chars", value])
    assert (f"argument --max-tool-output-chars: expected a whole number, 0 or more, got '{value}'"
            in capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("value", "shown"), [("10", "str '10'"), (0, "int 0"), (2.5, "float 2.5")])
def test_tokenize_refuses_a_max_length_that_is_not_a_positive_whole_number(value: Any, shown: str) -> None:
    from whileai_datasets.tokenize.token_masks import tokenize

    with pytest.raises(OptionError, match=rf"^max_length must be a whole number, 1 or more, or None, "
                                          rf"got {shown}\. Pass the trainer.s max_length \(a positive number of tokens"):
        tokenize(object(), "{{ 1 }}", value)


def test_training_options_default_to_load_and_tokenize_and_whileai_export_strips_think() -> None:
    from whileai_datasets import TrainingOptions

    assert TrainingOptions().strip_think is False and TrainingOptions().mask_mode == "assistant"
    assert TrainingOptions.whileai_export().strip_think is True
    assert TrainingOptions.whileai_export(strip_think=False) == TrainingOptions()


def test_training_options_are_frozen_and_read_back_from_what_they_record() -> None:
    import dataclasses
    import json

    from whileai_datasets import TrainingOptions

    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    options = TrainingOptions(tools=tools, format="trl", unroll=True, max_length=512)
    assert options.tools == tuple(tools)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'unroll'"):
        options.unroll = False  # type: ignore[misc]
    recorded = json.loads(json.dumps(options.to_dict()))
    assert recorded["tools"] == tools and recorded["max_length"] == 512
    assert TrainingOptions.from_dict(recorded) == options


def test_training_options_refuse_unknown_keys_and_what_no_field_can_take() -> None:
    from whileai_datasets import TrainingOptions

    with pytest.raises(OptionError, match=r"^unknown training option\(s\) 'mask'\. Known: format, mask_mode, max_length, "):
        TrainingOptions.from_dict({"mask": "final"})
    with pytest.raises(OptionError, match=r"^tools must be a list of tool schemas \(dicts\), got str\. "):
        TrainingOptions(tools="tools.json")  # type: ignore[arg-type]
    with pytest.raises(OptionError, match=r"^weights: weights apply to format='openai' files, got format='trl'"):
        TrainingOptions(format="trl", weights="all")
