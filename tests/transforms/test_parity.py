"""Parity with whileai's exporters: same inputs and options, JSON-equal rows
and equal reports. whileai runs in the test; nothing here is copied output."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

import whileai_datasets
from whileai_datasets import ExportFormatError

from .conftest import QUIET_LOSS_WARNINGS, SYSTEM, TOOLS, all_rows, edge_rows, read_jsonl, seeded_rows, write_jsonl
from .conftest import with_rows_without_loss

pytestmark = QUIET_LOSS_WARNINGS

GRID = list(
    itertools.product(
        ("openai", "trl", "fireworks"), ("assistant", "final"), (False, True), (True, False), (None, 40, 0)
    )
)


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return all_rows()


def _both(tmp_path: Path, rows: Any, source: Any = None, **options: Any) -> tuple[Any, Any, Any, Any]:
    """(our report, our rows, whileai's report, whileai's rows) for one export."""
    from whileai.simulations import export_dataset as theirs

    ref_report = theirs(rows, str(tmp_path / "theirs.jsonl"), **options)
    our_report = whileai_datasets.export_dataset(
        rows if source is None else source, str(tmp_path / "ours.jsonl"), **options
    )
    for report in (ref_report, our_report):
        report.pop("path")
    their_rows = read_jsonl(tmp_path / "theirs.jsonl")
    return (
        our_report,
        read_jsonl(tmp_path / "ours.jsonl"),
        with_rows_without_loss(json.loads(json.dumps(ref_report)), their_rows),
        their_rows,
    )


@pytest.mark.parametrize(("fmt", "mask_mode", "unroll", "strip_think", "max_chars"), GRID)
def test_export_rows_and_report_equal_whileai(
    tmp_path: Path,
    rows: list[dict[str, Any]],
    fmt: str,
    mask_mode: str,
    unroll: bool,
    strip_think: bool,
    max_chars: int | None,
) -> None:
    options = dict(
        system_prompt=SYSTEM,
        tools=TOOLS,
        format=fmt,
        mask_mode=mask_mode,
        unroll=unroll,
        strip_think=strip_think,
        max_tool_output_chars=max_chars,
        validate=False,
    )
    ours, our_rows, theirs, their_rows = _both(tmp_path, rows, **options)
    assert our_rows == their_rows
    assert ours == theirs


@pytest.mark.parametrize(("fmt", "unroll"), [("openai", True), ("trl", False), ("fireworks", True)])
def test_export_from_a_jsonl_path_equals_whileai(
    tmp_path: Path, rows: list[dict[str, Any]], fmt: str, unroll: bool
) -> None:
    path = str(write_jsonl(tmp_path / "run.jsonl", rows))
    ours, our_rows, theirs, their_rows = _both(
        tmp_path,
        path,
        system_prompt=SYSTEM,
        tools=TOOLS,
        format=fmt,
        unroll=unroll,
        max_tool_output_chars=40,
        validate=False,
    )
    assert our_rows == their_rows
    assert ours == theirs


def test_export_without_tools_or_system_prompt_equals_whileai(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    ours, our_rows, theirs, their_rows = _both(tmp_path, rows, validate=False)
    assert our_rows == their_rows
    assert ours == theirs


@pytest.mark.parametrize("fmt", ["openai", "trl", "fireworks"])
def test_validate_refuses_what_whileai_refuses(tmp_path: Path, rows: list[dict[str, Any]], fmt: str) -> None:
    from whileai.simulations import export_dataset as theirs

    with pytest.raises(ValueError, match="tool_call_roundtrip_invalid") as their_error:
        theirs(rows, str(tmp_path / "theirs.jsonl"), tools=TOOLS, format=fmt)
    with pytest.raises(ValueError, match="tool_call_roundtrip_invalid") as our_error:
        whileai_datasets.export_dataset(rows, str(tmp_path / "ours.jsonl"), tools=TOOLS, format=fmt)
    numbers = str(their_error.value).split(";")[0]
    assert numbers.split(": ", 1)[1] in str(our_error.value)
    assert not (tmp_path / "ours.jsonl").exists()


def test_validate_refuses_privileged_leaks_like_whileai(tmp_path: Path) -> None:
    from whileai.simulations import export_dataset as theirs

    rows = seeded_rows(1, "rl", repeats=3, budget=12) + edge_rows()[-2:]
    with pytest.raises(ValueError, match="privileged_leak") as their_error:
        theirs(rows, str(tmp_path / "theirs.jsonl"), tools=TOOLS)
    with pytest.raises(ValueError, match="privileged_leak: ") as our_error:
        whileai_datasets.export_dataset(rows, str(tmp_path / "ours.jsonl"), tools=TOOLS)
    assert str(their_error.value).split(" rows quote")[0] in str(our_error.value)
    assert not (tmp_path / "ours.jsonl").exists()


def test_a_row_with_no_messages_is_refused_like_whileai(tmp_path: Path) -> None:
    from whileai.simulations import export_dataset as theirs

    rows = [{"prompt": "", "steps": []}]
    with pytest.raises(ValueError, match="0:messages_missing"):
        theirs(rows, str(tmp_path / "theirs.jsonl"))
    # refused as the row is read, naming the keys it has (an ExportFormatError is a ValueError)
    with pytest.raises(ValueError, match=r"rows row 0: no conversation to train on: the row has 'prompt', 'steps'"):
        whileai_datasets.export_dataset(rows, str(tmp_path / "ours.jsonl"))


def test_a_row_with_no_conversation_is_refused_where_whileai_writes_a_system_only_one(tmp_path: Path) -> None:
    """A deliberate difference (README): with a system prompt, whileai exports an eval row
    (``question`` / ``reply``) as a conversation of the system message alone, which trains nothing."""
    from whileai.simulations import export_dataset as theirs

    rows = [{"question": "What is 2 + 2?", "reply": "4"}]
    theirs(rows, str(tmp_path / "theirs.jsonl"), system_prompt=SYSTEM, validate=False)
    assert [row["messages"] for row in read_jsonl(tmp_path / "theirs.jsonl")] == [[{"role": "system", "content": SYSTEM}]]
    with pytest.raises(ExportFormatError, match=r"rows row 0: no conversation to train on: the row has 'question', "
                       r"'reply'\. Did you mean 'prompt' for 'question'\? Did you mean 'response' for 'reply'\? "
                       r"A trainable row holds `messages`"):
        whileai_datasets.export_dataset(rows, str(tmp_path / "ours.jsonl"), system_prompt=SYSTEM, validate=False)
    assert not (tmp_path / "ours.jsonl").exists()


# ---------------------------------------------------------------- preference


def _pairs() -> list[dict[str, Any]]:
    from whileai.simulations.score.judging import build_preference_pairs

    rows = seeded_rows(1, "rl", repeats=3, budget=12) + seeded_rows(2, "rl", repeats=4, budget=12)
    for row in rows:
        row["reward"] = 1.0 if row["reward"] is None else row["reward"]
    pairs, _ = build_preference_pairs(rows, min_margin=0.2)
    edge = edge_rows()
    # the sides differ first in argument key order, which TRL compares as dicts
    left, right = json.loads(json.dumps(edge[5])), json.loads(json.dumps(edge[5]))
    left["messages"][1]["tool_calls"][0]["arguments"] = '{"order_id": "L", "x": 1}'
    right["messages"][1]["tool_calls"][0]["arguments"] = '{"x": 1, "order_id": "L"}'
    right["messages"][3]["content"] = "Different."
    hand_made = [
        {"prompt": "tie", "chosen": edge[0], "rejected": edge[1], "tie": True, "margin": 0.0},
        {
            "prompt": None,
            "chosen": edge[5],
            "rejected": edge[6],
            "margin": 0.4,
            "length_delta": 3,
            "first_turn_differs": False,
        },
        {"prompt": "same", "chosen": edge[0], "rejected": edge[0], "length_delta": -2},
        {
            "prompt": ["a", "list"],
            "chosen": edge[7],
            "rejected": edge[8],
            "margin": 0.7,
            "first_turn_differs": True,
            "length_delta": 5,
        },
        {"prompt": "keys", "chosen": left, "rejected": right, "margin": 1.0},
        {"prompt": "tool first", "chosen": edge[2], "rejected": edge[3], "length_delta": 1},
    ]
    return json.loads(json.dumps(pairs, default=str)) + hand_made


@pytest.fixture(scope="module")
def pairs() -> list[dict[str, Any]]:
    return _pairs()


@pytest.mark.parametrize(
    ("fmt", "strip_think", "drop_ties", "system", "tools"),
    list(
        itertools.product(("openai", "trl", "fireworks"), (True, False), (True, False), (SYSTEM, None), (TOOLS, None))
    ),
)
def test_preference_rows_and_report_equal_whileai(
    tmp_path: Path, pairs: list[dict[str, Any]], fmt: str, strip_think: bool, drop_ties: bool, system: Any, tools: Any
) -> None:
    from whileai.simulations import export_preference as theirs

    options = dict(
        system_prompt=system, tools=tools, format=fmt, strip_think=strip_think, drop_ties=drop_ties, validate=False
    )
    their_report = json.loads(json.dumps(theirs(pairs, str(tmp_path / "theirs.jsonl"), **options)))
    our_report = whileai_datasets.export_preference(pairs, str(tmp_path / "ours.jsonl"), **options)
    their_report.pop("path")
    our_report.pop("path")
    assert read_jsonl(tmp_path / "ours.jsonl") == read_jsonl(tmp_path / "theirs.jsonl")
    assert our_report == their_report


def test_preference_with_no_contrast_is_refused_like_whileai(tmp_path: Path) -> None:
    from whileai.simulations import export_preference as theirs

    edge = edge_rows()
    same = [{"prompt": "same", "chosen": edge[0], "rejected": edge[0]}]
    with pytest.raises(ValueError, match="no_preference_pairs"):
        theirs(same, str(tmp_path / "theirs.jsonl"), format="trl")
    with pytest.raises(ValueError, match="no_preference_pairs"):
        whileai_datasets.export_preference(same, str(tmp_path / "ours.jsonl"), format="trl")
    their_report = theirs(same, None, format="fireworks", validate=False)
    assert whileai_datasets.export_preference(same, None, format="fireworks", validate=False) == their_report


def test_preference_refuses_entries_that_are_not_pairs_like_whileai(tmp_path: Path) -> None:
    from whileai.simulations import export_preference as theirs

    bad = [{"prompt": "x", "chosen": [{"role": "assistant", "content": "a"}], "rejected": {}}]
    with pytest.raises(ValueError, match="1 of 1 entries have no chosen/rejected side"):
        theirs(bad)
    with pytest.raises(ValueError, match="1 of 1 entries have no chosen/rejected side"):
        whileai_datasets.export_preference(bad)
