"""Fixtures for the chat-template tests: trl's shipped templates and a local tokenizer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from whileai_datasets.chat_template import ChatTemplate
from whileai_datasets.errors import TemplateError

TRL_PIN = "1.16.0"


def trl_template_dir() -> Path:
    trl = pytest.importorskip("trl")
    return Path(trl.__file__).parent / "chat_templates"


def trl_names(kind: str) -> list[str]:
    """Stems of trl's templates: 'original', 'training' or 'all' (collected at import time)."""
    try:
        import trl
    except ImportError:
        return []
    stems = sorted(p.stem for p in (Path(trl.__file__).parent / "chat_templates").glob("*.jinja"))
    if kind == "original":
        return [s for s in stems if not s.endswith("_training")]
    if kind == "training":
        return [s for s in stems if s.endswith("_training")]
    return stems


@pytest.fixture(scope="session")
def trl_dir() -> Path:
    return trl_template_dir()


@pytest.fixture(scope="session")
def patched(trl_dir: Path) -> dict[str, ChatTemplate | TemplateError]:
    """with_generation() of every trl original: a ChatTemplate, or the TemplateError it raised."""
    results: dict[str, ChatTemplate | TemplateError] = {}
    for stem in trl_names("original"):
        try:
            results[stem] = ChatTemplate.from_file(trl_dir / f"{stem}.jinja").with_generation()
        except TemplateError as err:
            results[stem] = err
    return results


@pytest.fixture(scope="session")
def read_trl(trl_dir: Path) -> Callable[[str], str]:
    def read(stem: str) -> str:
        return (trl_dir / f"{stem}.jinja").read_text(encoding="utf-8")

    return read


@pytest.fixture(scope="session")
def char_tokenizer() -> Callable[[str], Any]:
    """A transformers tokenizer with one token per character (offsets == characters), built locally."""
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")

    def build(chat_template: str) -> Any:
        model = tokenizers.models.WordLevel({"[UNK]": 0, "<s>": 1, "</s>": 2}, unk_token="[UNK]")
        backend = tokenizers.Tokenizer(model)
        backend.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex("."), behavior="isolated")
        tokenizer = transformers.PreTrainedTokenizerFast(
            tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="[UNK]")
        tokenizer.chat_template = chat_template
        return tokenizer

    return build
