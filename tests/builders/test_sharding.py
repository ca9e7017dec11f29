"""A big plain JSONL file is read as byte-range shards: same rows, same order,
same line and row numbers as one shard, with or without num_proc, streamed or not."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import whileai_datasets
from tests.conftest import DATA, read_jsonl, seeded_rows, write_jsonl
from whileai_datasets import BadRowsWarning, ExportFormatError, OptionError
from whileai_datasets.reading.reader import (
    LinePosition,
    count_lines,
    iter_jsonl_rows,
    iter_line_range,
    line_start_at_or_after,
)

#: small enough that the test file has dozens of shards, several lines each
SHARD = 16 << 10


@pytest.fixture(scope="module")
def lines() -> list[str]:
    """A few hundred rows of every shape, as JSONL lines (about 2.5 KB each)."""
    rows = seeded_rows(seed=1, mode="rl", repeats=3, budget=300)
    for fixture in ("engine_multiturn.jsonl", "otel.jsonl", "messages_rows.jsonl", "platform_pull.jsonl"):
        rows[len(rows) // 2 : len(rows) // 2] = read_jsonl(DATA / fixture)
    return [json.dumps(row, ensure_ascii=False) for row in rows]


def _line_starts(path: Path) -> list[int]:
    starts, offset = [], 0
    with open(path, "rb") as handle:
        for raw in handle:
            starts.append(offset)
            offset += len(raw)
    return starts


def _middle_of_shard(path: Path, shard_bytes: int, fraction: float) -> int:
    """The index of a line starting mid-way through the shard ``fraction`` into the file."""
    starts = _line_starts(path)
    shard = int(path.stat().st_size * fraction) // shard_bytes
    middle = shard * shard_bytes + shard_bytes // 2
    index = min(range(len(starts)), key=lambda i: abs(starts[i] - middle))
    assert shard * shard_bytes < starts[index] < (shard + 1) * shard_bytes
    return index


# ------------------------------------------------------------------ reader


def _naive(content: bytes) -> list[tuple[int, int]]:
    """(line, row) of every non-blank line, as one pass over the file numbers them."""
    return [(ctx.line, ctx.row) for ctx, _ in iter_jsonl_rows(io.BytesIO(content), "f")]


def _sharded(content: bytes, shard_bytes: int, block_bytes: int) -> list[tuple[int, int]]:
    handle = io.BytesIO(content)
    seen: list[tuple[int, int]] = []
    for start in range(0, max(len(content), 1), shard_bytes):
        end = min(start + shard_bytes, len(content))
        begin = line_start_at_or_after(handle, start)
        position = LinePosition(begin, *count_lines(handle, 0, begin, block_bytes))
        seen += [(ctx.line, ctx.row) for ctx, _ in iter_jsonl_rows(iter_line_range(handle, position, end), "f", position)]
        # the range stops at the next range's first line, with the counts before it
        assert position.offset == line_start_at_or_after(handle, end)
        assert (position.line, position.row) == count_lines(handle, 0, position.offset, block_bytes)
    return seen


TRICKY = (
    b'{"a": 1}\n\n  \n{"b": 2}\r\n\r\n\t\n{"c": 3}\n \x0b\x0c\n  {"d":\n4}\n\n\n{"e": 5}\r\n \r\n{"f": 6}'
)


@pytest.mark.parametrize("content", [TRICKY, TRICKY + b"\n", TRICKY.replace(b"\n", b"\r\n"), b"\n\n\n", b"", b"{}"])
@pytest.mark.parametrize("block_bytes", [1, 3, 8, 1 << 20])
def test_every_line_is_read_by_one_range_with_its_own_numbers(content: bytes, block_bytes: int) -> None:
    expected = _naive(content)
    for shard_bytes in range(1, len(content) + 2):
        assert _sharded(content, shard_bytes, block_bytes) == expected, shard_bytes


@settings(max_examples=200, deadline=None)
@given(
    # lines made of whitespace (blank) and of other bytes, in any mix
    st.lists(
        st.lists(st.sampled_from([b" ", b"\r", b"\t", b"\x0b", b"\x0c", b"{}", b"x", b"\xc3\xa9"]), max_size=4).map(
            b"".join
        ),
        max_size=12,
    ),
    st.booleans(),
    st.integers(1, 12),
    st.integers(1, 9),
)
def test_counting_agrees_with_reading_on_any_blank_lines(
    pieces: list[bytes], trailing_newline: bool, shard_bytes: int, block_bytes: int
) -> None:
    content = b"\n".join(pieces) + (b"\n" if trailing_newline and pieces else b"")
    assert _sharded(content, shard_bytes, block_bytes) == _naive(content)


# ------------------------------------------------------------------ builder


@pytest.mark.parametrize(("shard_bytes", "num_proc"), [(2048, None), (SHARD, None), (2048, 2), (SHARD, 2)])
def test_sharded_load_equals_one_shard_row_for_row(
    tmp_path: Path, load: Any, lines: list[str], shard_bytes: int, num_proc: int | None
) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", lines)
    whole = load(path, shard_bytes=0, cache_dir=str(tmp_path / "whole"))
    sharded = load(path, shard_bytes=shard_bytes, num_proc=num_proc, cache_dir=str(tmp_path / "sharded"))
    assert sharded.num_rows == len(lines)
    assert list(sharded) == list(whole)
    if num_proc:
        assert len(sharded.cache_files) == num_proc  # one Arrow file per job: it ran in parallel


def test_streaming_reads_the_shards_in_order(tmp_path: Path, load: Any, lines: list[str]) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", lines)
    streamed = load(path, shard_bytes=SHARD, streaming=True)
    assert streamed.num_shards == -(-path.stat().st_size // SHARD)
    assert list(streamed) == list(load(path, shard_bytes=0))


@pytest.mark.parametrize("num_proc", [None, 2])
@pytest.mark.parametrize(
    ("bad_line", "problem"),
    [
        ('{"prompt": "cut off', "not valid JSON"),
        (json.dumps({"messages": [{"role": "Assistant", "content": "hi"}]}), r"messages\[0\]\.role: expected one of"),
    ],
)
def test_a_bad_line_in_a_later_shard_names_its_exact_line_and_row(
    tmp_path: Path, load: Any, lines: list[str], num_proc: int | None, bad_line: str, problem: str
) -> None:
    # blank lines early on make line and row numbers differ
    rows = [*lines[:5], "", "   ", *lines[5:]]
    path = write_jsonl(tmp_path / "run.jsonl", rows)
    index = _middle_of_shard(path, SHARD, 0.7)
    rows[index] = bad_line
    path = write_jsonl(path, rows)
    where = rf"run\.jsonl line {index + 1} \(row {index - 2}\)"
    with pytest.raises(ExportFormatError, match=where) as whole:
        load(path, shard_bytes=0, cache_dir=str(tmp_path / "whole"))
    with pytest.raises(ExportFormatError, match=where + ".*" + problem) as sharded:
        load(path, shard_bytes=SHARD, num_proc=num_proc, cache_dir=str(tmp_path / "sharded"))
    assert str(sharded.value) == str(whole.value)


@pytest.mark.parametrize("streaming", [False, True])
def test_raw_source_lines_count_from_one_across_shards(
    tmp_path: Path, load: Any, lines: list[str], streaming: bool
) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", lines)
    kwargs: dict[str, Any] = {"streaming": True} if streaming else {"num_proc": 2}
    ds = load(path, "raw", shard_bytes=SHARD, **kwargs)
    assert [row["source_line"] for row in ds] == list(range(1, len(lines) + 1))


def _untidy_file(path: Path, lines: list[str], newline: str, bad: dict[int, str] | None = None) -> list[int]:
    """``lines`` with blank lines of every kind between them, ``newline``
    endings and no newline after the last; returns the non-blank line numbers."""
    blanks = ["", "  ", "\t", "\r", " \x0b\x0c "]
    out: list[str] = []
    numbers: list[int] = []
    for i, line in enumerate(lines):
        if i % 7 == 3:
            out += blanks[: 1 + i % len(blanks)]
        out.append((bad or {}).get(i, line))
        numbers.append(len(out))
    path.write_bytes(newline.join(out).encode("utf-8"))
    return numbers


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_blank_lines_crlf_and_a_last_line_without_newline(
    tmp_path: Path, load: Any, lines: list[str], newline: str
) -> None:
    path = tmp_path / "run.jsonl"
    numbers = _untidy_file(path, lines, newline)
    assert not path.read_bytes().endswith(b"\n")
    whole = load(path, "raw", shard_bytes=0, cache_dir=str(tmp_path / "whole"))
    sharded = load(path, "raw", shard_bytes=2048, num_proc=2, cache_dir=str(tmp_path / "sharded"))
    assert [row["source_line"] for row in whole] == numbers
    assert list(sharded) == list(whole)


def test_skip_mode_counts_and_locations_equal_one_shard(tmp_path: Path, load: Any, lines: list[str]) -> None:
    path = tmp_path / "run.jsonl"
    bad = {i: "{oops" if i % 2 else "[1]" for i in range(10, len(lines), 37)}
    numbers = _untidy_file(path, lines, "\r\n", bad)
    first = rf"first: run\.jsonl line {numbers[10]} \(row 10\): expected a JSON object, got list"
    with pytest.warns(BadRowsWarning, match=rf"skipped {len(bad)} bad row\(s\).*{first}") as single:
        whole = load(path, shard_bytes=0, on_bad_row="skip", cache_dir=str(tmp_path / "whole"))
    with pytest.warns(BadRowsWarning, match=rf"skipped {len(bad)} bad row\(s\).*{first}") as parallel:
        sharded = load(path, shard_bytes=SHARD, num_proc=2, on_bad_row="skip", cache_dir=str(tmp_path / "sharded"))
    assert [sum(issubclass(w.category, BadRowsWarning) for w in warned) for warned in (single, parallel)] == [1, 1]
    assert len(sharded.cache_files) == 2
    report = whileai_datasets.bad_rows(sharded)
    assert report == whileai_datasets.bad_rows(whole)
    assert report["count"] == len(bad)
    assert report["locations"] == [f"run.jsonl line {numbers[i]} (row {i})" for i in sorted(bad)]
    assert list(sharded) == list(whole)
    assert sharded.num_rows == len(lines) - len(bad)


def test_streaming_skip_mode_warns_once_per_file(tmp_path: Path, load: Any, lines: list[str]) -> None:
    bad = {i: "{oops" for i in range(10, len(lines), 37)}
    path = write_jsonl(tmp_path / "run.jsonl", [bad.get(i, line) for i, line in enumerate(lines)])
    streamed = load(path, shard_bytes=SHARD, on_bad_row="skip", streaming=True)
    with pytest.warns(BadRowsWarning, match=rf"skipped {len(bad)} bad row\(s\).*; first: run\.jsonl line 11 \(row 10\)") as got:
        rows = list(streamed)
    assert sum(issubclass(w.category, BadRowsWarning) for w in got) == 1
    assert len(rows) == len(lines) - len(bad)


def test_shard_bytes_is_not_part_of_the_cache_key(tmp_path: Path, load: Any, lines: list[str]) -> None:
    # the rows do not depend on it, so a changed shard_bytes reuses the prepared dataset
    path = write_jsonl(tmp_path / "run.jsonl", lines)
    sharded = load(path, shard_bytes=2048, num_proc=2)
    again = load(path, shard_bytes=0)
    assert again.cache_files == sharded.cache_files
    assert list(again) == list(sharded)
    fresh = load(path, shard_bytes=0, cache_dir=str(tmp_path / "fresh"))
    assert list(fresh) == list(sharded)


def test_compressed_files_stay_one_shard(tmp_path: Path, load: Any, lines: list[str]) -> None:
    path = tmp_path / "run.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(line + "\n" for line in lines)
    assert path.stat().st_size > 2048
    streamed = load(path, shard_bytes=2048, streaming=True)
    assert streamed.num_shards == 1
    assert list(load(path, shard_bytes=2048, num_proc=2)) == list(streamed)


@pytest.mark.parametrize("value", [-1, "64MB", 1.5, True])
def test_bad_shard_bytes_are_refused(load: Any, value: Any) -> None:
    with pytest.raises(OptionError, match=r"^shard_bytes must be a whole number, 0 or more, got"):
        load(DATA / "otel.jsonl", shard_bytes=value)
