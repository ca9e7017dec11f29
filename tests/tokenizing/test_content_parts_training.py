"""Vision and reasoning rows all the way to tokens: tokenize on a vision chat
template, and TRL's own vision collator on the ``to_trl`` rows (issue 15).

No download: the tokenizer is trained here, the processor is built from a
locally constructed LLaVA image processor, and the images are data URIs and
files written by the test.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import template_rows, write_jsonl
from tests.support.content_parts import BLUE, RED, ROWS, png_data_uri, text
from tests.support.tiny_lm import train_tokenizer, trl_template
from whileai_datasets import transforms as wai_transforms
from whileai_datasets.tokenize.token_masks import BadMaskRowsWarning, tokenize

VISION_TOKENS = ["<|vision_start|>", "<|image_pad|>", "<|video_pad|>", "<|vision_end|>"]

#: Qwen2-VL style, written here: list-of-parts content, one placeholder per media part.
QWEN2_VL_STYLE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' or 'image' in part or 'image_url' in part %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'video' or 'video' in part %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in part %}{{ part['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

#: LLaVA style, written here: the processor expands each <image> to its patch tokens.
LLAVA_STYLE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _tokenizer(template: str, extra_tokens: list[str]) -> Any:
    corpus = [str(row) for row in ROWS] * 3
    tokenizer = train_tokenizer(corpus, chat_template=template)
    tokenizer.add_special_tokens({"additional_special_tokens": extra_tokens})
    return tokenizer


def _assistant_text(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(p["text"] for p in content if p["type"] == "text")


def _supervised(tokenizer: Any, row: dict[str, Any]) -> str:
    return tokenizer.decode([i for i, m in zip(row["input_ids"], row["assistant_masks"]) if m])


def test_tokenize_on_a_vision_template_marks_only_assistant_text(tmp_path: Path, load: Any) -> None:
    tokenizer = _tokenizer(QWEN2_VL_STYLE, VISION_TOKENS)
    ds = load(write_jsonl(tmp_path / "rows.jsonl", ROWS))
    # the template renders no tool call: the rows with one (a typed tool_call part too) would train their end
    # marker alone, so they are dropped
    with pytest.warns(BadMaskRowsWarning, match=r"2 of 5 rows"):
        tokenized = ds.with_format("arrow").map(tokenize(tokenizer, on_bad_row="skip"), batched=True,
                                                remove_columns=ds.column_names)
    kept = [row for row in template_rows(ds) if not any(m.get("tool_calls") for m in row["messages"])]
    assert len(kept) == tokenized.num_rows == len(ROWS) - 2
    image_pad, video_pad = tokenizer.convert_tokens_to_ids(["<|image_pad|>", "<|video_pad|>"])
    for row, out in zip(kept, tokenized.with_format(None)):
        expected = "".join(_assistant_text(m) + "<|im_end|>\n" for m in row["messages"] if m["role"] == "assistant")
        assert _supervised(tokenizer, out) == expected
        media = [p for m in row["messages"] if isinstance(m["content"], list) for p in m["content"] if p["type"] != "text"]
        rendered = [i for i in out["input_ids"] if i in (image_pad, video_pad)]
        assert len(rendered) == len(media)  # every media part reached the template
        assert not any(m for i, m in zip(out["input_ids"], out["assistant_masks"]) if i in (image_pad, video_pad))


def test_tokenize_on_trls_qwen2_5_vl_template_marks_only_assistant_text(tmp_path: Path, load: Any) -> None:
    tokenizer = _tokenizer(trl_template("qwen2_5_vl_training"), VISION_TOKENS)
    ds = load(write_jsonl(tmp_path / "rows.jsonl", ROWS[:3]))
    tokenized = ds.with_format("arrow").map(tokenize(tokenizer), batched=True, remove_columns=ds.column_names)
    for row, out in zip(template_rows(ds), tokenized.with_format(None)):
        expected = "".join(_assistant_text(m) + "<|im_end|>\n" for m in row["messages"] if m["role"] == "assistant")
        assert _supervised(tokenizer, out) == expected


def test_tokenize_trains_reasoning_content_a_template_renders_and_strip_think_removes_it(
    tmp_path: Path, load: Any
) -> None:
    thought = "golf the total is seven because three plus four"
    row = {"messages": [{"role": "user", "content": "golf what is 3+4?"}, {"role": "assistant", "content": "golf 7", "reasoning_content": thought}]}
    tokenizer = _tokenizer(trl_template("qwen3"), [])
    ds = load(write_jsonl(tmp_path / "rows.jsonl", [row])).with_format("arrow")
    kept = ds.map(tokenize(tokenizer), batched=True).with_format(None)[0]
    assert thought in _supervised(tokenizer, kept)
    stripped = ds.map(wai_transforms.strip_think, batched=True).map(tokenize(tokenizer), batched=True)
    supervised = _supervised(tokenizer, stripped.with_format(None)[0])
    assert thought not in supervised and "golf 7" in supervised


@pytest.fixture
def llava_processor() -> Any:
    pytest.importorskip("PIL", reason="transformers' image processors need Pillow")
    from transformers import LlavaProcessor
    from transformers.models.llava.image_processing_pil_llava import LlavaImageProcessorPil

    tokenizer = _tokenizer(LLAVA_STYLE, ["<image>"])
    images = LlavaImageProcessorPil(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28})
    return LlavaProcessor(
        image_processor=images, tokenizer=tokenizer, chat_template=LLAVA_STYLE, patch_size=14,
        vision_feature_select_strategy="default",
    )


def _vision_rows(tmp_path: Path) -> list[dict[str, Any]]:
    png = tmp_path / "green.png"
    png.write_bytes(base64.b64decode(png_data_uri(rgb=(30, 200, 30)).split(",", 1)[1]))
    by_path = {
        "messages": [
            {"role": "user", "content": [{"type": "image", "path": str(png)}, text("hotel which colour?")]},
            {"role": "assistant", "content": [text("hotel green.")]},
        ]
    }
    return [ROWS[2], by_path]  # data URIs (one in an image_url dict) and a file path


@pytest.mark.parametrize("kind", ["training", "completion"])
def test_trls_vision_collator_accepts_the_trl_rows(tmp_path: Path, load: Any, llava_processor: Any, kind: str) -> None:
    from trl.trainer.sft_trainer import DataCollatorForVisionLanguageModeling

    ds = load(write_jsonl(tmp_path / "rows.jsonl", _vision_rows(tmp_path))).with_format("arrow")
    rows = list(ds.map(wai_transforms.to_trl(kind), batched=True).with_format(None))
    assert [len(r["images"]) for r in rows] == [2, 1]
    assert rows[0]["images"] == [RED, BLUE]
    collator = DataCollatorForVisionLanguageModeling(llava_processor, completion_only_loss=kind == "completion")
    batch = collator([dict(r) for r in rows])
    assert batch["pixel_values"].shape[0] == 3  # every image reached the processor
    image_id = llava_processor.tokenizer.convert_tokens_to_ids("<image>")
    per_image = (28 // 14) ** 2 - 1  # LLaVA's "default" strategy drops the CLS feature
    assert (batch["input_ids"] == image_id).sum(dim=1).tolist() == [2 * per_image, per_image]
    labelled = [llava_processor.tokenizer.decode(ids[labels != -100]) for ids, labels in zip(batch["input_ids"], batch["labels"])]
    assert "charlie red then blue." in labelled[0] and "hotel green." in labelled[1]


# ---------------------------------------------------------------- every part layout (issue 23)

#: Written here: text wherever the part holds it, one pad token per media part of any type.
#: A call as ``name(arguments as JSON)``: a template that renders no call would have its call turns refused.
CALLS = ("{% for call in message['tool_calls'] or [] %}<tool_call>{{ call['function']['name'] }}"
         "({{ call['function']['arguments'] | tojson }})</tool_call>{% endfor %}")
ANY_LAYOUT = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] in ['image', 'image_url'] %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif part['type'] in ['audio', 'file'] %}<|file_pad|>"
    "{% elif part['text'] is defined %}{{ part['text'] }}"
    "{% elif part['value'] is defined %}{{ part['value'] }}"
    "{% elif part['content'] is string %}{{ part['content'] }}{% endif %}"
    "{% endfor %}{% endif %}" + CALLS + "<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
#: Written here: every part's keys and values in their order, nested objects as written.
KEY_DUMP = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}[{% for key, value in part.items() %}{{ key }}={{ value }};{% endfor %}]"
    "{% endfor %}{% endif %}" + CALLS + "<|im_end|>\n{% endfor %}"
)


def _layout_text(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(next((p[k] for k in ("text", "value", "content") if isinstance(p.get(k), str)), "") for p in content)


def _calls_text(message: dict[str, Any]) -> str:
    return "".join(f"<tool_call>{c['function']['name']}({json.dumps(json.loads(c['function']['arguments']))})"
                   "</tool_call>" for c in message.get("tool_calls") or [])


def test_tokenize_reads_every_part_layout_and_marks_only_assistant_text(tmp_path: Path, load: Any) -> None:
    from tests.support.content_parts import LAYOUT_ROWS

    tokenizer = _tokenizer(ANY_LAYOUT, [*VISION_TOKENS, "<|file_pad|>"])
    ds = load(write_jsonl(tmp_path / "rows.jsonl", LAYOUT_ROWS)).with_format("arrow")
    tokenized = ds.map(tokenize(tokenizer), batched=True, remove_columns=ds.column_names).with_format(None)
    pads = set(tokenizer.convert_tokens_to_ids(["<|image_pad|>", "<|video_pad|>", "<|file_pad|>"]))
    for row, out in zip(LAYOUT_ROWS, tokenized):
        expected = "".join(_layout_text(m) + _calls_text(m) + "<|im_end|>\n" for m in row["messages"]
                           if m["role"] == "assistant")
        assert _supervised(tokenizer, out) == expected
        media = [p for m in row["messages"] if isinstance(m["content"], list) for p in m["content"] if _layout_text({"content": [p]}) == ""]
        assert sum(i in pads for i in out["input_ids"]) == len(media)


def test_tokenize_hands_the_template_each_part_in_the_one_form_whatever_layout_wrote_it(
        tmp_path: Path, load: Any) -> None:
    """Text under ``value`` reaches the template under ``text``; an image, video or audio part as
    ``{"type": kind, kind: reference}`` wherever the layout held the reference; other keys kept
    (``tokenize.template_input``: the audit and the export's rows hand the template the same)."""
    import jinja2

    from tests.support.content_parts import (AUDIO_B64, CAT_URL, FILE_ID, HOTEL_URL, INDIA_B64, JULIET_CLIP,
                                             LAYOUT_ROWS, PDF_URI)

    one_form = [  # per row, per message: the content the template is handed (written out by hand)
        [[{"type": "text", "text": "golf text that sits under value"},
          {"type": "image", "image": CAT_URL, "min_pixels": 3136, "max_pixels": 1003520}],
         [{"type": "text", "text": "golf answer under value too"}]],
        [[{"type": "text", "text": "hotel system rules", "cache_control": {"type": "ephemeral"}}],
         [{"type": "image", "image": HOTEL_URL}, {"type": "audio", "audio": AUDIO_B64},
          {"type": "file", "file": {"filename": "hotel-invoice.pdf", "file_data": PDF_URI}},
          {"type": "file", "file": {"file_id": FILE_ID}}, {"type": "text", "text": "hotel summarise all of these"}],
         "hotel a lobby, a voice note and an invoice."],
        [[{"type": "image", "image": INDIA_B64},
          {"type": "text", "text": "india which colour is it?", "cache_control": {"type": "ephemeral"}}],
         "", [{"type": "tool_result", "tool_use_id": "call_i1", "content": "india palette says crimson red"}],
         [{"type": "text", "text": "<think>india check the palette</think>india it is red."}]],
        [[{"type": "video", "video": JULIET_CLIP, "fps": 2.0, "max_pixels": 151200},
          {"type": "text", "text": "juliet what moves in the clip?"}], "juliet a ball rolls left."],
    ]
    tokenizer = _tokenizer(KEY_DUMP, [])
    ds = load(write_jsonl(tmp_path / "rows.jsonl", LAYOUT_ROWS)).with_format("arrow")
    tokenized = ds.map(tokenize(tokenizer), batched=True, remove_columns=ds.column_names).with_format(None)
    template = jinja2.Environment().from_string(KEY_DUMP)
    for row, contents, out in zip(LAYOUT_ROWS, one_form, tokenized):
        messages = [{**m, "content": c} for m, c in zip(row["messages"], contents)]
        messages = [{**m, "tool_calls": [{**c, "function": {**c["function"], "arguments": json.loads(
            c["function"]["arguments"])}} for c in m["tool_calls"]]} if m.get("tool_calls") else m
            for m in messages]  # a template is handed the arguments as a dict
        assert tokenizer.decode(out["input_ids"]) == template.render(messages=messages)
