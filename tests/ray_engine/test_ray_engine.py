"""The Ray Data engine against the local path, on a local Ray runtime (no cluster).

One runtime (``ray.init(num_cpus=2)``) serves the module. Inputs are a few
thousand rows generated from whileai's seeded agent and the hand-made edge
rows (think blocks, odd arguments, privileged leaks, rows with no agent turn),
replicated with scenario ids that merge into groups of several sizes. Small
read ranges and blocks put many block boundaries inside each file.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from transforms.conftest import SYSTEM, TOOLS, all_rows, read_jsonl, seeded_rows

from tests.conftest import DATA

pytest.importorskip("ray.data")

import ray

import whileai_datasets
from whileai_datasets import ExportFormatError, ray_engine
from whileai_datasets import transforms as wai_transforms
from whileai_datasets.cli import export as export_cli
from whileai_datasets.ray_engine import source as ray_source
from whileai_datasets.tokenize.token_masks import UnsupervisedRowsWarning, tokenize

pytestmark = [
    pytest.mark.ray,
    # Ray Data's DataContext warns about its own deprecated fields while it initialises them
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context"),
]

SMALL: dict[str, Any] = {"range_bytes": 256 << 10, "block_bytes": 48 << 10}
KEY = ["source_file", "source_offset"]


@pytest.fixture(scope="module", autouse=True)
def ray_runtime() -> Any:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    # block order kept, so rows without a row key (Fireworks) compare in order;
    # the export sets this itself, and rows with a key are compared sorted on it
    context.execution_options.preserve_order = True
    yield
    context.execution_options.preserve_order = False
    ray.shutdown()


def generated_rows(copies: int) -> list[dict[str, Any]]:
    """``all_rows()`` ``copies`` times; copy c renames scenarios to ``<id>-<c % 5>``,
    so tasks recur across copies and groups reach several sizes."""
    base = all_rows()
    rows = []
    for c in range(copies):
        for row in base:
            row = dict(row)
            if c and row.get("scenario_id"):
                row["scenario_id"] = f"{row['scenario_id']}-{c % 5}"
            rows.append(row)
    return rows


@pytest.fixture(scope="module")
def rows_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = generated_rows(60)
    path = tmp_path_factory.mktemp("ray") / "run.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        for i, row in enumerate(rows):
            handle.write(json.dumps(row) + "\n")
            if i % 500 == 7:
                handle.write("\n")  # blank lines count as lines, not rows
    return path


def parts(folder: str) -> list[str]:
    return sorted(glob.glob(f"{folder}/part-*"))


def part_lines(folder: str) -> bytes:
    return b"".join(Path(p).read_bytes() for p in parts(folder))


def without_path(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k != "path"}


def test_export_writes_the_local_rows_and_report(rows_file: Path, tmp_path: Path) -> None:
    options: dict[str, Any] = {"system_prompt": SYSTEM, "tools": TOOLS, "max_tool_output_chars": 40, "validate": False}
    local = whileai_datasets.export_dataset(str(rows_file), str(tmp_path / "local.jsonl"), **options)
    ours = ray_engine.export_training(rows_file, tmp_path / "ray.jsonl", **options, **SMALL)
    assert len(parts(str(tmp_path / "ray.jsonl"))) > 1
    assert part_lines(str(tmp_path / "ray.jsonl")) == (tmp_path / "local.jsonl").read_bytes()
    assert without_path(ours) == without_path(local)
    assert ours["groups"] > 10 and ours["tool_call_roundtrip"]["rows"]  # the grid exercised groups and row indices
    assert ours["privileged_leaks"]["n_leaked"] > 20 and ours["warnings"]


def test_export_dataset_with_engine_ray_is_the_ray_export(rows_file: Path, tmp_path: Path) -> None:
    """The front door's ``engine="ray"`` runs the Ray engine with the same options: the local file's bytes and
    report (its parts concatenated), on the runtime this module started."""
    options: dict[str, Any] = {"system_prompt": SYSTEM, "tools": TOOLS, "max_tool_output_chars": 40, "validate": False,
                               "mask_mode": "final"}
    local = whileai_datasets.export_dataset(str(rows_file), str(tmp_path / "local.jsonl"), **options)
    ours = whileai_datasets.export_dataset(str(rows_file), str(tmp_path / "ray.jsonl"), engine="ray", **options)
    assert parts(str(tmp_path / "ray.jsonl")) and ours["path"] == str(tmp_path / "ray.jsonl")
    assert part_lines(str(tmp_path / "ray.jsonl")) == (tmp_path / "local.jsonl").read_bytes()
    assert without_path(ours) == without_path(local)
    assert ours["mask_mode"] == "final"


def test_unrolled_openai_export_writes_the_local_jsonl_bytes(rows_file: Path, tmp_path: Path) -> None:
    """The local JSONL export of unrolled samples puts their per-sample keys first (messages, loss_mask,
    tools, lineage, unroll): the parts do too."""
    options: dict[str, Any] = {"system_prompt": SYSTEM, "tools": TOOLS, "unroll": True, "validate": False}
    whileai_datasets.export_dataset(str(rows_file), str(tmp_path / "local.jsonl"), **options)
    ray_engine.export_training(rows_file, tmp_path / "ray.jsonl", **options, **SMALL)
    local = (tmp_path / "local.jsonl").read_bytes()
    assert list(json.loads(local.splitlines()[0]))[:5] == ["messages", "loss_mask", "tools", "lineage", "unroll"]
    assert part_lines(str(tmp_path / "ray.jsonl")) == local


def test_unrolled_trl_export_gives_the_local_rows(rows_file: Path, tmp_path: Path) -> None:
    options: dict[str, Any] = {
        "system_prompt": SYSTEM,
        "tools": TOOLS,
        "unroll": True,
        "format": "trl",
        "validate": False,
    }
    local = whileai_datasets.export_dataset(str(rows_file), str(tmp_path / "local.jsonl"), **options)
    ours = ray_engine.export_training(rows_file, tmp_path / "ray.jsonl", **options, **SMALL)
    lines = part_lines(str(tmp_path / "ray.jsonl")).decode("utf-8").splitlines()
    assert [json.loads(line) for line in lines] == read_jsonl(tmp_path / "local.jsonl")
    assert without_path(ours) == without_path(local)
    assert ours["no_completion_dropped"] > 0


def test_parquet_parts_sorted_by_row_key_equal_the_local_parquet(rows_file: Path, tmp_path: Path) -> None:
    options: dict[str, Any] = {"system_prompt": SYSTEM, "format": "fireworks", "mask_mode": "final", "validate": False}
    whileai_datasets.export_dataset(str(rows_file), str(tmp_path / "local.parquet"), **options)
    ray_engine.export_training(rows_file, tmp_path / "ray", row_key=True, **options, **SMALL)
    table = pa.concat_tables(pq.read_table(p) for p in parts(str(tmp_path / "ray")))
    table = table.take(pc.sort_indices(table, sort_keys=[(k, "ascending") for k in KEY]))
    assert table.drop_columns(KEY).to_pylist() == pq.read_table(tmp_path / "local.parquet").to_pylist()


def test_a_refused_gate_raises_the_local_error_and_writes_nothing(rows_file: Path, tmp_path: Path) -> None:
    options: dict[str, Any] = {"system_prompt": SYSTEM, "unroll": True}
    with pytest.raises(ExportFormatError, match="tool_call_roundtrip_invalid") as local:
        whileai_datasets.export_dataset(str(rows_file), str(tmp_path / "local.jsonl"), **options)
    with pytest.raises(ExportFormatError, match="tool_call_roundtrip_invalid") as ours:
        ray_engine.export_training(rows_file, tmp_path / "ray", **options, **SMALL)
    assert str(ours.value) == str(local.value)
    assert not (tmp_path / "ray").exists() and not list(tmp_path.glob(".ray.*"))  # nor its temp folder


def test_a_bad_line_fails_with_the_builders_file_and_line(tmp_path: Path) -> None:
    rows = [json.dumps(r) for r in generated_rows(8)]
    rows.insert(301, '{"prompt": "cut off", "messages": [')
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(ExportFormatError, match="line 302") as local:
        whileai_datasets.export_dataset(str(path), str(tmp_path / "local.jsonl"), system_prompt=SYSTEM)
    with pytest.raises(ExportFormatError, match="line 302") as ours:
        ray_engine.export_training(path, tmp_path / "ray", system_prompt=SYSTEM, range_bytes=64 << 10)
    assert str(ours.value) == str(local.value)


def test_read_whileai_gives_the_builders_rows_from_plain_and_gzip_files(
    rows_file: Path, tmp_path: Path, load: Any
) -> None:
    compressed = tmp_path / "run.jsonl.gz"
    with open(rows_file, "rb") as source, gzip.open(compressed, "wb") as target:
        shutil.copyfileobj(source, target)
    local = load(str(rows_file), system_prompt=SYSTEM).with_format("arrow")[:]
    plain = ray_engine.read_whileai(rows_file, system_prompt=SYSTEM, **SMALL).to_arrow_refs()
    packed = ray_engine.read_whileai(compressed, system_prompt=SYSTEM, block_bytes=48 << 10).to_arrow_refs()
    expected = local.to_pylist()
    assert concat(plain).to_pylist() == expected
    assert concat(packed).to_pylist() == expected


@pytest.mark.parametrize("fixture", ["engine_multiturn", "messages_rows", "platform_pull", "otel", "hf_flat"])
def test_every_row_shape_reads_as_the_builder_reads_it(fixture: str, load: Any) -> None:
    path = DATA / f"{fixture}.jsonl"
    ours = ray_engine.read_whileai(path, system_prompt=SYSTEM, tools=TOOLS, row_key=True, range_bytes=2048)
    assert collect(ours) == load(str(path), system_prompt=SYSTEM, tools=TOOLS).with_format("arrow")[:].to_pylist()


def test_conversations_rows_read_and_export_as_the_builder_reads_them(tmp_path: Path, load: Any) -> None:
    """LLaMA-Factory's sharegpt rows (tools as JSON text) and OpenAI messages under `conversations`."""
    from tests.support.near_miss_rows import LLAMA_FACTORY_ROWS, OPENAI_CONVERSATION_ROW

    path = tmp_path / "conversations.jsonl"
    rows = [*LLAMA_FACTORY_ROWS, OPENAI_CONVERSATION_ROW] * 30
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    ours = ray_engine.read_whileai(path, system_prompt=SYSTEM, row_key=True, range_bytes=4096)
    assert collect(ours) == load(str(path), system_prompt=SYSTEM).with_format("arrow")[:].to_pylist()
    local = whileai_datasets.export_dataset(str(path), str(tmp_path / "local.jsonl"), tools=TOOLS)
    report = ray_engine.export_training(path, tmp_path / "ray.jsonl", tools=TOOLS, range_bytes=4096)
    assert part_lines(str(tmp_path / "ray.jsonl")) == (tmp_path / "local.jsonl").read_bytes()
    assert without_path(report) == without_path(local)


