"""The transforms inside datasets: cache hits, num_proc, streaming, plain formatting."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from whileai_datasets import transforms as wai_transforms

from .conftest import edge_rows, seeded_rows

PIPELINE = [
    wai_transforms.strip_think,
    wai_transforms.truncate_tool_output(40),
    wai_transforms.loss_mask("final"),
    wai_transforms.unroll,
    wai_transforms.to_openai,
]


@pytest.fixture
def ds(load_canonical: Any) -> Any:
    return load_canonical(seeded_rows(0, "sft") + edge_rows(), system_prompt="S")


def _run(ds: Any, **kwargs: Any) -> Any:
    for transform in PIPELINE:
        ds = ds.map(transform, batched=True, **kwargs)
    return ds


def test_a_second_run_hits_the_cache(ds: Any) -> None:
    first = _run(ds.with_format("arrow"))
    second = _run(ds.with_format("arrow"))
    assert second._fingerprint == first._fingerprint
    assert [f["filename"] for f in second.cache_files] == [f["filename"] for f in first.cache_files]


def test_transform_hashes_are_the_same_in_another_process() -> None:
    code = (
        "import whileai_datasets.transforms as t;from datasets.fingerprint import Hasher;"
        "print([Hasher.hash(x) for x in (t.strip_think, t.truncate_tool_output(40), t.loss_mask('final'),"
        " t.unroll, t.to_trl('completion'), t.to_openai, t.to_fireworks)])"
    )
    runs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    }
    assert len(runs) == 1
    assert wai_transforms.truncate_tool_output(40) == wai_transforms.truncate_tool_output(40)


def test_num_proc_two_gives_the_same_rows(ds: Any) -> None:
    one = _run(ds.with_format("arrow"))
    two = _run(ds.with_format("arrow"), num_proc=2, load_from_cache_file=False)
    assert two.with_format(None).to_list() == one.with_format(None).to_list()


def test_plain_formatting_gives_the_same_rows_as_arrow(ds: Any) -> None:
    arrow = _run(ds.with_format("arrow"))
    plain = _run(ds)
    assert list(plain) == list(arrow.with_format(None))
    assert plain.features == arrow.features


def test_iterable_dataset_map_gives_the_same_rows(ds: Any) -> None:
    import pyarrow as pa

    prepared = _run(ds.with_format("arrow"))
    expected = list(prepared.with_format(None))
    streamed = ds.to_iterable_dataset().with_format("arrow")
    for transform in PIPELINE:
        streamed = streamed.map(transform, batched=True, batch_size=7)
    tables = list(streamed.iter(batch_size=10))
    assert pa.concat_tables(tables).to_pylist() == prepared.data.to_pylist()
    plain = ds.to_iterable_dataset()
    for transform in PIPELINE[:-1]:
        plain = plain.map(transform, batched=True, batch_size=5)
    plain = plain.map(wai_transforms.to_openai, batched=True, remove_columns=ds.column_names)
    assert list(plain) == expected


def test_with_indices_is_accepted(ds: Any) -> None:
    out = ds.with_format("arrow").map(wai_transforms.strip_think, batched=True, with_indices=True)
    assert out.num_rows == ds.num_rows
