"""Generation blocks are found from jinja2's AST, never from the text."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.chat_template.conftest import trl_names
from whileai_datasets.chat_template import ChatTemplate
from whileai_datasets.errors import TemplateError

# The pattern TRL 1.16 and transformers use, kept here only to show where it is wrong.
TRL_REGEX = re.compile(r"\{%-?\s*generation\s*-?%\}")

LOOP = "{% for m in messages %}{{ m['role'] }}: {BODY}\n{% endfor %}"


def _loop(body: str) -> str:
    return LOOP.replace("{BODY}", body)


NOT_A_BLOCK = {
    "comment": _loop("{{ m['content'] }}{# {% generation %}{{ m['content'] }}{% endgeneration %} #}"),
    "raw_block": _loop("{% raw %}{% generation %}x{% endgeneration %}{% endraw %}{{ m['content'] }}"),
    "string_literal": _loop("{{ m['content'] ~ '{% generation %}' }}"),
    "add_generation_prompt_only": _loop("{{ m['content'] }}")
    + "{% if add_generation_prompt %}assistant: {% endif %}",
    "variable_named_generation": _loop("{% set generation = m['content'] %}{{ generation }}"),
}

A_BLOCK = {
    "no_spaces": _loop("{%generation%}{{ m['content'] }}{%endgeneration%}"),
    "trim_both": _loop("{%- generation -%}{{ m['content'] }}{%- endgeneration -%}"),
    "plus_sign": _loop("{%+ generation %}{{ m['content'] }}{%+ endgeneration %}"),
    "plus_both_sides": _loop("{%+ generation +%}{{ m['content'] }}{% endgeneration +%}"),
    "nested_in_if": _loop("{% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] }}"
                          "{% endgeneration %}{% else %}{{ m['content'] }}{% endif %}"),
}


@pytest.mark.parametrize("name", sorted(NOT_A_BLOCK))
def test_inspect_ignores_generation_word_outside_a_tag(name: str) -> None:
    report = ChatTemplate(NOT_A_BLOCK[name]).inspect()
    assert report.syntax_error is None
    assert report.has_generation_block is False


@pytest.mark.parametrize("name", sorted(A_BLOCK))
def test_inspect_finds_generation_tag_in_every_spelling(name: str) -> None:
    template = ChatTemplate(A_BLOCK[name])
    assert template.inspect().has_generation_block is True
    assert [b.line for b in template.inspect().generation_blocks] == [1]


def test_trl_regex_is_wrong_where_the_ast_is_right() -> None:
    assert TRL_REGEX.search(NOT_A_BLOCK["comment"]) is not None
    assert TRL_REGEX.search(NOT_A_BLOCK["raw_block"]) is not None
    assert TRL_REGEX.search(A_BLOCK["plus_sign"]) is None


def test_inspect_reports_block_lines_inside_nested_for_and_if() -> None:
    text = (
        "{%- for m in messages %}\n"
        "  {%- if m['role'] == 'assistant' %}\n"
        "    {%- for part in [m['content']] %}\n"
        "      {%- generation %}\n"
        "{{ part }}\n"
        "      {%- endgeneration %}\n"
        "    {%- endfor %}\n"
        "  {%- else %}{{ m['content'] }}{%- endif %}\n"
        "{%- endfor %}"
    )
    (block,) = ChatTemplate(text).inspect().generation_blocks
    assert (block.line, block.end_line, block.in_macro) == (4, 6, False)


def test_inspect_flags_block_inside_macro_as_shifted_for_transformers() -> None:
    text = (
        "{% macro answer(m) %}{% generation %}{{ m['content'] }}{% endgeneration %}{% endmacro %}\n"
        "{% for m in messages %}{% if m['role'] == 'assistant' %}A: {{ answer(m) }}"
        "{% else %}U: {{ m['content'] }}{% endif %}\n{% endfor %}"
    )
    report = ChatTemplate(text).inspect()
    (block,) = report.generation_blocks
    assert block.in_macro is True
    assert block.transformers_offsets_exact is False
    assert report.generation_roles == ("assistant",)


def test_inspect_flags_block_inside_set_capture() -> None:
    text = (
        "{% for m in messages %}{% set body %}{% generation %}{{ m['content'] }}{% endgeneration %}"
        "{% endset %}{{ m['role'] }}: {{ body }}\n{% endfor %}"
    )
    (block,) = ChatTemplate(text).inspect().generation_blocks
    assert block.in_capture is True


def test_inspect_reports_syntax_error_with_line() -> None:
    text = "{% for m in messages %}\n{{ m['content'] }}\n{% if m %}\n{% endfor %}"
    report = ChatTemplate(text, name="broken.jinja").inspect()
    assert report.syntax_error_line == 4
    assert "endif" in (report.syntax_error or "")
    assert "line 4" in report.format()


def test_unclosed_generation_block_is_a_syntax_error_at_its_end() -> None:
    text = "{% for m in messages %}\n{% generation %}{{ m['content'] }}\n{% endfor %}"
    report = ChatTemplate(text).inspect()
    assert report.syntax_error is not None and "endgeneration" in report.syntax_error
    with pytest.raises(TemplateError, match=r"<template>:3: syntax error"):
        ChatTemplate(text).render([{"role": "user", "content": "x"}])


@pytest.mark.parametrize("stem", trl_names("all"))
def test_detection_matches_every_trl_template(stem: str, read_trl: Callable[[str], str]) -> None:
    blocks = ChatTemplate(read_trl(stem)).generation_blocks()
    ships_blocks = stem.endswith("_training") or stem.startswith("lfm2_2_5")
    assert bool(blocks) is ships_blocks
    assert all(b.line <= b.end_line for b in blocks)