def _json_array_file(path: Path, rows: list[Any]) -> Path:
    """``rows`` as one indented JSON array, as ``json.dump(rows, f, indent=2)`` writes it."""
    path.write_text(json.dumps(rows, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def test_a_json_array_reads_and_exports_as_the_builder_reads_it(tmp_path: Path, load: Any) -> None:
    from tests.support.near_miss_rows import LLAMA_FACTORY_ROWS, OPENAI_CONVERSATION_ROW

    rows = [*generated_rows(2), *[*LLAMA_FACTORY_ROWS, OPENAI_CONVERSATION_ROW] * 20]
    path = _json_array_file(tmp_path / "llamafactory.json", rows)
    assert ray_source.WhileaiFiles([str(path)], range_bytes=4096).n_tasks() == 1  # never cut in ranges
    ours = ray_engine.read_whileai(path, system_prompt=SYSTEM, row_key=True, block_bytes=8192)
    assert collect(ours) == load(str(path), system_prompt=SYSTEM).with_format("arrow")[:].to_pylist()
    options: dict[str, Any] = {"system_prompt": SYSTEM, "tools": TOOLS, "validate": False}
    local = whileai_datasets.export_dataset(str(path), str(tmp_path / "local.jsonl"), **options)
    report = ray_engine.export_training(path, tmp_path / "ray.jsonl", **options, block_bytes=8192)
    assert part_lines(str(tmp_path / "ray.jsonl")) == (tmp_path / "local.jsonl").read_bytes()
    assert without_path(report) == without_path(local)
    assert report["groups"] and report["privileged_leaks"]["n_leaked"]


def test_a_compressed_json_array_and_a_json_file_of_lines_read_as_the_builder_reads_them(
    tmp_path: Path, load: Any
) -> None:
    from tests.support.near_miss_rows import LLAMA_FACTORY_ROWS

    rows = LLAMA_FACTORY_ROWS * 40
    packed = tmp_path / "rows.json.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as handle:
        json.dump(rows, handle)
    lines = tmp_path / "lines.json"  # one row per line under a .json name: JSONL, cut in ranges
    lines.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    assert ray_source.WhileaiFiles([str(lines)], range_bytes=4096).n_tasks() > 1
    for path in (packed, lines):
        ours = ray_engine.read_whileai(path, system_prompt=SYSTEM, row_key=True, range_bytes=4096, block_bytes=4096)
        local = load(str(path), system_prompt=SYSTEM, cache_dir=str(tmp_path / f"cache-{path.name}")).with_format("arrow")[:]
        # load_dataset drops whileai's own columns from a split that holds no whileai row (another tool's file,
        # decided over the whole split); a Ray block is typed before the other blocks are read, so the Ray
        # reader keeps the schema's columns, all null here (docs/ray.md)
        read = collect(ours)
        extra = set(read[0]) - set(local.column_names)
        assert extra and all(row[name] is None for row in read for name in extra)
        assert [{k: v for k, v in row.items() if k not in extra} for row in read] == local.to_pylist()


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("[1]", r"^rows\.json line 42 \(array index 40\): expected a JSON object, got list"),
        ('{"conversations": [{"from": "x", "value": "y"}]}',
         r"^rows\.json line 42 \(array index 40\), conversations\[0\]\.from"),
        ('"\\ud83e"', r"^rows\.json line 42 \(array index 40\): the row holds \\ud83e"),
        ('{"prompt": "a" "b"}', r"^rows\.json line 42 \(array index 40\): not valid JSON \(Expecting ','"),
    ],
    ids=["not-an-object", "bad-role", "lone-surrogate", "not-json"],
)
def test_a_broken_array_element_fails_with_the_builders_file_line_and_index(
    tmp_path: Path, bad: str, message: str
) -> None:
    from tests.support.near_miss_rows import LLAMA_FACTORY_ROWS

    elements = [json.dumps(LLAMA_FACTORY_ROWS[i % 3]) for i in range(60)]
    elements[40] = bad  # element i on line i + 2, in a later block than the first
    path = tmp_path / "rows.json"
    path.write_text("[\n" + ",\n".join(elements) + "\n]\n", encoding="utf-8")
    with pytest.raises(ExportFormatError, match=message) as local:
        whileai_datasets.export_dataset(str(path), str(tmp_path / "local.jsonl"), system_prompt=SYSTEM)
    with pytest.raises(ExportFormatError, match=message) as ours:
        ray_engine.export_training(path, tmp_path / "ray", system_prompt=SYSTEM, block_bytes=4096)
    assert str(ours.value) == str(local.value)
    assert not (tmp_path / "ray").exists()


