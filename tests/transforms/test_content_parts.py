"""Every transform and wire shape on content parts and reasoning_content (issue 15)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from whileai.simulations.export import _convert_messages, _strip_think

import whileai_datasets
from tests.conftest import read_jsonl, template_rows, write_jsonl
from tests.support.content_parts import (
    BLUE,
    CAT_URL,
    CHART_PATH,
    CLIP_PATH,
    HOTEL_URL,
    JULIET_CLIP,
    LAYOUT_KEYS,
    LAYOUT_MEDIA,
    LAYOUT_ROWS,
    LAYOUT_TEXTS,
    LAYOUT_THINK,
    MEDIA,
    REASONING,
    RED,
    ROWS,
    THINK_TEXT,
    keys_of,
    missing,
    text,
    texts,
)
from whileai_datasets import transforms as wai_transforms
from whileai_datasets.errors import SchemaError
from whileai_datasets.transforms.gates import leak_report


@pytest.fixture
def arrow_ds(tmp_path: Path, load: Any) -> Any:
    return load(write_jsonl(tmp_path / "rows.jsonl", ROWS)).with_format("arrow")


def _rows(ds: Any) -> list[dict[str, Any]]:
    return template_rows(ds)


KEEP_ALL = [
    ("as loaded", None),
    ("truncate_tool_output, nothing over the limit", wai_transforms.truncate_tool_output(10_000)),
    ("unroll", wai_transforms.unroll),
    ("to_openai", wai_transforms.to_openai),
    ("to_trl training", wai_transforms.to_trl("training")),
    ("to_trl completion", wai_transforms.to_trl("completion")),
    ("to_trl with references inline", wai_transforms.to_trl("training", images=False)),
]


@pytest.mark.parametrize(("name", "transform"), KEEP_ALL, ids=[n for n, _ in KEEP_ALL])
def test_no_text_reasoning_or_media_reference_is_lost(arrow_ds: Any, name: str, transform: Any) -> None:
    out = arrow_ds if transform is None else arrow_ds.map(transform, batched=True)
    assert missing(_rows(out), texts() + REASONING + MEDIA) == []


def test_strip_think_keeps_text_and_media_but_drops_thinking(arrow_ds: Any) -> None:
    out = _rows(arrow_ds.map(wai_transforms.strip_think, batched=True))
    assert missing(out, texts() + MEDIA) == []
    assert missing(out, [*REASONING, THINK_TEXT]) == [*REASONING, THINK_TEXT]
    assert all("reasoning_content" not in m for row in out for m in row["messages"])


def test_strip_think_in_a_text_part_is_whileais_strip_of_that_text(arrow_ds: Any) -> None:
    source = ROWS[0]["messages"][1]["content"][0]["text"]
    out = _rows(arrow_ds.map(wai_transforms.strip_think, batched=True))
    assert out[0]["messages"][1]["content"] == [text(_strip_think(source))]


def test_strip_think_trims_the_message_ends_not_the_text_between_parts(tmp_path: Path, load: Any) -> None:
    parts = [text("  <think>x</think> see "), {"type": "image", "image": CAT_URL}, text(" there  ")]
    row = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": parts}]}
    ds = load(write_jsonl(tmp_path / "r.jsonl", [row])).with_format("arrow")
    got = _rows(ds.map(wai_transforms.strip_think, batched=True))[0]["messages"][1]["content"]
    joined = _strip_think("".join(p.get("text", "") for p in parts))
    assert "".join(p.get("text", "") for p in got) == joined
    assert got[1] == {"type": "image", "image": CAT_URL}


def test_strip_think_gives_the_same_rows_sliced_and_one_row_at_a_time(arrow_ds: Any) -> None:
    table = arrow_ds[:]
    whole = wai_transforms.strip_think(table)
    assert wai_transforms.strip_think(table.slice(1)).to_pylist() == whole.slice(1).to_pylist()
    one = arrow_ds.map(wai_transforms.strip_think, batched=True, batch_size=1)
    assert _rows(one) == _rows(arrow_ds.map(wai_transforms.strip_think, batched=True))


def _tool_row(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "content": parts, "tool_call_id": "c1"},
        ]
    }


@pytest.mark.parametrize("max_chars", [0, 5, 12, 20, 29, 30, 31, 100])
def test_truncate_tool_output_cuts_the_text_parts_as_whileai_cuts_their_text(
    tmp_path: Path, load: Any, max_chars: int
) -> None:
    parts = [text("0123456789"), {"type": "image", "path": CHART_PATH}, text("abcdefghij"), text("KLMNOPQRST")]
    ds = load(write_jsonl(tmp_path / "r.jsonl", [_tool_row(parts)])).with_format("arrow")
    out = _rows(ds.map(wai_transforms.truncate_tool_output(max_chars), batched=True))[0]
    got = out["messages"][2]["content"]
    stats: dict[str, int] = {}
    joined = "".join(p["text"] for p in parts if p["type"] == "text")
    [expected] = [
        m["content"]
        for m in _convert_messages(
            [{"role": "tool", "content": joined}], system="", strip_think=False, max_tool_output_chars=max_chars, stats=stats
        )
    ]
    assert "".join(p.get("text", "") for p in got) == expected
    assert {"type": "image", "path": CHART_PATH} in got
    assert out["tool_output_truncated"] == stats.get("truncated")
    assert out["tool_output_chars_cut"] == stats.get("chars_cut")


def test_truncate_tool_output_gives_the_same_rows_sliced_and_one_row_at_a_time(arrow_ds: Any) -> None:
    transform = wai_transforms.truncate_tool_output(12)
    table = arrow_ds[:]
    assert transform(table.slice(3)).to_pylist() == transform(table).slice(3).to_pylist()
    assert _rows(arrow_ds.map(transform, batched=True, batch_size=1)) == _rows(arrow_ds.map(transform, batched=True))


def test_to_openai_writes_openai_content_parts(arrow_ds: Any) -> None:
    out = _rows(arrow_ds.map(wai_transforms.to_openai, batched=True))
    assert out[1]["messages"][0]["content"][0] == {"type": "image_url", "image_url": {"url": CAT_URL}}
    assert out[2]["messages"][0]["content"][:2] == [
        {"type": "image_url", "image_url": {"url": RED, "detail": "low"}},
        {"type": "image_url", "image_url": {"url": BLUE}},
    ]
    assert out[3]["messages"][0]["content"][0] == {"type": "video_url", "video_url": {"url": CLIP_PATH}}
    assert out[2]["messages"][1]["reasoning_content"] == "charlie first pixel is red"


def test_to_trl_writes_image_placeholders_that_trl_fills_from_images(arrow_ds: Any) -> None:
    from trl.data_utils import prepare_multimodal_messages

    out = _rows(arrow_ds.map(wai_transforms.to_trl("training"), batched=True))
    assert [row["images"] for row in out] == [[], [CAT_URL, MEDIA[1]], [RED, BLUE], [], [CAT_URL]]
    for row in out:
        filled = prepare_multimodal_messages(row["messages"], images=row["images"])
        refs = [p.get("image") for m in filled if m["role"] != "tool" for p in m["content"] if p["type"] == "image"]
        assert refs == row["images"]
    tool = out[3]["messages"][2]
    assert tool["content"][1] == {"type": "image", "image": CHART_PATH}  # TRL fills no tool turn
    assert out[3]["messages"][0]["content"][0] == {"type": "video", "video": CLIP_PATH}


def test_to_trl_images_true_gives_every_batch_the_column(arrow_ds: Any) -> None:
    out = arrow_ds.map(wai_transforms.to_trl("training", images=True), batched=True, batch_size=1)
    assert out.column_names.count("images") == 1
    assert out.with_format(None)[0]["images"] == []


def test_trl_rows_are_the_same_from_dict_batches(tmp_path: Path, load: Any) -> None:
    plain = load(write_jsonl(tmp_path / "rows.jsonl", ROWS))
    from_dicts = _rows(plain.map(wai_transforms.to_trl("training"), batched=True))
    assert from_dicts == _rows(plain.with_format("arrow").map(wai_transforms.to_trl("training"), batched=True))


def test_to_fireworks_takes_data_uri_images_and_refuses_urls(tmp_path: Path, load: Any) -> None:
    inline = load(write_jsonl(tmp_path / "inline.jsonl", [ROWS[0], ROWS[2]])).with_format("arrow")
    out = _rows(inline.map(wai_transforms.to_fireworks, batched=True))
    assert out[1]["messages"][0]["content"][1] == {"type": "image_url", "image_url": {"url": BLUE}}
    assert missing(out, [RED, BLUE, "charlie first pixel is red"]) == []
    by_url = load(write_jsonl(tmp_path / "url.jsonl", [ROWS[1]]), cache_dir=str(tmp_path / "c2")).with_format("arrow")
    with pytest.raises(SchemaError, match=r"batch row 0, messages\[0\]\.content\[0\]: Fireworks training data takes images as base64"):
        by_url.map(wai_transforms.to_fireworks, batched=True)


def test_to_fireworks_refuses_video(tmp_path: Path, load: Any) -> None:
    ds = load(write_jsonl(tmp_path / "v.jsonl", [ROWS[3]])).with_format("arrow")
    with pytest.raises(SchemaError, match=r"messages\[0\]\.content\[0\]: .*got a video part"):
        ds.map(wai_transforms.to_fireworks, batched=True)


@pytest.mark.parametrize("fmt", ["openai", "trl"])
@pytest.mark.parametrize("unroll", [False, True])
def test_export_writes_every_reference_and_text(tmp_path: Path, fmt: str, unroll: bool) -> None:
    source = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    out = tmp_path / "out.jsonl"
    whileai_datasets.export_dataset(str(source), str(out), format=fmt, unroll=unroll, strip_think=False, validate=False)
    written = read_jsonl(out)
    assert missing(written, texts() + REASONING + MEDIA) == []
    if fmt == "trl":
        from trl.data_utils import prepare_multimodal_messages

        for row in written:  # each (unrolled) row carries the images of its own placeholders
            turns = row["prompt"] + row["completion"] if "prompt" in row else row["messages"]
            prepare_multimodal_messages(turns, images=row.get("images", []))


def test_export_jsonl_is_the_decoded_rows(tmp_path: Path, load: Any) -> None:
    source = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    out = tmp_path / "out.jsonl"
    whileai_datasets.export_dataset(str(source), str(out), strip_think=False, validate=False)
    canonical = load(source).with_format("arrow").map(wai_transforms.to_openai, batched=True)
    expected = [{k: v for k, v in row.items() if v is not None} for row in _rows(canonical)]
    assert [row["messages"] for row in read_jsonl(out)] == [row["messages"] for row in expected]


def test_leak_gate_reads_text_parts_and_reasoning() -> None:
    secret = "the refund code is ZEBRA-7781"
    privileged = {"reference": secret}
    in_part = {"privileged": privileged, "messages": [{"role": "assistant", "content": [text(f"ok, {secret}")]}]}
    in_reasoning = {"privileged": privileged, "messages": [{"role": "assistant", "content": "ok", "reasoning_content": secret}]}
    in_typed = {"privileged": privileged, "messages": [{"role": "assistant", "content": [{"type": "reasoning", "value": secret}]}]}
    clean = {"privileged": privileged, "messages": [{"role": "assistant", "content": [text("nothing to see")]}]}
    report = leak_report([in_part, in_reasoning, in_typed, clean])
    assert (report["n_checked"], report["n_leaked"]) == (4, 3)


def test_preference_pairs_that_differ_only_in_an_image_are_a_contrast(tmp_path: Path, load: Any) -> None:
    def side(url: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": "which?"}, {"role": "assistant", "content": [{"type": "image", "image": url}]}]

    pair = {"chosen": side(CAT_URL), "rejected": side(MEDIA[1]), "prompt": "which?"}
    ds = load(write_jsonl(tmp_path / "p.jsonl", [pair]), "preference").with_format("arrow")
    out = _rows(ds.map(wai_transforms.to_trl("preference"), batched=True))
    assert len(out) == 1  # the image is the contrast
    chosen, rejected = out[0]["chosen"][0]["content"], out[0]["rejected"][0]["content"]
    assert (chosen, rejected) == ([{"type": "image", "image": CAT_URL}], [{"type": "image", "image": MEDIA[1]}])


# ---------------------------------------------------------------- every part layout (issue 23)


@pytest.fixture
def layouts(tmp_path: Path, load: Any) -> Any:
    return load(write_jsonl(tmp_path / "layouts.jsonl", LAYOUT_ROWS), cache_dir=str(tmp_path / "layout-cache")).with_format("arrow")


LAYOUT_STEPS = [
    ("truncate_tool_output, nothing over the limit", wai_transforms.truncate_tool_output(10_000)),
    ("unroll", wai_transforms.unroll),
    ("loss_mask", wai_transforms.loss_mask("final")),
    ("to_openai", wai_transforms.to_openai),
    ("to_trl training", wai_transforms.to_trl("training")),
    ("to_trl completion", wai_transforms.to_trl("completion")),
    ("to_trl with references inline", wai_transforms.to_trl("training", images=False)),
]


@pytest.mark.parametrize(("name", "transform"), LAYOUT_STEPS, ids=[n for n, _ in LAYOUT_STEPS])
def test_no_text_reference_or_key_of_any_layout_is_lost(layouts: Any, name: str, transform: Any) -> None:
    out = _rows(layouts.map(transform, batched=True))
    assert missing(out, LAYOUT_TEXTS + [LAYOUT_THINK] + LAYOUT_MEDIA) == []
    assert set(LAYOUT_KEYS) <= keys_of(out)


def test_transforms_that_keep_the_shape_give_every_layout_back_as_it_was(layouts: Any) -> None:
    for transform in (wai_transforms.truncate_tool_output(10_000), wai_transforms.loss_mask("final")):
        out = _rows(layouts.map(transform, batched=True))
        assert [row["messages"] for row in out] == [row["messages"] for row in LAYOUT_ROWS]


def test_strip_think_reads_text_wherever_the_part_holds_it(tmp_path: Path, load: Any) -> None:
    answer = [{"type": "text", "value": "<think>lima secret plan</think> lima reply"}, {"type": "output_text", "text": " lima more "}]
    row = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": answer}]}
    ds = load(write_jsonl(tmp_path / "r.jsonl", [row])).with_format("arrow")
    got = _rows(ds.map(wai_transforms.strip_think, batched=True))[0]["messages"][1]["content"]
    assert got == [{"type": "text", "value": "lima reply"}, {"type": "output_text", "text": " lima more"}]
    every = load(write_jsonl(tmp_path / "l.jsonl", LAYOUT_ROWS), cache_dir=str(tmp_path / "c3")).with_format("arrow")
    stripped = _rows(every.map(wai_transforms.strip_think, batched=True))
    assert missing(stripped, LAYOUT_TEXTS + LAYOUT_MEDIA) == []
    assert missing(stripped, [LAYOUT_THINK]) == [LAYOUT_THINK]


def test_truncate_tool_output_cuts_text_held_under_content(tmp_path: Path, load: Any) -> None:
    ds = load(write_jsonl(tmp_path / "r.jsonl", [LAYOUT_ROWS[2]])).with_format("arrow")
    out = _rows(ds.map(wai_transforms.truncate_tool_output(10), batched=True))[0]
    [part] = out["messages"][2]["content"]
    stats: dict[str, int] = {}
    source = {"role": "tool", "content": "india palette says crimson red"}
    [expected] = _convert_messages([source], system="", strip_think=False, max_tool_output_chars=10, stats=stats)
    assert part == {"type": "tool_result", "tool_use_id": "call_i1", "content": expected["content"]}
    assert out["tool_output_chars_cut"] == stats["chars_cut"]


def test_to_openai_writes_each_layout_as_an_openai_part(layouts: Any) -> None:
    out = _rows(layouts.map(wai_transforms.to_openai, batched=True))
    golf, hotel, india, juliet = (row["messages"] for row in out)
    assert golf[0]["content"] == [
        {"type": "text", "text": "golf text that sits under value"},
        {"type": "image_url", "image_url": {"url": CAT_URL}, "min_pixels": 3136, "max_pixels": 1003520},
    ]
    assert hotel[1]["content"][:4] == LAYOUT_ROWS[1]["messages"][1]["content"][:4]  # already OpenAI's shape
    assert india[0]["content"][0] == {"type": "image_url", "image_url": {"url": RED}}  # base64 source as a data URI
    assert juliet[0]["content"][0] == {"type": "video_url", "video_url": {"url": JULIET_CLIP}, "fps": 2.0, "max_pixels": 151200}


def test_to_trl_takes_images_of_every_layout_into_images(layouts: Any) -> None:
    from trl.data_utils import prepare_multimodal_messages

    out = _rows(layouts.map(wai_transforms.to_trl("training"), batched=True))
    assert [row["images"] for row in out] == [[CAT_URL], [HOTEL_URL], [RED], []]
    for row in out:
        filled = prepare_multimodal_messages(row["messages"], images=row["images"])
        assert [p.get("image") for m in filled for p in m["content"] if p["type"] == "image"] == row["images"]
    assert out[0]["messages"][0]["content"][1] == {"type": "image", "min_pixels": 3136, "max_pixels": 1003520}
    assert out[3]["messages"][0]["content"][0] == {"type": "video", "video": JULIET_CLIP, "fps": 2.0, "max_pixels": 151200}


def test_to_fireworks_takes_an_anthropic_base64_image(tmp_path: Path, load: Any) -> None:
    ds = load(write_jsonl(tmp_path / "r.jsonl", [LAYOUT_ROWS[2]])).with_format("arrow")
    out = _rows(ds.map(wai_transforms.to_fireworks, batched=True))
    assert out[0]["messages"][0]["content"][0] == {"type": "image_url", "image_url": {"url": RED}}
    assert out[0]["messages"][2]["content"][0]["content"] == "india palette says crimson red"


def test_wire_shapes_refuse_an_image_part_without_a_reference(tmp_path: Path, load: Any) -> None:
    row = {"messages": [{"role": "user", "content": [text("x"), {"type": "image"}]}, {"role": "assistant", "content": "y"}]}
    ds = load(write_jsonl(tmp_path / "r.jsonl", [row])).with_format("arrow")
    for transform in (wai_transforms.to_openai, wai_transforms.to_trl("training")):
        with pytest.raises(SchemaError, match=r"batch row 0, messages\[0\]\.content\[1\]: expected each image and video part to hold one media reference"):
            ds.map(transform, batched=True)


def test_layout_transforms_give_the_same_rows_sliced_and_one_at_a_time(layouts: Any) -> None:
    table = layouts[:]
    for transform in (wai_transforms.strip_think, wai_transforms.truncate_tool_output(8), wai_transforms.to_openai):
        assert transform(table.slice(1)).to_pylist() == transform(table).slice(1).to_pylist()
        one = _rows(layouts.map(transform, batched=True, batch_size=1))
        assert one == _rows(layouts.map(transform, batched=True))


def test_layout_rows_from_dict_batches_are_the_arrow_rows(tmp_path: Path, load: Any) -> None:
    plain = load(write_jsonl(tmp_path / "rows.jsonl", LAYOUT_ROWS))
    for transform in (wai_transforms.to_openai, wai_transforms.to_trl("training")):
        assert _rows(plain.map(transform, batched=True)) == _rows(plain.with_format("arrow").map(transform, batched=True))


@pytest.mark.parametrize("fmt", ["openai", "trl"])
def test_export_of_every_layout_writes_every_text_reference_and_key(tmp_path: Path, fmt: str) -> None:
    source = write_jsonl(tmp_path / "rows.jsonl", LAYOUT_ROWS)
    out = tmp_path / "out.jsonl"
    whileai_datasets.export_dataset(str(source), str(out), format=fmt, strip_think=False, validate=False)
    written = read_jsonl(out)
    assert missing(written, LAYOUT_TEXTS + LAYOUT_MEDIA) == []
    assert set(LAYOUT_KEYS) <= keys_of(written)


def test_leak_gate_reads_text_of_every_layout() -> None:
    secret = "the vault code is OTTER-5512"
    privileged = {"reference": secret}
    under_value = [{"type": "text", "value": f"sure: {secret}"}]
    nested = [{"type": "output_text", "text": "see below"}, {"type": "quote", "content": [text(f"nested {secret}")]}]
    rows = [
        {"privileged": privileged, "messages": [{"role": "assistant", "content": under_value}]},
        {"privileged": privileged, "messages": [{"role": "assistant", "content": nested}]},
        {"privileged": privileged, "messages": [{"role": "assistant", "content": [{"type": "image", "image": CAT_URL}]}]},
    ]
    report = leak_report(rows)
    assert (report["n_checked"], report["n_leaked"]) == (3, 2)
