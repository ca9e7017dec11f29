"""The gates: tool-call round trip and privileged leaks, against whileai's."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from whileai_datasets import transforms as wai_transforms
from whileai_datasets.errors import ExportFormatError, OptionError
from whileai_datasets.transforms import gates, think

from .conftest import (
    all_rows,
    canonical,
    edge_rows,
    reference,
    roundtrip,
    seeded_rows,
    with_tools,
    write_jsonl,
    written,
)


@pytest.mark.parametrize(
    ("fmt", "shape"),
    [
        ("openai", wai_transforms.to_openai),
        ("trl", wai_transforms.to_trl("training")),
        ("trl", wai_transforms.to_trl("completion")),
        ("fireworks", wai_transforms.to_openai),
        ("trl", wai_transforms.to_openai),
        ("openai", wai_transforms.to_trl("training")),
    ],
)
def test_roundtrip_report_equals_whileai(fmt: str, shape: Any) -> None:
    from whileai.simulations import tool_call_roundtrip as theirs

    table = shape(with_tools(think.strip_table(canonical(all_rows()))))
    assert wai_transforms.tool_call_roundtrip(table, format=fmt) == theirs(written(table), format=fmt)


def test_roundtrip_counts_a_dataset_batch_by_batch() -> None:
    import datasets

    table = wai_transforms.to_openai(canonical(edge_rows() * 30))
    ds = datasets.Dataset(table)
    assert wai_transforms.tool_call_roundtrip(ds) == wai_transforms.tool_call_roundtrip(table)


def test_roundtrip_rejects_an_unknown_format() -> None:
    with pytest.raises(OptionError, match="^format must be one of 'openai', 'trl', 'fireworks', got 'jsonl'"):
        wai_transforms.tool_call_roundtrip(canonical(edge_rows()), format="jsonl")


def test_arguments_checks_equal_pythons_json_on_odd_texts() -> None:
    import pyarrow as pa

    from whileai_datasets.columnar import _arguments
    from whileai_datasets.rows.normalize import decode_arguments

    texts = [
        '{"a": 1}',
        "{} {}",
        '{"a": NaN}',
        '{"a": 1e999}',
        '{"a": "\\ud800"}',
        '{"a":1,}',
        "{",
        '"{\\"a\\": 1}"',
        '{"a": 1}\n',
        "[1]",
        "7",
        "text",
        '{"x": {"y": [1, {"z": null}]}}',
        "{\x00}",
        "{}",
    ]
    parses, decodes, trl = _arguments.arguments_info(pa.array(texts))
    assert parses.tolist() == [isinstance(_loads(t), dict) for t in texts]
    assert decodes.tolist() == [isinstance(decode_arguments(t), dict) for t in texts]
    values = [json.loads(t) for t in trl.storage.to_pylist()]
    for text, value in zip(texts, values):
        if text != '{"a": NaN}':  # NaN is not equal to itself
            assert value == decode_arguments(text)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _leaky_rows() -> list[dict[str, Any]]:
    return seeded_rows(1, "rl", repeats=3, budget=12) + edge_rows()


def test_leak_report_equals_whileai() -> None:
    from whileai.simulations.score.privileged import leak_report as theirs

    rows = _leaky_rows()
    assert wai_transforms.leak_report(rows) == roundtrip(dict(theirs(rows)))
    scrubbed = [{k: v for k, v in r.items() if k != "privileged"} for r in rows]
    assert wai_transforms.leak_report(scrubbed) == roundtrip(dict(theirs(scrubbed)))
    assert wai_transforms.leak_report([{"prompt": "x"}]) == roundtrip(dict(theirs([{"prompt": "x"}])))


@pytest.mark.parametrize("compress", [False, True])
def test_leak_scan_of_a_file_equals_whileai(tmp_path: Path, compress: bool) -> None:
    from whileai.simulations.score.privileged import leak_report as theirs

    rows = _leaky_rows()
    path = write_jsonl(tmp_path / "rows.jsonl", rows)
    if compress:
        path.with_suffix(".jsonl.gz").write_bytes(gzip.compress(path.read_bytes()))
        path = path.with_suffix(".jsonl.gz")
    assert gates.scan_jsonl_leaks(str(path), len(rows)) == roundtrip(dict(theirs(rows)))


def test_leak_scan_reads_a_key_split_across_blocks(tmp_path: Path) -> None:
    from whileai.simulations.score.privileged import leak_report as theirs

    rows = _leaky_rows()
    path = write_jsonl(tmp_path / "rows.jsonl", rows)
    lines = list(gates._lines_with(str(path), b'"privileged"', block=97))
    assert len(lines) == sum(1 for r in rows if "privileged" in r)
    assert reference(rows[:1])  # the oracle is importable with these rows
    assert gates.scan_jsonl_leaks(str(path), len(rows)) == roundtrip(dict(theirs(rows)))
