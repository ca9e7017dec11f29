"""The whileai/export builder against whileai itself (the oracle)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from whileai.simulations import export_dataset, training_rows
from whileai.simulations.schema import _normalize_legacy

from tests.conftest import DATA, SYSTEM_PROMPT, TOOLS, read_jsonl, seeded_rows, template_rows, write_jsonl
from whileai_datasets import transforms as wai_transforms
from whileai_datasets.rows.schema import CARRY_KEYS

COMPARED = ("messages", "loss_mask", "tools", *CARRY_KEYS)


def assert_rows_equal(ours: Any, theirs: list[dict[str, Any]]) -> None:
    """JSON-equal on messages, loss_mask, tools and every carried key; a key
    whileai did not write must be null (absent) on ours."""
    ours = template_rows(ours) if hasattr(ours, "with_format") else list(ours)
    assert len(ours) == len(theirs)
    for i, (mine, ref) in enumerate(zip(ours, theirs)):
        for key in COMPARED:
            assert mine.get(key) == ref.get(key), f"row {i}, {key}: {mine.get(key)!r} != {ref.get(key)!r}"


@pytest.mark.parametrize(("seed", "mode", "repeats"), [(0, "sft", 1), (1, "rl", 3), (2, "rl", 2)])
def test_builder_rows_equal_whileai_training_rows(tmp_path: Path, load: Any, seed: int, mode: str, repeats: int) -> None:
    rows = seeded_rows(seed=seed, mode=mode, repeats=repeats)
    path = write_jsonl(tmp_path / "run.jsonl", rows)
    ds = load(path, system_prompt=SYSTEM_PROMPT, tools=TOOLS)
    expected = training_rows(read_jsonl(path), system_prompt=SYSTEM_PROMPT, tools=TOOLS, strip_think=False)
    assert_rows_equal(ds, expected)


def test_builder_final_mask_mode_equals_whileai(tmp_path: Path, load: Any) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", read_jsonl(DATA / "engine_multiturn.jsonl"))
    ds = load(path, mask_mode="final")
    expected = training_rows(read_jsonl(path), mask_mode="final", strip_think=False)
    assert [row["loss_mask"] for row in ds] == [row["loss_mask"] for row in expected]


@pytest.mark.parametrize(
    "fixture", ["engine_multiturn.jsonl", "platform_pull.jsonl", "hf_flat.jsonl", "otel.jsonl", "messages_rows.jsonl"]
)
def test_builder_reads_every_row_shape_like_whileai(load: Any, fixture: str) -> None:
    ds = load(DATA / fixture, system_prompt=SYSTEM_PROMPT, tools=TOOLS)
    source = read_jsonl(DATA / fixture)
    if fixture == "hf_flat.jsonl":
        # whileai reads the flat set's *_json strings through _normalize_legacy only
        source = [_normalize_legacy(row) for row in source]
    expected = training_rows(source, system_prompt=SYSTEM_PROMPT, tools=TOOLS, strip_think=False)
    assert_rows_equal(ds, expected)


@pytest.mark.parametrize(("fmt", "mask_mode"), [("openai", "assistant"), ("trl", "assistant"), ("trl", "final")])
def test_builder_reads_whileai_wire_exports_back(tmp_path: Path, load: Any, fmt: str, mask_mode: str) -> None:
    rows = seeded_rows(seed=3, mode="rl", repeats=2) + read_jsonl(DATA / "engine_multiturn.jsonl")[:2]
    out = tmp_path / f"{fmt}.jsonl"
    export_dataset(rows, str(out), system_prompt=SYSTEM_PROMPT, tools=TOOLS, format=fmt, mask_mode=mask_mode,
                   strip_think=False, validate=False)
    ds = load(out, mask_mode=mask_mode)
    expected = training_rows(rows, system_prompt=SYSTEM_PROMPT, tools=TOOLS, strip_think=False, mask_mode=mask_mode)
    # the exported row already holds its system message and tools
    assert_rows_equal(ds, expected)


def test_builder_reads_fireworks_rows_back_to_their_messages(tmp_path: Path, load: Any) -> None:
    rows = read_jsonl(DATA / "engine_multiturn.jsonl")
    out = tmp_path / "fw.jsonl"
    export_dataset(rows, str(out), system_prompt=SYSTEM_PROMPT, tools=TOOLS, format="fireworks", strip_think=False,
                   validate=False)
    ds = load(out)
    expected = training_rows(rows, system_prompt=SYSTEM_PROMPT, tools=TOOLS, strip_think=False)
    for mine, ref in zip(template_rows(ds), expected):
        # Fireworks rows keep role/content/tool_calls/tool_call_id: the tool name is gone
        assert mine["messages"] == [{k: v for k, v in m.items() if k != "name"} for m in ref["messages"]]
        assert mine["loss_mask"] == ref["loss_mask"]
        assert mine["tools"] == ref["tools"]


def test_message_dicts_carry_only_the_keys_whileai_wrote(load: Any) -> None:
    ds = load(DATA / "engine_multiturn.jsonl")
    expected = training_rows(read_jsonl(DATA / "engine_multiturn.jsonl"), strip_think=False)
    for mine, ref in zip(template_rows(ds), expected):
        assert [sorted(m) for m in mine["messages"]] == [sorted(m) for m in ref["messages"]]


def test_chat_template_testing_key_presence_renders_like_the_whileai_row(load: Any) -> None:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    template = ImmutableSandboxedEnvironment().from_string(
        "{% for m in messages %}<{{ m.role }}>{% if 'tool_calls' in m %}CALLS{{ m.tool_calls | length }}"
        "{% endif %}{% if m.tool_call_id is defined %}[{{ m.tool_call_id }}]{% endif %}{{ m.content }}{% endfor %}"
    )
    ds = load(DATA / "engine_multiturn.jsonl", system_prompt=SYSTEM_PROMPT)
    expected = training_rows(read_jsonl(DATA / "engine_multiturn.jsonl"), system_prompt=SYSTEM_PROMPT, strip_think=False)
    # what this package hands a template (tokenize, the renders: rows.features.messages_from_arrow) ...
    for mine, ref in zip(template_rows(ds), expected):
        assert template.render(messages=mine["messages"]) == template.render(messages=ref["messages"])
    # ... and what a trainer reads from the TRL rows, here or where this package is not installed
    trl = ds.with_format("arrow").map(wai_transforms.to_trl("training"), batched=True).with_format(None)
    for mine, ref in zip(trl, expected):
        assert template.render(messages=mine["messages"]) == template.render(messages=ref["messages"])


def test_builder_keeps_the_rows_own_tools_when_none_are_given(load: Any) -> None:
    ds = load(DATA / "messages_rows.jsonl")
    assert ds[0]["tools"] == [{"type": "function", "function": {"name": "a"}}]
    assert ds[1]["tools"] is None


def test_builder_reads_tools_from_a_json_file(tmp_path: Path, load: Any) -> None:
    tools_file = tmp_path / "tools.json"
    tools_file.write_text(json.dumps(TOOLS))
    ds = load(DATA / "otel.jsonl", tools=str(tools_file))
    assert ds[0]["tools"] == TOOLS


def test_privileged_is_never_a_training_column(load: Any) -> None:
    ds = load(DATA / "engine_multiturn.jsonl")
    assert "privileged" not in ds.column_names
    assert "secret answer" not in json.dumps(ds[0])


def test_builder_reads_gzip_compressed_jsonl(tmp_path: Path, load: Any) -> None:
    rows = read_jsonl(DATA / "engine_multiturn.jsonl")
    path = tmp_path / "run.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in rows)
    assert_rows_equal(load(path), training_rows(rows, strip_think=False))


def test_builder_reads_the_hf_flat_set_from_parquet(tmp_path: Path, load: Any) -> None:
    rows = read_jsonl(DATA / "hf_flat.jsonl")
    path = tmp_path / "flat.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    expected = training_rows([_normalize_legacy(r) for r in rows], strip_think=False)
    assert_rows_equal(load(path), expected)


def test_canonical_parquet_reads_back_to_the_same_rows(tmp_path: Path, load: Any) -> None:
    first = load(DATA / "messages_rows.jsonl", keep_message_keys=True)
    path = tmp_path / "canonical.parquet"
    first.to_parquet(str(path))
    again = load(path, keep_message_keys=True)
    assert list(again) == list(first)


def test_portable_parquet_as_published_reads_back_to_the_same_rows(tmp_path: Path, load: Any) -> None:
    """What publish writes for readers without this package: each message one Json value (List(Json()))."""
    from whileai_datasets.columnar._portable import portable_table

    first = load(DATA / "engine_multiturn.jsonl")
    table = portable_table(first.with_format("arrow")[:])
    assert isinstance(table.schema.field("messages").type.value_type, pa.JsonType)
    path = tmp_path / "portable.parquet"
    pq.write_table(table, path)
    assert list(load(path)) == list(first)


def test_streaming_gives_the_same_rows_as_the_prepared_dataset(load: Any) -> None:
    prepared = list(load(DATA / "engine_multiturn.jsonl"))
    streamed = list(load(DATA / "engine_multiturn.jsonl", streaming=True))
    assert streamed == prepared


def test_second_load_reuses_the_cache_and_new_options_rebuild_it(tmp_path: Path, load: Any) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", read_jsonl(DATA / "otel.jsonl"))
    first = load(path)
    again = load(path)
    assert again.cache_files == first.cache_files
    other = load(path, system_prompt="Another prompt.")
    assert other.cache_files != first.cache_files
    assert template_rows(other)[0]["messages"][0] == {"role": "system", "content": "Another prompt."}


def test_changing_the_tools_file_rebuilds_the_cache(tmp_path: Path, load: Any) -> None:
    tools_file = tmp_path / "tools.json"
    tools_file.write_text(json.dumps(TOOLS[:1]))
    first = load(DATA / "otel.jsonl", tools=str(tools_file))
    tools_file.write_text(json.dumps(TOOLS))
    second = load(DATA / "otel.jsonl", tools=str(tools_file))
    assert first[0]["tools"] == TOOLS[:1]
    assert second[0]["tools"] == TOOLS


def test_several_files_and_splits(tmp_path: Path, load: Any) -> None:
    train = write_jsonl(tmp_path / "a.jsonl", read_jsonl(DATA / "engine_multiturn.jsonl"))
    extra = write_jsonl(tmp_path / "b.jsonl", read_jsonl(DATA / "otel.jsonl"))
    dd = load({"train": [str(train), str(extra)], "holdout": str(extra)}, split=None)
    assert dd["train"].num_rows == 6
    assert dd["holdout"].num_rows == 1


def test_small_chunks_give_the_same_rows(tmp_path: Path, load: Any) -> None:
    rows = seeded_rows(seed=4, mode="rl", repeats=2)
    path = write_jsonl(tmp_path / "run.jsonl", rows)
    assert list(load(path, chunk_rows=7)) == list(load(path))


def test_raw_config_keeps_every_key(load: Any) -> None:
    rows = read_jsonl(DATA / "engine_multiturn.jsonl")
    ds = load(DATA / "engine_multiturn.jsonl", "raw")
    for mine, ref in zip(ds, rows):
        rebuilt = {k: v for k, v in mine.items() if v is not None and k not in ("extra", "source_file", "source_line")}
        rebuilt.update(mine["extra"] or {})
        assert rebuilt == {k: v for k, v in ref.items() if v is not None}
    assert ds[0]["source_line"] == 1
    assert ds[0]["source_file"] == "engine_multiturn.jsonl"


def test_preference_config_equals_whileai_pairs(tmp_path: Path, load: Any) -> None:
    from whileai.simulations import export_preference
    from whileai.simulations.score.judging import build_preference_pairs

    rows = seeded_rows(seed=1, mode="rl", repeats=4, budget=40)
    pairs, _ = build_preference_pairs(rows)
    assert pairs, "the seeded run should give at least one contrast"
    pairs_path = write_jsonl(tmp_path / "pairs.jsonl", pairs)
    out = tmp_path / "pref.jsonl"
    export_preference(read_jsonl(pairs_path), str(out), system_prompt=SYSTEM_PROMPT, tools=TOOLS, drop_ties=False)
    expected = read_jsonl(out)
    ds = load(pairs_path, "preference", system_prompt=SYSTEM_PROMPT, tools=TOOLS)
    assert len(ds) == len(expected)
    for mine, ref in zip(template_rows(ds), expected):
        for key in ("prompt", "chosen", "rejected", "tools", "margin", "chosen_score", "rejected_score", "lineage"):
            assert mine[key] == ref.get(key), key


def test_streaming_reads_compressed_jsonl(tmp_path: Path, load: Any) -> None:
    rows = read_jsonl(DATA / "engine_multiturn.jsonl")
    path = tmp_path / "run.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in rows)
    streamed = list(load(path, streaming=True))
    assert [row["messages"] for row in template_rows(streamed)] == [row["messages"] for row in training_rows(rows, strip_think=False)]


def test_streaming_reads_parquet(tmp_path: Path, load: Any) -> None:
    rows = read_jsonl(DATA / "hf_flat.jsonl")
    path = tmp_path / "flat.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert list(load(path, streaming=True)) == list(load(path))