def test_the_first_broken_element_of_a_block_is_the_one_reported(tmp_path: Path) -> None:
    """A refused element (a lone surrogate) is raised at its row's turn, after the rows before it."""
    from tests.support.near_miss_rows import LLAMA_FACTORY_ROWS

    elements = [json.dumps(LLAMA_FACTORY_ROWS[0]), "[1]", '"\\ud83e"']
    path = tmp_path / "rows.json"
    path.write_text("[\n" + ",\n".join(elements) + "\n]\n", encoding="utf-8")
    message = r"^rows\.json line 3 \(array index 1\): expected a JSON object"
    with pytest.raises(ExportFormatError, match=message) as local:
        whileai_datasets.export_dataset(str(path), str(tmp_path / "local.jsonl"))
    with pytest.raises(ExportFormatError, match=message) as ours:
        ray_engine.export_training(path, tmp_path / "ray")
    assert str(ours.value) == str(local.value)


def test_preference_pairs_read_as_the_builder_reads_them(tmp_path: Path, load: Any) -> None:
    from whileai.simulations.score.judging import build_preference_pairs

    pairs, _ = build_preference_pairs(seeded_rows(seed=1, mode="rl", repeats=4, budget=40))
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(p, default=str) + "\n" for p in pairs * 20), encoding="utf-8")
    ours = ray_engine.read_whileai(path, config="preference", system_prompt=SYSTEM, row_key=True, range_bytes=4096)
    local = load(str(path), "preference", system_prompt=SYSTEM).with_format("arrow")[:]
    assert pairs and collect(ours) == local.to_pylist()


