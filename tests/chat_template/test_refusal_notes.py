"""A patch refusal names its line and says whether ``tokenize`` masks the template turn by turn instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from whileai_datasets.chat_template import ChatTemplate
from whileai_datasets.errors import TemplateError

TEMPLATES = Path(__file__).parent / "templates"


def test_a_refusal_says_tokenize_masks_the_template_turn_by_turn() -> None:
    chat = ChatTemplate.from_file(TEMPLATES / "classes" / "mixed_header_set_appended.jinja")
    with pytest.raises(TemplateError, match=r"^mixed_header_set_appended\.jinja:11: the output at this line .* "
                                            r"tokenize masks it turn by turn instead \(mask method 'turns', checked "
                                            r"on 5 probe conversations\)\. \[refusal class: mixed-header\]$"):
        chat.with_generation()
    assert chat.inspect().mask_method == "turns"


def test_a_refusal_says_why_turn_by_turn_masks_are_impossible_too() -> None:
    chat = ChatTemplate.from_file(TEMPLATES / "classes" / "shared_output_note_in_answer.jinja")
    with pytest.raises(TemplateError, match=r"tokenize cannot mask it turn by turn either: on probe 'system', "
                                            r"messages\[0\]: the system content is supervised"):
        chat.with_generation()


def test_a_template_no_probe_renders_says_there_is_nothing_to_mask() -> None:
    chat = ChatTemplate("{% if functions is not defined %}{{ raise_exception('This template needs functions.') }}"
                        "{% endif %}{% for m in messages %}{{ m['content'] }}{% endfor %}", name="needs_functions.jinja")
    with pytest.raises(TemplateError, match=r"tokenize cannot mask it turn by turn either: no probe conversation "
                                            r"has an assistant turn to mask\. \[refusal class: no-assistant-turn\]$"):
        chat.with_generation()


def test_a_guard_refusal_adds_no_turn_by_turn_note() -> None:
    with pytest.raises(TemplateError, match=r"the verdict as the completion\. \[refusal class: classifier\]$"):
        ChatTemplate.from_file(TEMPLATES / "guards" / "judge_prompt.jinja").with_generation()


def test_inspect_says_what_the_refusal_says_about_turn_by_turn_masks() -> None:
    can = ChatTemplate.from_file(TEMPLATES / "classes" / "mixed_header_set_appended.jinja").inspect()
    cannot = ChatTemplate.from_file(TEMPLATES / "classes" / "shared_output_note_in_answer.jinja").inspect()
    assert (can.patch_refusal_class, can.turns_mask) == ("mixed-header", True)
    assert "and tokenize masks it exactly, turn by turn" in can.format()
    assert cannot.patch_refusal_class is not None and cannot.turns_mask is False
    assert "and tokenize cannot mask it turn by turn either (the reason below)" in cannot.format()
