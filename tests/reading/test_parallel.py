"""Worker processes parse one plain JSONL file in pieces: same rows, order,
line numbers, errors and bad-row reports as one process, and the leak facts
the export needs are taken on the way, equal to whileai's report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import whileai_datasets
from tests.conftest import DATA, read_jsonl, seeded_rows, write_jsonl
from whileai_datasets import BadRowsWarning, ExportFormatError, OptionError
from whileai_datasets.builders.bad_rows import leak_facts
from whileai_datasets.reading import parallel
from whileai_datasets.rows.leaks import LeakScan


@pytest.fixture(scope="module")
def rows() -> list[Any]:
    """A few hundred rows of every shape (about 600 KB of JSONL: a dozen pieces for two workers)."""
    out: list[Any] = seeded_rows(seed=2, mode="rl", repeats=3, budget=240)
    for fixture in ("engine_multiturn.jsonl", "otel.jsonl", "messages_rows.jsonl", "platform_pull.jsonl"):
        out[len(out) // 2 : len(out) // 2] = read_jsonl(DATA / fixture)
    return out


@pytest.fixture
def lines(rows: list[Any]) -> list[str]:
    # blank lines early on make line and row numbers differ
    encoded = [json.dumps(row, ensure_ascii=False) for row in rows]
    return [*encoded[:5], "", "  ", *encoded[5:]]


@pytest.mark.parametrize("shard_bytes", [0, 100 << 10])
def test_workers_give_the_rows_of_one_process_in_order(
    tmp_path: Path, load: Any, lines: list[str], shard_bytes: int
) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", lines)
    one = load(path, parse_workers=1, cache_dir=str(tmp_path / "one"))
    two = load(path, parse_workers=2, shard_bytes=shard_bytes, cache_dir=str(tmp_path / "two"))
    assert two.num_rows == len(lines) - 2
    assert list(two) == list(one)


def test_raw_source_lines_stay_exact_across_pieces(tmp_path: Path, load: Any, lines: list[str]) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", lines)
    ds = load(path, "raw", parse_workers=2)
    expected = [i + 1 for i, line in enumerate(lines) if line.strip()]
    assert [row["source_line"] for row in ds] == expected


@pytest.mark.parametrize(
    ("bad_line", "problem"),
    [
        ('{"prompt": "cut off', "not valid JSON"),
        (json.dumps({"messages": [{"role": "Assistant", "content": "hi"}]}), r"messages\[0\]\.role: expected one of"),
        (json.dumps({"prompt": "x", "reward": "high"}), r"reward: expected a number, got str"),
    ],
)
def test_a_bad_line_in_a_later_piece_names_its_exact_line_and_row(
    tmp_path: Path, load: Any, lines: list[str], bad_line: str, problem: str
) -> None:
    index = int(len(lines) * 0.8)
    lines[index] = bad_line
    path = write_jsonl(tmp_path / "run.jsonl", lines)
    where = rf"run\.jsonl line {index + 1} \(row {index - 2}\)"
    with pytest.raises(ExportFormatError, match=where) as one:
        load(path, parse_workers=1, cache_dir=str(tmp_path / "one"))
    with pytest.raises(ExportFormatError, match=where + ".*" + problem) as two:
        load(path, parse_workers=2, cache_dir=str(tmp_path / "two"))
    assert str(two.value) == str(one.value)


def test_skip_mode_reports_equal_one_process(tmp_path: Path, load: Any, lines: list[str]) -> None:
    wrong_reward = '{"messages": [{"role": "user", "content": "x"}], "reward": true}'
    bad = {i: "{oops" if i % 2 else wrong_reward for i in range(10, len(lines), 41)}
    path = write_jsonl(tmp_path / "run.jsonl", [bad.get(i, line) for i, line in enumerate(lines)])
    with pytest.warns(BadRowsWarning, match=rf"skipped {len(bad)} bad row\(s\)") as warned_one:
        one = load(path, parse_workers=1, on_bad_row="skip", cache_dir=str(tmp_path / "one"))
    with pytest.warns(BadRowsWarning, match=rf"skipped {len(bad)} bad row\(s\)") as warned_two:
        two = load(path, parse_workers=2, on_bad_row="skip", cache_dir=str(tmp_path / "two"))
    bad_warnings = [[w for w in warned if issubclass(w.category, BadRowsWarning)] for warned in (warned_one, warned_two)]
    assert [len(found) for found in bad_warnings] == [1, 1]  # one each (the rows also warn NothingToTrainWarning)
    report = whileai_datasets.bad_rows(two)
    assert report == whileai_datasets.bad_rows(one)
    fields = {i: "" if i % 2 else ", reward" for i in bad}
    assert report["locations"] == [f"run.jsonl line {i + 1} (row {i - 2}){fields[i]}" for i in sorted(bad)]
    assert list(two) == list(one)


def test_this_process_never_scans_the_file_to_count_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, load: Any, lines: list[str]
) -> None:
    """Workers number the lines of their own pieces; a scan of the whole file
    in this process cost a tenth of the parse. Numbers stay exact (above)."""
    from whileai_datasets.builders import whileai_export
    from whileai_datasets.reading import reader

    def scan(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the parent counted lines")

    monkeypatch.setattr(reader, "count_lines", scan)
    monkeypatch.setattr(whileai_export, "count_lines", scan)
    monkeypatch.setattr(parallel, "count_lines", scan, raising=False)  # where an earlier version imported it
    path = write_jsonl(tmp_path / "run.jsonl", lines)
    ds = load(path, "raw", parse_workers=2)
    assert [row["source_line"] for row in ds] == [i + 1 for i, line in enumerate(lines) if line.strip()]


def test_workers_take_tool_schemas_and_a_system_prompt(tmp_path: Path, load: Any, lines: list[str]) -> None:
    """Options that hold tool schemas (dicts) reach the workers (they once failed to key a cache on them)."""
    tools = [{"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}]
    path = write_jsonl(tmp_path / "run.jsonl", lines)
    options = {"tools": tools, "system_prompt": "Be brief."}
    one = load(path, parse_workers=1, cache_dir=str(tmp_path / "one"), **options)
    two = load(path, parse_workers=2, cache_dir=str(tmp_path / "two"), **options)
    assert list(two) == list(one)
    assert {json.dumps(row["tools"], sort_keys=True) for row in two} == {json.dumps(tools, sort_keys=True)}


def test_parse_workers_is_not_part_of_the_cache_key(tmp_path: Path, load: Any, lines: list[str]) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", lines)
    two = load(path, parse_workers=2)
    one = load(path, parse_workers=1)
    assert one.cache_files == two.cache_files
    lines[7] = json.dumps({"prompt": "changed", "final_text": "a changed file is read again"})
    write_jsonl(path, lines)
    changed = load(path, parse_workers=2)
    assert changed.cache_files != two.cache_files
    assert changed[5]["prompt"] == "changed"


@pytest.mark.parametrize("value", [0, -2, "2", 1.5, True])
def test_bad_parse_workers_are_refused(load: Any, value: Any) -> None:
    with pytest.raises(OptionError, match=r"^parse_workers must be a whole number, 1 or more, or None, got"):
        load(DATA / "otel.jsonl", parse_workers=value)


def test_large_files_use_every_core_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "available_cores", lambda: 2)
    assert parallel.resolve_workers(None, parallel.AUTO_MIN_BYTES - 1) == 1
    assert parallel.resolve_workers(None, parallel.AUTO_MIN_BYTES) == 2
    assert parallel.resolve_workers(1, 10 * parallel.AUTO_MIN_BYTES) == 1
    monkeypatch.setattr(parallel, "available_cores", lambda: 64)
    assert parallel.resolve_workers(None, parallel.AUTO_MIN_BYTES) == parallel.MAX_AUTO_WORKERS


# ------------------------------------------------------------------ leak facts


def _leak_report(ds: Any) -> dict[str, Any]:
    facts = leak_facts(ds)
    assert facts is not None
    scan = LeakScan()
    scan.merge(facts)
    return scan.report()


@pytest.mark.parametrize(
    "kwargs", [{"parse_workers": 1}, {"parse_workers": 2}, {"shard_bytes": 100 << 10, "num_proc": 2}]
)
def test_leak_facts_equal_whileais_report(tmp_path: Path, load: Any, rows: list[Any], kwargs: dict[str, Any]) -> None:
    from whileai.simulations.score.privileged import leak_report as theirs

    leaky = [r for r in rows if "privileged" in r]
    assert leaky  # the seeded rows carry their privileged block
    # a reply that quotes it, past the first 20 leaked rows so the count and the kept list differ
    quoting = {**leaky[0], "final_text": str(leaky[0]["privileged"]["reference"]).upper()}
    data = [*rows, *[quoting] * 30]
    path = write_jsonl(tmp_path / "run.jsonl", data)
    ds = load(path, leak_facts=True, **kwargs)
    expected = json.loads(json.dumps(dict(theirs(data))))
    assert expected["n_leaked"] > 20
    assert _leak_report(ds) == expected


def test_a_plain_load_keeps_no_leak_facts(tmp_path: Path, load: Any, lines: list[str]) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", lines)
    assert leak_facts(load(path)) is None


def test_export_from_a_path_reads_the_source_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: list[Any]
) -> None:
    from whileai.simulations import export_dataset as theirs

    from whileai_datasets.transforms import gates

    def second_read(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the leak gate read the source again")

    monkeypatch.setattr(gates, "scan_path_leaks", second_read)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    path = write_jsonl(tmp_path / "run.jsonl", rows)
    options: dict[str, Any] = {"unroll": True, "max_tool_output_chars": 200, "validate": False}
    ours = whileai_datasets.export_dataset(str(path), str(tmp_path / "ours.jsonl"), **options)
    reference = theirs(str(path), str(tmp_path / "theirs.jsonl"), **options)
    assert ours["privileged_leaks"] == json.loads(json.dumps(dict(reference["privileged_leaks"])))
    written, expected = read_jsonl(tmp_path / "ours.jsonl"), read_jsonl(tmp_path / "theirs.jsonl")
    # a row's own tools are kept where whileai drops them (docs/differences.md); everything else is equal
    own = [row.pop("tools") for row, their in zip(written, expected) if "tools" in row and "tools" not in their]
    assert own and all(tools == [{"type": "function", "function": {"name": "a"}}] for tools in own)
    assert written == expected


def test_a_daemonic_process_parses_in_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing

    monkeypatch.setattr(parallel, "available_cores", lambda: 2)
    monkeypatch.setattr(multiprocessing.current_process(), "daemon", True)
    assert parallel.resolve_workers(None, 10 * parallel.AUTO_MIN_BYTES) == 1


def test_a_dead_worker_is_named_with_what_to_do(tmp_path: Path, lines: list[str]) -> None:
    import os
    import signal
    from concurrent.futures.process import BrokenProcessPool

    from whileai_datasets.reading.reader import BadRows, LinePosition
    from whileai_datasets.rows.canonical import Normalizer, Options

    path = write_jsonl(tmp_path / "run.jsonl", lines)
    reader = parallel.RangeReader(Normalizer("default", Options()), workers=2, chunk_rows=100, on_bad_row="raise")
    with reader, open(path, "rb") as handle:
        tables = reader.tables(handle, str(path), "run.jsonl", LinePosition(), path.stat().st_size, BadRows(), None)
        next(tables)
        assert reader._pool is not None
        for pid in list(reader._pool._processes):
            os.kill(pid, signal.SIGKILL)
        with pytest.raises(BrokenProcessPool, match=r"a worker process parsing the file died.*parse_workers=1"):
            list(tables)


def test_pieces_go_to_the_temp_dir_when_shared_memory_is_small(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    class Small:
        f_bavail, f_frsize = 16, 4096  # 64 KB free

    monkeypatch.setattr(os, "statvfs", lambda path: Small())
    assert parallel._scratch_root(2) is None


def test_workers_hand_pieces_over_through_the_temp_dir_too(
    tmp_path: Path, load: Any, lines: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", lines)
    one = load(path, parse_workers=1, cache_dir=str(tmp_path / "one"))
    monkeypatch.setattr(parallel, "_scratch_root", lambda workers: str(tmp_path))
    two = load(path, parse_workers=2, cache_dir=str(tmp_path / "two"))
    assert list(two) == list(one)
    assert not list(tmp_path.glob("whileai-parse-*"))  # removed once read


def test_a_worker_words_its_errors_for_the_surface_its_job_names(tmp_path: Path) -> None:
    """A spawned worker does not inherit the command line's surface: its job carries it."""
    from whileai_datasets import option_names
    from whileai_datasets.reading.parallel import Job, parse_piece
    from whileai_datasets.rows.canonical import Options

    path = write_jsonl(tmp_path / "run.jsonl", ["{oops"])
    job = Job(str(path), "run.jsonl", 0, path.stat().st_size, 0, 0, "default", Options(), 100, "skip", False,
              str(tmp_path / "piece.arrow"), True, "export")
    piece = parse_piece(job)
    assert piece.bad["first_error"].endswith("fix the line or pass --on-bad-row skip.")
    assert option_names.current() == "python"  # and this process is left as it was
