"""The builder on reasoning and vision rows: content parts typed, given back exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.conftest import template_rows, write_jsonl
from tests.support.content_parts import (
    AUDIO_B64,
    CANONICAL_ROWS,
    CAT_URL,
    FILE_ID,
    HOTEL_URL,
    INDIA_B64,
    JULIET_CLIP,
    LAYOUT_MEDIA,
    LAYOUT_ROWS,
    LAYOUT_TEXTS,
    MAPPED_ROW,
    MEDIA,
    PDF_URI,
    REASONING,
    ROWS,
    missing,
    text,
    texts,
)
from whileai_datasets.errors import ExportFormatError, SchemaError
from whileai_datasets.rows.parts import PART_TYPE


def test_every_content_shape_decodes_to_exactly_the_messages_it_was(tmp_path: Path, load: Any) -> None:
    ds = load(write_jsonl(tmp_path / "rows.jsonl", CANONICAL_ROWS))
    assert [row["messages"] for row in template_rows(ds)] == [row["messages"] for row in CANONICAL_ROWS]


def test_parts_are_typed_columns_with_the_media_reference_and_where_it_sat(tmp_path: Path, load: Any) -> None:
    table = load(write_jsonl(tmp_path / "rows.jsonl", CANONICAL_ROWS)).with_format("arrow")[:]
    messages = table["messages"].combine_chunks().flatten()
    assert messages.type.field("parts").type == pa.list_(PART_TYPE)
    parts = messages.field("parts").flatten()
    media = [(p["type"], p["media"], p["media_key"]) for p in parts.to_pylist() if p["media"] is not None]
    assert media == [
        ("image", CAT_URL, "image"),
        ("image", "https://images.example.com/dog-1187.jpg", "url"),
        ("image_url", MEDIA[2], "image_url.url"),
        ("image", MEDIA[3], "image"),
        ("video", MEDIA[4], "video"),
        ("image", MEDIA[5], "path"),
    ]
    assert messages.field("content").to_pylist()[0] is None  # the text lives in the parts
    assert messages.field("reasoning_content").drop_null().to_pylist() == REASONING[:2]


def test_reasoning_thinking_and_tool_call_parts_map_onto_the_message(tmp_path: Path, load: Any) -> None:
    ds = load(write_jsonl(tmp_path / "rows.jsonl", [MAPPED_ROW]))
    user, call, tool, answer = template_rows(ds)[0]["messages"]
    assert user == MAPPED_ROW["messages"][0]
    assert call["reasoning_content"] == "echo reasoning in a typed part"
    assert call["content"] == ""  # only mapped parts: whileai's empty content
    [wire_call] = call["tool_calls"]
    assert wire_call["function"]["name"] == "lookup"
    assert json.loads(wire_call["function"]["arguments"]) == {"q": "echo cat"}
    assert tool["tool_call_id"] == "call_e1"
    assert answer == {"role": "assistant", "content": [text("echo a tabby cat.")], "reasoning_content": "echo second thought"}


def test_no_text_reasoning_or_media_reference_is_lost_on_load(tmp_path: Path, load: Any) -> None:
    ds = load(write_jsonl(tmp_path / "rows.jsonl", ROWS))
    assert missing([row["messages"] for row in template_rows(ds)], texts() + REASONING + MEDIA) == []


def test_a_parquet_export_of_parts_reads_back_the_same(tmp_path: Path, load: Any) -> None:
    ds = load(write_jsonl(tmp_path / "rows.jsonl", ROWS))
    ds.to_parquet(str(tmp_path / "rows.parquet"))
    again = load(str(tmp_path / "rows.parquet"), cache_dir=str(tmp_path / "cache2"))
    assert [row["messages"] for row in template_rows(again)] == [row["messages"] for row in template_rows(ds)]


def _row_with(content: Any, role: str = "user") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "ok"}, {"role": role, "content": content}]}


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            _row_with([text("hi"), {"type": "text", "text": "one", "value": "two"}]),
            r"rows\.jsonl line 2 \(row 1\), messages\[1\]\.content\[1\]: expected the part's text under one of "
            r"'text', 'value', 'content', got text under \['text', 'value'\]\. Which one is the text is ambiguous",
        ),
        (_row_with([{"type": "text", "text": 7}]), r"content\[0\]\.text: expected the text part's text as a string, got int"),
        (_row_with([{"type": 3, "text": "x"}]), r"content\[0\]\.type: expected the part type as a string, got int"),
        (_row_with([{"type": "reasoning", "value": "x"}]), r"expected a 'reasoning' part on an assistant turn, got one on a 'user' turn"),
        (
            _row_with([{"type": "reasoning", "value": "x", "signature": "s"}], role="assistant"),
            r"expected a 'reasoning' part with only 'value', 'text', got also \['signature'\]",
        ),
        (_row_with([{"type": "tool_call", "value": "{not json"}], role="assistant"), r"content\[0\]\.value: expected the tool call as JSON text"),
        (_row_with({"type": "text", "text": "hi"}), r"messages\[1\]\.content: expected text or a list of content parts, got dict"),
        (
            {"messages": [{"role": "assistant", "content": "x", "reasoning_content": ["a"]}]},
            r"messages\[0\]\.reasoning_content: expected text, got list",
        ),
    ],
)
def test_parts_it_cannot_read_are_refused_naming_the_part_row_and_line(
    tmp_path: Path, load: Any, row: dict[str, Any], message: str
) -> None:
    path = write_jsonl(tmp_path / "rows.jsonl", [{"messages": [{"role": "user", "content": "fine"}]}, row])
    with pytest.raises(ExportFormatError, match=message):
        load(path)


def test_trl_vision_rows_read_back_with_their_images_in_the_parts(tmp_path: Path, load: Any) -> None:
    trl_row = {
        "messages": [
            {"role": "user", "content": [{"type": "image"}, text("foxtrot what is it?"), {"type": "image"}]},
            {"role": "assistant", "content": [text("foxtrot two cats.")]},
        ],
        "images": [CAT_URL, MEDIA[2]],
        "prompt_text": "foxtrot what is it?",
    }
    ds = load(write_jsonl(tmp_path / "trl.jsonl", [trl_row]))
    user = template_rows(ds)[0]["messages"][0]
    assert user["content"] == [{"type": "image", "image": CAT_URL}, text("foxtrot what is it?"), {"type": "image", "image": MEDIA[2]}]
    assert "images" not in ds.column_names


def test_trl_rows_with_fewer_images_than_placeholders_are_refused(tmp_path: Path, load: Any) -> None:
    trl_row = {"messages": [{"role": "user", "content": [{"type": "image"}, {"type": "image"}]}], "images": [CAT_URL]}
    with pytest.raises(ExportFormatError, match=r"trl\.jsonl line 1 \(row 0\), images: expected one image per .* \(2\), got 1 images"):
        load(write_jsonl(tmp_path / "trl.jsonl", [trl_row]))


def test_the_message_feature_encodes_and_decodes_parts_outside_the_builder() -> None:
    from datasets import Dataset, Features, List

    from whileai_datasets.rows.features import Message

    messages = CANONICAL_ROWS[2]["messages"]
    ds = Dataset.from_dict({"messages": [messages]}, features=Features({"messages": List(Message())}))
    assert ds[0]["messages"] == messages
    with pytest.raises(SchemaError, match=r"message with role 'user', content\[0\]: expected the part's text under one of"):
        Dataset.from_dict(
            {"messages": [[{"role": "user", "content": [{"type": "text", "text": "a", "content": "b"}]}]]},
            features=Features({"messages": List(Message())}),
        )


# ---------------------------------------------------------------- every layout (issue 23)


def test_every_part_layout_decodes_to_exactly_the_dicts_it_was(tmp_path: Path, load: Any) -> None:
    ds = load(write_jsonl(tmp_path / "rows.jsonl", LAYOUT_ROWS))
    assert [row["messages"] for row in template_rows(ds)] == [row["messages"] for row in LAYOUT_ROWS]
    for row, source in zip(template_rows(ds), LAYOUT_ROWS):  # the keys in their order, nested objects too
        assert json.dumps(row["messages"]) == json.dumps(source["messages"])


def test_every_part_layout_is_typed_where_transforms_read_it(tmp_path: Path, load: Any) -> None:
    table = load(write_jsonl(tmp_path / "rows.jsonl", LAYOUT_ROWS)).with_format("arrow")[:]
    parts = table["messages"].combine_chunks().flatten().field("parts").flatten().to_pylist()
    typed = [(p["type"], p["text"], p["text_key"], p["media"], p["media_key"]) for p in parts]
    assert ("text", "golf text that sits under value", "value", None, None) in typed
    assert ("tool_result", "india palette says crimson red", "content", None, None) in typed
    media = {p["media"]: p["media_key"] for p in parts if p["media"] is not None}
    assert media == {
        CAT_URL: "image",
        HOTEL_URL: "image_url.url",
        AUDIO_B64: "input_audio.data",
        PDF_URI: "file.file_data",
        FILE_ID: "file.file_id",
        INDIA_B64: "source.data",
        JULIET_CLIP: "video.url",
    }
    extra = {p["media"]: json.loads(p["extra"]) for p in parts if p["media"] is not None and p["extra"] is not None}
    assert extra[CAT_URL] == {"min_pixels": 3136, "max_pixels": 1003520}
    assert extra[INDIA_B64] == {"source": {"type": "base64", "media_type": "image/png", "data": None}}


def test_a_part_without_a_reference_is_kept_and_read_back(tmp_path: Path, load: Any) -> None:
    row = _row_with([{"type": "image"}, {"type": "image", "image": {"bytes": None, "path": None}}, text("which?")])
    ds = load(write_jsonl(tmp_path / "rows.jsonl", [row]))
    assert template_rows(ds)[0]["messages"] == row["messages"]


def test_parquet_keeps_every_layout(tmp_path: Path, load: Any) -> None:
    ds = load(write_jsonl(tmp_path / "rows.jsonl", LAYOUT_ROWS))
    ds.to_parquet(str(tmp_path / "rows.parquet"))
    again = load(str(tmp_path / "rows.parquet"), cache_dir=str(tmp_path / "cache2"))
    assert [row["messages"] for row in template_rows(again)] == [row["messages"] for row in LAYOUT_ROWS]
    assert missing([row["messages"] for row in template_rows(again)], LAYOUT_TEXTS + LAYOUT_MEDIA) == []