def test_parquet_row_groups_read_as_the_builder_reads_them(tmp_path: Path) -> None:
    rows = generated_rows(4)
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    canonical = load_local(source, tmp_path / "cache")
    path = tmp_path / "canonical.parquet"
    pq.write_table(canonical, path, row_group_size=25)
    ours = ray_engine.read_whileai(path, system_prompt=SYSTEM, row_key=True, range_bytes=20_000)
    assert collect(ours) == load_local(path, tmp_path / "cache").to_pylist()


def test_several_files_export_as_their_concatenation(rows_file: Path, tmp_path: Path) -> None:
    lines = rows_file.read_bytes().splitlines(keepends=True)
    folder = tmp_path / "shards"
    folder.mkdir()
    for i, start in enumerate(range(0, len(lines), 1000)):
        (folder / f"shard-{i}.jsonl").write_bytes(b"".join(lines[start : start + 1000]))
    options: dict[str, Any] = {"system_prompt": SYSTEM, "format": "trl", "validate": False}
    local = whileai_datasets.export_dataset(str(rows_file), str(tmp_path / "local.jsonl"), **options)
    ours = ray_engine.export_training(folder, tmp_path / "ray.jsonl", **options, **SMALL)
    assert part_lines(str(tmp_path / "ray.jsonl")) == (tmp_path / "local.jsonl").read_bytes()
    assert without_path(ours) == without_path(local)


