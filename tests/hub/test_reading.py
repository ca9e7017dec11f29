"""Publish reads a split chunk by chunk from the Arrow data, through an indices mapping with Arrow
takes, never with datasets' per-row gather (no server needed)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from datasets import Dataset, DatasetDict
from datasets import table as datasets_table

from whileai_datasets.hub import configs, split_by, streaming
from whileai_datasets.hub.reading import chunks, read_all
from whileai_datasets.hub.splits import count_disjoint_groups


def _rows(n: int) -> Dataset:
    conversations = [[{"role": "user", "content": f"ask {i}"}, {"role": "assistant", "content": f"answer {i}"}]
                     for i in range(n)]
    ds = Dataset.from_dict({"messages": conversations, "loss_mask": [[0, 1]] * n,
                            "scenario_id": [f"s{i % 37}" for i in range(n)], "i": list(range(n))})
    # several record batches, as a cached dataset has them
    return Dataset(datasets_table.InMemoryTable(pa.Table.from_batches(ds.data.table.to_batches(max_chunksize=100))))


@pytest.mark.parametrize("stored", ["in memory", "cache file"])
def test_chunks_of_a_selection_are_the_rows_datasets_selects(stored, tmp_path):
    ds = _rows(1000)
    if stored == "cache file":  # read from the file batch by batch, not from the memory map
        from datasets import load_from_disk

        ds.save_to_disk(str(tmp_path / "saved"), max_shard_size="40KB")
        ds = load_from_disk(str(tmp_path / "saved"))
    parts = split_by(ds, "scenario_id", test_size=0.2)
    shuffled = ds.shuffle(seed=3)
    expected = {**{name: part.to_list() for name, part in parts.items()}, "shuffled": shuffled.to_list()}

    got = {name: [row for chunk in chunks(part, rows=64) for row in chunk.to_pylist()]
           for name, part in {**parts, "shuffled": shuffled}.items()}

    assert got == expected
    assert [c.num_rows for c in chunks(parts["train"], rows=300)][:2] == [300, 300]


def test_publish_reads_a_split_by_split_without_the_per_row_gather(monkeypatch):
    ds = _rows(600)
    parts = split_by(ds, "scenario_id", test_size=0.2)
    assert parts["holdout"]._indices is not None  # the case this is about: a selection, not a copy
    expected = {name: part["i"] for name, part in parts.items()}

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("read through datasets' per-row gather")

    monkeypatch.setattr(datasets_table.Table, "fast_gather", refuse)
    groups = count_disjoint_groups(parts, "scenario_id")
    extras = streaming.survey(parts, configs.Extras())
    got = {name: read_all(part).column("i").to_pylist() for name, part in parts.items()}

    assert got == expected
    assert sum(groups.values()) == 37
    assert extras.images is False


def test_built_configs_count_every_chunk(tmp_path):
    parts = DatasetDict(split_by(_rows(900), "scenario_id", test_size=0.2))
    shards: list[streaming.Shard] = []

    built = streaming.build(configs.planned(configs.Extras(images=False)), {"rows": parts}, tmp_path,
                            limit=20_000, done=shards.append)

    by_name = {config.name: config for config in built.configs}
    assert by_name["default"].rows == {name: part.num_rows for name, part in parts.items()}  # one marked turn each
    assert by_name["canonical"].facts["train"]["marked_turns"] == parts["train"].num_rows
    assert len(shards) > 2  # handed on one by one, as each filled up
    assert sorted(s.path for s in built.shards) == sorted(built.paths)
    count = sum(1 for p in built.paths if p.startswith("data/train-"))
    assert f"data/train-00000-of-{count:05d}.parquet" in built.paths
    assert sum(s.rows for s in built.shards if s.path.startswith("data/train-")) == parts["train"].num_rows
