"""``push_to`` publishes the written rows, through the real clients, to the local Hub of tests/hub."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hub.conftest import alice, hub, repo_id  # noqa: F401  (the session's local Hub server and its users)

from ._push_client import (
    export_and_push,
    export_and_push_measured,
    push_and_publish_in_memory,
    repo_shards,
    rows_on_the_hub,
    unique_rollouts,
)
from .conftest import TOOLS, read_jsonl, seeded_rows, write_jsonl


def test_push_to_publishes_the_written_rows_privately(alice: Any, repo_id: str, tmp_path: Path) -> None:  # noqa: F811
    alice.login()  # push_to uses the token `hf auth login` cached, as whileai's does
    source = write_jsonl(tmp_path / "run.jsonl", seeded_rows(0, "sft"))
    output = tmp_path / "train.jsonl"
    out = alice.run(export_and_push, source=str(source), output=str(output), repo_id=repo_id, tools=TOOLS)
    assert out["hub"]["repo_id"] == repo_id and out["hub"]["private"] is True
    assert out["hub"]["splits"] == {"train": out["n"]}
    assert out["hub"]["url"].endswith(f"/datasets/{repo_id}") and out["hub"]["commit"]
    assert len(read_jsonl(output)) == out["n"]
    assert alice.on_another_machine().run(rows_on_the_hub, repo_id=repo_id, token=alice.token) == out["n"]


def test_push_to_publishes_what_publish_makes_of_the_same_rows_held_in_memory(alice: Any, repo_id: str,  # noqa: F811
                                                                              tmp_path: Path) -> None:
    alice.login()
    source = write_jsonl(tmp_path / "run.jsonl", seeded_rows(1, "rl", repeats=2))

    got = alice.run(push_and_publish_in_memory, source=str(source), output=str(tmp_path / "train.jsonl"),
                    repo_id=repo_id, tools=TOOLS)

    assert got["pushed_from_files"] and not got["held_from_files"]  # push_to's rows are read from disk
    assert got["pushed"]["splits"] == got["held"]["splits"]
    ours, theirs = alice.run_each((repo_shards, {"repo_id": repo_id, "token": alice.token}),
                                  (repo_shards, {"repo_id": f"{repo_id}-held", "token": alice.token}))
    assert {"data", "canonical", "messages", "sharegpt"} <= {path.split("/")[0] for path in ours}
    assert ours == theirs  # the same Parquet files, byte for byte (their sha256), at the same paths


def test_push_to_does_not_hold_the_rows_in_memory(alice: Any, repo_id: str, tmp_path: Path) -> None:  # noqa: F811
    alice.login()
    small, large, width = 10_000, 40_000, 1_000  # ~2 KB of text a row, 3 and 10 chunks: 20 MB against 80 MB
    peaks = {}
    alice.run_each(*((unique_rollouts, {"path": str(tmp_path / f"run-{n}.jsonl"), "n": n, "width": width})
                     for n in (small, large)))
    for n in (small, large):  # each measured in a process of its own
        got = alice.run(export_and_push_measured, source=str(tmp_path / f"run-{n}.jsonl"),
                        output=str(tmp_path / f"train-{n}.jsonl"), repo_id=f"{repo_id}-{n}")
        assert got["hub"]["splits"] == {"train": n}
        peaks[n] = got["peak_mb"]

    # Holding the canonical rows (as push_to did) costs several times the 60 MB more text of the larger size.
    assert peaks[large] - peaks[small] < 150, peaks  # the in-memory path: +400 MB here


def test_the_spilled_rows_take_a_later_chunks_wider_columns(tmp_path: Path) -> None:
    import pyarrow as pa

    from whileai_datasets.export.pushing import spill

    first = pa.table({"i": [0, 1], "note": pa.nulls(2)})  # a column typed null so far
    later = pa.table({"i": [2], "note": ["kept"], "tag": pa.array(["a"]).dictionary_encode()})

    ds = spill([first, later], tmp_path / "rows.arrow")

    assert ds.cache_files and ds.to_list() == [{"i": 0, "note": None, "tag": None}, {"i": 1, "note": None, "tag": None},
                                               {"i": 2, "note": "kept", "tag": "a"}]


def test_the_spill_refuses_a_later_chunk_of_another_type_naming_push_to(tmp_path: Path) -> None:
    import pyarrow as pa
    import pytest

    from whileai_datasets.errors import ExportFormatError
    from whileai_datasets.export.pushing import spill

    with pytest.raises(ExportFormatError, match="a later chunk of rows has columns") as caught:
        spill([pa.table({"i": [0]}), pa.table({"i": [{"a": 1}]})], tmp_path / "rows.arrow")
    assert caught.value.location == "push_to"