@pytest.fixture(scope="module")
def canonical(rows_file: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, pa.Table]:
    """The rows as a materialized Ray dataset with row keys, and as the builder loads them."""
    ds = ray_engine.read_whileai(rows_file, system_prompt=SYSTEM, row_key=True, **SMALL).materialize()
    return ds, load_local(rows_file, tmp_path_factory.mktemp("cache"))


def load_local(path: Path, cache: Path) -> pa.Table:
    import datasets

    ds = datasets.load_dataset(
        "whileai/export", data_files=str(path), split="train", system_prompt=SYSTEM, cache_dir=str(cache)
    )
    return ds.with_format("arrow")[:]


def concat(refs: list[Any]) -> pa.Table:
    """Blocks as one table (Ray hands on empty blocks without their columns: skipped)."""
    return pa.concat_tables(t for t in ray.get(refs) if t.num_rows)


def collect(ds: Any) -> list[dict[str, Any]]:
    """A Ray dataset's rows in file order (sorted by the row key, stably), without
    the key; rows without it (Fireworks rows) as the runtime kept them, in order."""
    table = concat(ds.to_arrow_refs())
    if set(KEY) <= set(table.column_names):
        table = table.take(pc.sort_indices(table, sort_keys=[(k, "ascending") for k in KEY])).drop_columns(KEY)
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


@pytest.mark.parametrize(
    "transform",
    [
        wai_transforms.strip_think,
        wai_transforms.truncate_tool_output(40),
        wai_transforms.loss_mask("final"),
        wai_transforms.unroll,
        wai_transforms.to_openai,
        wai_transforms.to_trl("training"),
        wai_transforms.to_trl("completion"),
        wai_transforms.to_fireworks,
    ],
    ids=lambda t: type(t).__name__ + getattr(t, "kind", ""),
)
def test_a_transform_runs_unchanged_in_map_batches(canonical: tuple[Any, pa.Table], transform: Any) -> None:
    ds, table = canonical
    ours = ds.map_batches(transform, batch_format="pyarrow")
    assert collect(ours) == transform(table).to_pylist()


def test_stamp_groups_uses_ray_groupby_and_gives_the_local_floats(canonical: tuple[Any, pa.Table]) -> None:
    ds, table = canonical
    columns = ["group_id", "k", "n0", "n1", "reward_mean", "reward_std"]
    ours = pa.Table.from_pylist(collect(ray_engine.stamp_groups(ds))).select(columns).to_pylist()
    local = whileai_datasets.stamp_groups(table).select(columns).to_pylist()
    assert ours == local
    assert any(r["reward_std"] not in (None, 0.0) for r in ours)


def test_stamp_groups_needs_the_row_key(rows_file: Path) -> None:
    ds = ray_engine.read_whileai(rows_file)
    with pytest.raises(whileai_datasets.SchemaError, match="row-key columns"):
        ray_engine.stamp_groups(ds)


