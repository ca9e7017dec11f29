"""``ray_engine.tokenize``: the local ``tokenize`` in ``map_batches``, one tokenizer per actor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests.support import ray_session
from tests.conftest import SYSTEM_PROMPT, TOOLS, seeded_rows, write_jsonl

pytest.importorskip("ray.data")

import ray

from whileai_datasets import OptionError, SchemaError, ray_engine
from whileai_datasets.tokenize.token_masks import tokenize

pytestmark = [pytest.mark.ray, pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")]
KEY = ["source_file", "source_offset"]


ray_runtime = pytest.fixture(scope="module", autouse=True)(ray_session.local_runtime)


@pytest.fixture(scope="module")
def rows_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = seeded_rows(seed=4, mode="rl", repeats=3, budget=40)
    return write_jsonl(tmp_path_factory.mktemp("ray-tok") / "rows.jsonl", rows)


def _local(rows_file: Path, tokenizer_dir: Path, cache: Path) -> pa.Table:
    import datasets
    from transformers import AutoTokenizer

    import whileai_datasets  # noqa: F401

    ds = datasets.load_dataset("whileai/export", data_files=str(rows_file), split="train", cache_dir=str(cache),
                               system_prompt=SYSTEM_PROMPT, tools=json.loads(json.dumps(TOOLS)))
    return tokenize(AutoTokenizer.from_pretrained(str(tokenizer_dir)))(ds.with_format("arrow")[:])


def _sorted(table: pa.Table) -> list[dict[str, Any]]:
    order = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in KEY])
    rows: list[dict[str, Any]] = table.take(order).drop_columns(KEY).to_pylist()
    return rows


def test_ray_tokenize_gives_the_local_rows_from_a_tokenizer_directory(rows_file: Path, tokenizer_dir: Path,
                                                                      tmp_path: Path) -> None:
    ds = ray_engine.read_whileai(rows_file, system_prompt=SYSTEM_PROMPT, tools=TOOLS, row_key=True,
                                 block_bytes=16 << 10)
    ours = ray_engine.tokenize(ds, tokenizer_dir, concurrency=1, batch_size=16)  # one CPU left for the reads
    table = pa.concat_tables(t for t in ray.get(ours.to_arrow_refs()) if t.num_rows)
    local = _local(rows_file, tokenizer_dir, tmp_path / "cache")
    assert local.num_rows > 20
    assert _sorted(table) == local.to_pylist()


def test_ray_tokenize_refuses_bad_options_before_any_task(rows_file: Path, tokenizer_dir: Path) -> None:
    ds = ray_engine.read_whileai(rows_file, system_prompt=SYSTEM_PROMPT)
    with pytest.raises(OptionError, match=r"^max_length must be a whole number, 1 or more, or None, got int 0"):
        ray_engine.tokenize(ds, tokenizer_dir, max_length=0)
