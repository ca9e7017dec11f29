"""ChatTemplate sources: text, files, model directories, tokenizers, named variants."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from whileai_datasets.chat_template import ChatTemplate
from whileai_datasets.errors import TemplateError

DEFAULT = "{% for m in messages %}{{ bos_token }}{{ m['content'] }}{% endfor %}"
TOOL_USE = "{% for m in messages %}[tools]{{ m['content'] }}{% endfor %}"
CHAT = [{"role": "user", "content": "hi"}]


def test_from_file_reads_a_jinja_file(tmp_path: Path) -> None:
    path = tmp_path / "chat_template.jinja"
    path.write_text(DEFAULT, encoding="utf-8")
    template = ChatTemplate.from_file(path)
    assert (template.text, template.name, template.special_tokens) == (DEFAULT, "chat_template.jinja", {})


def test_from_file_reads_tokenizer_config_with_added_token_dicts(tmp_path: Path) -> None:
    config = {"chat_template": DEFAULT, "bos_token": {"content": "<s>", "lstrip": False}, "eos_token": "</s>",
              "pad_token": None}
    path = tmp_path / "tokenizer_config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    template = ChatTemplate.from_file(path)
    assert template.special_tokens == {"bos_token": "<s>", "eos_token": "</s>"}
    assert template.render(CHAT).text == "<s>hi"


def test_from_file_reads_named_variants_and_picks_default(tmp_path: Path) -> None:
    config = {"chat_template": [{"name": "default", "template": DEFAULT}, {"name": "tool_use", "template": TOOL_USE}]}
    path = tmp_path / "tokenizer_config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    template = ChatTemplate.from_file(path)
    assert (template.variant, template.variants) == ("default", ("default", "tool_use"))
    assert template.select("tool_use").render(CHAT).text == "[tools]hi"
    assert ChatTemplate.from_file(path, variant="tool_use").text == TOOL_USE


def test_unknown_variant_lists_the_known_ones() -> None:
    with pytest.raises(TemplateError, match=r"no variant 'rag'; the template has default, tool_use"):
        ChatTemplate({"default": DEFAULT, "tool_use": TOOL_USE}, variant="rag")


def test_variants_without_default_must_be_chosen() -> None:
    with pytest.raises(TemplateError, match="several variants .* none is 'default'. Pass variant="):
        ChatTemplate({"a": DEFAULT, "b": TOOL_USE})


def test_from_pretrained_reads_a_model_directory(tmp_path: Path) -> None:
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>", "bos_token": "<s>"}))
    (tmp_path / "chat_template.jinja").write_text(DEFAULT)
    (tmp_path / "additional_chat_templates").mkdir()
    (tmp_path / "additional_chat_templates" / "tool_use.jinja").write_text(TOOL_USE)
    template = ChatTemplate.from_pretrained(tmp_path)
    assert template.variants == ("default", "tool_use")
    assert template.render(CHAT).text == "<s>hi"


def test_directory_without_template_says_what_it_looked_for(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="no chat template found.*chat_template.jinja, tokenizer_config.json"):
        ChatTemplate.from_file(tmp_path)


def test_missing_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="no such file or directory"):
        ChatTemplate.from_file(tmp_path / "nope.jinja")


def test_json_without_chat_template_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer_config.json"
    path.write_text("{}")
    with pytest.raises(TemplateError, match="has no 'chat_template' key"):
        ChatTemplate.from_file(path)


def test_from_tokenizer_takes_template_and_special_tokens(char_tokenizer: Callable[[str], Any]) -> None:
    tokenizer = char_tokenizer(DEFAULT)
    template = ChatTemplate.from_tokenizer(tokenizer)
    assert template.special_tokens["bos_token"] == "<s>"
    assert template.render(CHAT).text == tokenizer.apply_chat_template(CHAT, tokenize=False)


def test_from_tokenizer_with_variant_dict(char_tokenizer: Callable[[str], Any]) -> None:
    tokenizer = char_tokenizer(DEFAULT)
    tokenizer.chat_template = {"default": DEFAULT, "tool_use": TOOL_USE}
    assert ChatTemplate.from_tokenizer(tokenizer, variant="tool_use").text == TOOL_USE


def test_from_tokenizer_without_template_is_reported(char_tokenizer: Callable[[str], Any]) -> None:
    tokenizer = char_tokenizer(DEFAULT)
    tokenizer.chat_template = None
    with pytest.raises(TemplateError, match="the tokenizer has no chat_template"):
        ChatTemplate.from_tokenizer(tokenizer)


def test_unknown_shipped_family_lists_the_shipped_ones() -> None:
    with pytest.raises(TemplateError, match=r"no shipped template 'nope'.*qwen2_5"):
        ChatTemplate.shipped("nope")


def test_save_writes_text(tmp_path: Path) -> None:
    target = ChatTemplate(DEFAULT).save(tmp_path / "out.jinja")
    assert target.read_text() == DEFAULT