def test_tokenize_runs_in_map_batches(tmp_path: Path) -> None:
    from tests.support.tiny_lm import train_tokenizer, trl_template

    path = tmp_path / "few.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in generated_rows(4)), encoding="utf-8")
    texts = [json.dumps(row) for row in all_rows()]
    transform = tokenize(train_tokenizer(texts, chat_template=trl_template("qwen2_5")))
    ours = ray_engine.read_whileai(path, system_prompt=SYSTEM, row_key=True, block_bytes=32 << 10)
    with pytest.warns(UnsupervisedRowsWarning, match="no token of theirs is supervised"):
        local = transform(load_local(path, tmp_path / "cache"))
    assert collect(ours.map_batches(transform, batch_format="pyarrow")) == local.to_pylist()


def test_the_export_command_takes_engine_ray(rows_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from whileai_datasets import cli

    system = tmp_path / "system.txt"
    system.write_text(SYSTEM, encoding="utf-8")
    argv = ["export", str(rows_file), str(tmp_path / "out"), "--engine", "ray", "--unroll", "--no-validate",
            "--system-prompt-file", str(system), "--json"]
    assert cli.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["path"] == str(tmp_path / "out") and report["unrolled"] is True
    parser = argparse.ArgumentParser()
    export_cli.add_parser(parser.add_subparsers())
    local = parser.parse_args(["export", str(rows_file), str(tmp_path / "out")])
    assert local.engine == "local"


def test_the_output_must_be_a_directory_of_parts(rows_file: Path, tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ExportFormatError, match="not part files"):
        ray_engine.export_training(rows_file, tmp_path / "taken")
    (tmp_path / "file.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(ExportFormatError, match="writes a directory"):
        ray_engine.export_training(rows_file, tmp_path / "file.jsonl")


def test_a_compressed_file_cut_short_fails_with_the_builders_kind_of_error(rows_file: Path, tmp_path: Path) -> None:
    data = rows_file.read_bytes()
    packed = gzip.compress(data)
    cut = tmp_path / "run.jsonl.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    import zlib

    complete = zlib.decompressobj(31).decompress(packed[: len(packed) // 2]).count(b"\n")
    with pytest.raises(
        ExportFormatError,
        match=rf"^run\.jsonl\.gz line {complete + 1}: the gzip file ends early: its data stops inside line "
        rf"{complete + 1}, after {complete} complete line\(s\).*The download or copy was probably cut short",
    ):
        ray_engine.export_training(str(cut), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_unread_keys_are_said_as_the_local_export_says_them(tmp_path: Path) -> None:
    """A misspelt message key in rows spread over several blocks: one ``UnreadKeysWarning`` from the Ray export,
    with the local export's counts, first locations (file, line, row) and guesses."""
    rows = generated_rows(4)
    misspelt = {i: row for i, row in enumerate(rows) if row.get("messages") and row["messages"][-1].get("content")}
    marked = sorted(misspelt)[3::40]  # several rows, in several blocks
    for i in marked:
        message = dict(rows[i]["messages"][-1])
        message["contnet"] = message.pop("content")
        rows[i] = {**rows[i], "messages": [*rows[i]["messages"][:-1], message]}
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with pytest.warns(whileai_datasets.UnreadKeysWarning) as local:
        whileai_datasets.export_dataset(str(source), str(tmp_path / "local.jsonl"), validate=False)
    with pytest.warns(whileai_datasets.UnreadKeysWarning) as ours:
        ray_engine.export_training(source, tmp_path / "ray.jsonl", validate=False, **SMALL)
    local_unread, ray_unread = ([w for w in caught if w.category is whileai_datasets.UnreadKeysWarning]
                                for caught in (local, ours))
    assert len(parts(str(tmp_path / "ray.jsonl"))) > 1 and len(ray_unread) == 1
    said, expected = str(ray_unread[0].message), str(local_unread[0].message)
    assert said.startswith(f"{source}: ") and ray_unread[0].filename == __file__
    assert f"message key 'contnet' in {len(marked)} message(s) (first: rows.jsonl line {marked[0] + 1} " \
           f"(row {marked[0]})" in said
    assert said.split(": ", 1)[1] == expected.split(": ", 1)[1]  # all but where: the local names its split
    with pytest.warns(whileai_datasets.UnreadKeysWarning) as front:  # the front door's engine="ray", three calls up
        whileai_datasets.export_dataset(str(source), str(tmp_path / "front.jsonl"), validate=False, engine="ray")
    front_unread = [w for w in front if w.category is whileai_datasets.UnreadKeysWarning]
    assert len(front_unread) == 1 and front_unread[0].filename == __file__ and str(front_unread[0].message) == said
