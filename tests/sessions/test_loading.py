"""Sessions through the builder's own options: ``streaming=True`` yields the rows a prepared load holds, and
``branches=`` chooses a pi or OpenClaw tree's branches as the reader's own argument does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import template_rows
from tests.support.session_readers import DATA, FIXTURES, read
from whileai_datasets.errors import ExportFormatError, OptionError
from whileai_datasets.sessions import pi

#: Every session fixture: its files, or every file of a folder of OpenHands conversations.
SESSIONS = sorted(str(path / "**") if path.is_dir() else str(path) for path in DATA.iterdir())


def test_streaming_yields_the_rows_of_a_prepared_load(load: Callable[..., Any]) -> None:
    prepared = load(SESSIONS)
    streamed = list(load(SESSIONS, streaming=True))
    assert len(streamed) == prepared.num_rows == 27
    # a stream keeps the declared schema (it cannot look ahead): the columns a prepared split drops are all null
    kept = prepared.column_names
    assert template_rows([{key: row[key] for key in kept} for row in streamed]) == template_rows(prepared)
    assert all(row[key] is None for row in streamed for key in set(row) - set(kept))
    assert {"agent", "session_id", "source_file", "conversation", "tools_source", "session_notes"} <= set(kept)


@pytest.mark.parametrize("name", ["pi", "openclaw"])
@pytest.mark.parametrize("branches", ["all", "current"])
def test_branches_is_a_load_option_that_reads_as_the_reader_does(
        name: str, branches: str, load: Callable[..., Any]) -> None:
    ds = load(FIXTURES[name], branches=branches)
    rows = read(pi, FIXTURES[name], branches=branches)
    assert ds["conversation"] == [row["conversation"] for row in rows]
    assert [row["messages"] for row in template_rows(ds)] == [
        [{key: value for key, value in msg.items() if key != "weight"} for msg in row["messages"]] for row in rows]
    assert (len(ds) == 1) == (branches == "current")


def test_branches_refuses_a_value_it_does_not_know(load: Callable[..., Any]) -> None:
    with pytest.raises(OptionError, match="branches must be one of 'all', 'current', got 'leaf'"):
        load(FIXTURES["pi"], branches="leaf")


def test_streaming_a_session_refuses_what_a_prepared_load_refuses(tmp_path: Path, load: Callable[..., Any]) -> None:
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(FIXTURES["pi"].read_bytes().rstrip(b"\n")[:-5])
    with pytest.raises(ExportFormatError, match=r"cut\.jsonl line \d+: the last line is cut short"):
        list(load(str(cut), streaming=True))
