"""Each error class renders what, where and what to do, in one format."""

from __future__ import annotations

import pickle
from concurrent.futures.process import BrokenProcessPool

import pytest

from whileai_datasets.errors import (
    ExportFormatError,
    OptionError,
    ParseWorkerError,
    PublishError,
    SchemaError,
    TemplateError,
    UnsupportedVersionError,
    WhileaiError,
    WriteError,
)


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (ExportFormatError, ValueError),
        (OptionError, ValueError),
        (SchemaError, TypeError),
        (TemplateError, ValueError),
        (PublishError, RuntimeError),
        (UnsupportedVersionError, RuntimeError),
        (WriteError, OSError),
        (ParseWorkerError, BrokenProcessPool),
    ],
)
def test_each_error_is_a_whileai_error_and_its_builtin(cls: type[WhileaiError], builtin: type[Exception]) -> None:
    err = cls("expected a string, got int", location="run.jsonl line 3 (row 2), reward", hint="Fix the row.")
    assert isinstance(err, WhileaiError)
    assert isinstance(err, builtin)
    assert str(err) == "run.jsonl line 3 (row 2), reward: expected a string, got int. Fix the row."


def test_error_without_location_or_hint_is_just_the_problem() -> None:
    assert str(ExportFormatError("no data files given")) == "no data files given"


def test_error_fields_stay_readable() -> None:
    err = TemplateError("{% generation %} is opened here but never closed", location="qwen3.jinja:14", hint="Add it.")
    assert (err.problem, err.location, err.hint) == ("{% generation %} is opened here but never closed", "qwen3.jinja:14", "Add it.")
    assert str(err) == "qwen3.jinja:14: {% generation %} is opened here but never closed. Add it."


def test_errors_survive_pickling_for_worker_processes() -> None:
    err = ExportFormatError("bad", location="f.jsonl line 1 (row 0)", hint="Fix it.")
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is ExportFormatError
    assert str(again) == str(err)


def test_option_error_renders_the_option_the_allowed_values_and_what_to_do() -> None:
    from whileai_datasets._options import check_choice
    from whileai_datasets._typing import MaskMode

    with pytest.raises(OptionError) as raised:
        check_choice("last", "mask_mode", MaskMode)
    assert str(raised.value) == ("mask_mode must be one of 'assistant', 'final', got 'last'. 'assistant' trains every "
                                 "assistant turn, 'final' only the last one of each row.")
