"""Salvage on the Ray engine: ``ray_engine.tokenize(..., salvage=True)`` and ``audit(..., engine="ray",
salvage=True)`` give what the local ``tokenize`` and ``audit`` give with the same option."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests.conftest import write_jsonl
from tests.support import ray_session
from tests.support.salvage_rows import REFUSED, ROWS, salvage_tokenizer

pytest.importorskip("ray.data")

import ray

from whileai_datasets import audit, ray_engine
from whileai_datasets.tokenize.notices import SalvagedRowsWarning
from whileai_datasets.tokenize.token_masks import tokenize

pytestmark = [pytest.mark.ray, pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")]
KEY = ["source_file", "source_offset"]
TOKENS = ["input_ids", "assistant_masks", "num_supervised_tokens"]

ray_runtime = pytest.fixture(scope="module", autouse=True)(ray_session.local_runtime)


@pytest.fixture(scope="module")
def rows_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("ray-salvage") / "rows.jsonl", ROWS)


@pytest.mark.parametrize("name", list(REFUSED))
def test_ray_tokenize_with_salvage_gives_the_local_salvaged_rows(name: str, rows_file: Path, tmp_path: Path) -> None:
    import datasets

    tokenizer = salvage_tokenizer(name)
    tokenizer.save_pretrained(tmp_path / "tok")  # each actor builds it from its folder
    ds = datasets.load_dataset("whileai/export", data_files=str(rows_file), split="train", cache_dir=str(tmp_path))
    with pytest.warns(SalvagedRowsWarning):
        local = tokenize(tokenizer, salvage=True)(ds.with_format("arrow")[:])
    ours = ray_engine.tokenize(ray_engine.read_whileai(rows_file, row_key=True), str(tmp_path / "tok"),
                               concurrency=1, salvage=True)
    table = pa.concat_tables(t for t in ray.get(ours.to_arrow_refs()) if t.num_rows)
    table = table.take(pc.sort_indices(table, sort_keys=[(k, "ascending") for k in KEY]))
    assert local.num_rows == len(ROWS)  # every refused row trains its first exchange
    assert table.select(TOKENS).to_pylist() == local.select(TOKENS).to_pylist()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the rows it drops are warned about: counted below
        without = ray_engine.tokenize(ray_engine.read_whileai(rows_file), str(tmp_path / "tok"), concurrency=1,
                                      on_bad_row="skip")
        assert without.count() == len(ROWS) - len(REFUSED[name])  # the option reached the actors


@pytest.mark.parametrize("name", list(REFUSED))
def test_the_ray_audit_with_salvage_equals_the_local_one(name: str, rows_file: Path) -> None:
    tokenizer = salvage_tokenizer(name)
    local = audit(str(rows_file), tokenizer=tokenizer, salvage=True, trl_default=True)
    ours = audit(str(rows_file), tokenizer=tokenizer, salvage=True, engine="ray", trl_default=True)
    found = local.to_dict()["findings"]
    assert [f["row"] for f in found["salvaged"]["first"]] == REFUSED[name] and found["bad_rows"]["rows"] == 0
    mine, theirs = ours.to_dict(), local.to_dict()
    for histogram in theirs["histograms"]:  # float sums added in another order (per block, not per chunk)
        assert mine["histograms"][histogram].pop("mean") == pytest.approx(theirs["histograms"][histogram].pop("mean"))
    assert mine == theirs
