"""One mistake, one error: a bad value of an option raises ``OptionError`` with the same message from every
entry point that takes the option (the transforms, ``load_dataset``, ``export_dataset``, ``audit``,
``tokenize``, the command line), the option named as that entry point spells it."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import seeded_rows, write_jsonl
from whileai_datasets import OptionError, TrainingOptions, audit, cli, export_dataset, publish_rollouts
from whileai_datasets import transforms as wai_transforms
from whileai_datasets.tokenize.token_masks import tokenize

#: option -> (a bad value, how the command line passes it, the message after the option's name)
BAD = {
    "mask_mode": ("last", "last", r" must be one of 'assistant', 'final', got 'last'\. 'assistant' trains every "
                                  r"assistant turn, 'final' only the last one of each row\.$"),
    "format": ("jsonl", "jsonl", r" must be one of 'openai', 'trl', 'fireworks', got 'jsonl'\. 'openai' for "
                                 r"OpenAI-style files, 'trl' for TRL's SFTTrainer, 'fireworks' for Fireworks\.$"),
    "on_bad_row": ("drop", "drop", r" must be one of 'raise', 'skip', got 'drop'\. 'raise' stops at the first bad "
                                   r"row, 'skip' leaves bad rows out and counts them\.$"),
    "max_length": (0, "0", r" must be a whole number, 1 or more, or None, got int 0\. "),
    "unroll": ("no", None, r" must be True or False, got str 'no'\. "),
    "max_tool_output_chars": (-1, "-1", r" must be a whole number, 0 or more, or None, got int -1\. "),
    "engine": ("spark", None, r" must be one of 'local', 'ray', got 'spark'\. 'local' runs in this process, 'ray' on "
                              r"Ray Data \(a cluster, or a local runtime\)\.$"),
}


@pytest.fixture(scope="module")
def rows_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("option-errors") / "rows.jsonl", seeded_rows(seed=5))


def _python_entry_points(rows_file: Path, out: Path, load: Callable[..., Any]) -> dict[str, dict[str, Any]]:
    """option -> entry point -> a call with the option's bad value (keyword ``name`` unless said)."""
    def export(**given: Any) -> Any:
        return export_dataset(str(rows_file), str(out), **given)

    def audited(**given: Any) -> Any:
        return audit(str(rows_file), tokenizer=object() if "max_length" in given else None, **given)

    def tokenized(**given: Any) -> Any:
        return tokenize(object(), "{{ 1 }}", **given)

    def published(**given: Any) -> Any:  # refused before the files are read or the Hub is asked
        return publish_rollouts(str(rows_file), "me/never", **given)

    return {
        "mask_mode": {"load_dataset": lambda **g: load(rows_file, **g), "export_dataset": export, "audit": audited,
                      "publish_rollouts": published, "TrainingOptions": TrainingOptions, "loss_mask(mode=)": lambda mask_mode: wai_transforms.loss_mask(mask_mode)},
        "format": {"export_dataset": export, "audit": audited, "TrainingOptions": TrainingOptions},
        "on_bad_row": {"load_dataset": lambda **g: load(rows_file, **g), "export_dataset": export, "audit": audited,
                       "tokenize": tokenized, "publish_rollouts": published},
        "max_length": {"audit": audited, "tokenize": tokenized, "TrainingOptions": TrainingOptions},
        "unroll": {"export_dataset": export, "audit": audited, "TrainingOptions": TrainingOptions},
        "max_tool_output_chars": {"export_dataset": export, "audit": audited, "publish_rollouts": published,
                                  "TrainingOptions": TrainingOptions},
        "engine": {"export_dataset": export, "audit": audited, "publish_rollouts": published},
    }


@pytest.mark.parametrize("option", sorted(BAD))
def test_a_bad_value_raises_one_error_with_one_message_from_every_entry_point(
        option: str, rows_file: Path, tmp_path: Path, load: Callable[..., Any]) -> None:
    value, _, message = BAD[option]
    entry_points = _python_entry_points(rows_file, tmp_path / "out.jsonl", load)[option]
    seen = {}
    for entry, call in entry_points.items():
        with pytest.raises(OptionError) as raised:
            call(**{option: value})
        name = "mode" if entry == "loss_mask(mode=)" else option
        assert raised.type is OptionError, entry
        seen[entry] = str(raised.value).replace(name, "<option>", 1)
        assert raised.match("^" + name + message), entry
    assert len(set(seen.values())) == 1, seen
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize(("command", "option"), [
    ("export", "mask_mode"), ("export", "format"), ("export", "on_bad_row"), ("audit", "mask_mode"),
    ("audit", "format"),
])
def test_the_command_line_prints_the_same_message_with_the_flag(
        command: str, option: str, rows_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, given, message = BAD[option]
    flag = "--" + option.replace("_", "-")
    argv = [command, str(rows_file)] + ([str(tmp_path / "out.jsonl")] if command == "export" else [])
    assert cli.main([*argv, flag, given]) == 1
    err = capsys.readouterr().err
    prefix = f"whileai-datasets {command}: "
    assert err.startswith(prefix)
    assert re.match("^" + re.escape(flag) + message, err[len(prefix):].strip()), err
    assert list(tmp_path.iterdir()) == []
