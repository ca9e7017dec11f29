"""truncate_tool_output: whileai's cut, marker and counts, in code points."""

from __future__ import annotations

from typing import Any

import datasets
import pytest

from whileai_datasets import transforms as wai_transforms
from whileai_datasets.errors import OptionError, SchemaError
from whileai_datasets.transforms import tool_output

from .conftest import canonical, edge_rows, messages_table, reference, seeded_rows, written

COUNTS = ("tool_output_truncated", "tool_output_chars_cut")


def _rows() -> list[dict[str, Any]]:
    long = {"role": "tool", "content": "é" * 50 + "😀" * 50 + "\n" * 3}
    return seeded_rows(0, "sft") + edge_rows() + [{"messages": [{"role": "user", "content": "x"}, long, long]}]


@pytest.mark.parametrize("max_chars", [200, 40, 1, 0])
def test_cut_marker_and_counts_equal_whileai(max_chars: Any) -> None:
    rows = _rows()
    table = wai_transforms.truncate_tool_output(max_chars)(canonical(rows))
    ours = written(wai_transforms.to_openai(table))
    theirs = reference(rows, strip_think=False, max_tool_output_chars=max_chars)
    assert [r["messages"] for r in ours] == [r["messages"] for r in theirs]
    assert [{k: r.get(k) for k in COUNTS} for r in ours] == [{k: r.get(k) for k in COUNTS} for r in theirs]


def test_counts_are_code_points_not_bytes() -> None:
    table = messages_table([[{"role": "tool", "content": "😀" * 10}]])
    out = wai_transforms.truncate_tool_output(4)(table).to_pylist()[0]
    assert out["messages"][0]["content"] == "😀" * 4 + "\n[... 6 chars of tool output truncated]"
    assert (out["tool_output_truncated"], out["tool_output_chars_cut"]) == (1, 6)


def test_only_tool_messages_are_cut_and_untouched_rows_have_no_counts() -> None:
    table = messages_table(
        [
            [{"role": "user", "content": "u" * 50}, {"role": "assistant", "content": "a" * 50}],
            [{"role": "tool", "content": "t" * 5}],
        ]
    )
    out = wai_transforms.truncate_tool_output(3)(table).to_pylist()
    assert [m["content"] for m in out[0]["messages"]] == ["u" * 50, "a" * 50]
    assert out[0]["tool_output_truncated"] is None and out[0]["tool_output_chars_cut"] is None
    assert out[1]["tool_output_truncated"] == 1


def test_null_content_and_null_lists_survive() -> None:
    table = messages_table([[{"role": "tool", "content": None}, {"role": "user", "content": None}], None])
    out = wai_transforms.truncate_tool_output(0)(table).to_pylist()
    # whileai reads a null content as "": 0 chars over a cap of 0 is no cut
    assert [m["content"] for m in out[0]["messages"]] == [None, None]
    assert out[1]["messages"] is None and out[1]["tool_output_truncated"] is None


def test_cutting_again_adds_to_the_counts() -> None:
    table = messages_table([[{"role": "tool", "content": "x" * 100}]])
    once = wai_transforms.truncate_tool_output(60)(table)
    twice = wai_transforms.truncate_tool_output(10)(once).to_pylist()[0]
    assert twice["tool_output_truncated"] == 2
    assert twice["tool_output_chars_cut"] == 40 + (60 + len("\n[... 40 chars of tool output truncated]") - 10)


def test_a_sliced_batch_cuts_only_its_own_rows() -> None:
    table = canonical(_rows())
    whole = tool_output.truncate_table(table, 30).to_pylist()
    assert wai_transforms.truncate_tool_output(30)(table.slice(3, 5)).to_pylist() == whole[3:8]


def test_batch_size_one_equals_one_big_batch() -> None:
    ds = datasets.Dataset(canonical(_rows())).with_format("arrow")
    transform = wai_transforms.truncate_tool_output(30)
    one = ds.map(transform, batched=True, batch_size=1)
    big = ds.map(transform, batched=True, batch_size=1000)
    assert one.data.to_pylist() == big.data.to_pylist()


@pytest.mark.parametrize(("value", "shown"), [("200", "str '200'"), (-1, "int -1"), (-5, "int -5"), (7.9, "float 7.9"),
                                              (True, "bool True"), (None, "NoneType None")])
def test_max_chars_must_be_a_whole_number_zero_or_more(value: Any, shown: str) -> None:
    # whileai reads -1 as 0 (every tool output emptied) and 7.9 as 7: refused here, see README
    with pytest.raises(OptionError, match=rf"^max_chars must be a whole number, 0 or more, "
                                          rf"got {shown}\. Pass the number of characters to keep, e\.g\. "
                                          rf"truncate_tool_output\(2000\)\.$"):
        wai_transforms.truncate_tool_output(value)
