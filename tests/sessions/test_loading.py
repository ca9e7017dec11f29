"""Sessions through the front door: each agent's file loads into the rows its reader yields (so what the reader's
tests count, every call, result, text and readable thought, is in the loaded rows), every row trains a turn and a
summary kept as context trains nothing; ``streaming=True`` yields the rows a prepared load holds, and
``branches=`` chooses a pi or OpenClaw tree's branches as the reader's own argument does."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import template_rows
from tests.support.session_readers import DATA, FIXTURES, read
from whileai_datasets.errors import ExportFormatError, OptionError
from whileai_datasets.sessions import cline, droid, openhands, pi

READERS = {"openhands": openhands, "cline": cline, "cline_xml": cline, "droid": droid, "pi": pi, "openclaw": pi}

#: Every session fixture: its files, or every file of a folder of OpenHands conversations.
SESSIONS = sorted(str(path / "**") if path.is_dir() else str(path) for path in DATA.iterdir())


def _arguments_parsed(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with each call's arguments parsed (the builder writes their JSON text its own way) and no
    ``weight`` (the builder reads it into the loss mask)."""
    out = []
    for msg in messages:
        msg = {key: value for key, value in msg.items() if key != "weight"}
        if "tool_calls" in msg:
            msg["tool_calls"] = [{**call, "function": {**call["function"],
                                                       "arguments": json.loads(call["function"]["arguments"])}}
                                 for call in msg["tool_calls"]]
        out.append(msg)
    return out


@pytest.mark.parametrize("name", READERS)
def test_a_session_file_loads_as_its_reader_reads_it_and_every_row_trains(
        name: str, load: Callable[..., Any]) -> None:
    ds = load(FIXTURES[name])
    rows = read(READERS[name], FIXTURES[name])
    loaded = template_rows(ds)
    assert [_arguments_parsed(row["messages"]) for row in loaded] == [
        _arguments_parsed(row["messages"]) for row in rows]
    for column in ("agent", "session_id", "conversation", "tools", "tools_source", "session_notes"):
        assert [row[column] for row in loaded] == [row[column] for row in rows], column
    assert set(ds["source_file"]) == {FIXTURES[name].name}
    # the mask trains each assistant turn but those kept as context (weight 0), and every row trains one
    assert ds["loss_mask"] == [[int(msg["role"] == "assistant" and msg.get("weight", 1) != 0)
                                for msg in row["messages"]] for row in rows]
    assert all(any(mask) for mask in ds["loss_mask"])


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
