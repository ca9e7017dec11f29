"""The training templates in templates/ are exactly what with_generation() makes of trl's originals."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import pytest

from whileai_datasets.chat_template import ChatTemplate

SHIPPED = sorted(p.name[: -len(".jinja")] for p in files("whileai_datasets.templates").iterdir()
                 if p.name.endswith(".jinja"))


def test_shipped_templates_cover_the_main_families() -> None:
    assert {"qwen2_5", "llama3_1", "llama3_2", "gemma3", "phi3_5", "cohere2", "qwen3", "gptoss"} <= set(SHIPPED)


@pytest.mark.parametrize("family", SHIPPED)
def test_shipped_template_is_with_generation_of_trl_original(family: str, trl_dir: Path) -> None:
    regenerated = ChatTemplate.from_file(trl_dir / f"{family}.jinja").with_generation()
    assert ChatTemplate.shipped(family).text == regenerated.text


@pytest.mark.parametrize("family", SHIPPED)
def test_shipped_template_blocks_cover_only_assistant_output(family: str) -> None:
    report = ChatTemplate.shipped(family).inspect()
    assert report.has_generation_block and report.covers_assistant_output
    assert report.generation_roles == ("assistant",)
    assert all(block.transformers_offsets_exact for block in report.generation_blocks)
