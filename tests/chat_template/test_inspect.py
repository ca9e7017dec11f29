"""inspect(): the report's behavioural facts, checked on trl templates whose behaviour is known."""

from __future__ import annotations

import json
from collections.abc import Callable

from whileai_datasets.chat_template import ChatTemplate


def test_report_for_qwen2_5(read_trl: Callable[[str], str]) -> None:
    report = ChatTemplate(read_trl("qwen2_5"), name="qwen2_5.jinja").inspect()
    assert report.has_generation_block is False
    assert (report.supports_tools, report.renders_tool_calls, report.supports_system) == (True, True, True)
    assert report.uses_add_generation_prompt is True
    assert report.generation_prompt == "<|im_start|>assistant\n"
    assert report.think_in_history == "keeps"
    assert report.prefix_preserving is False and "parallel_tool_calls" in (report.prefix_break or "")


def test_report_for_training_twin_describes_its_blocks(read_trl: Callable[[str], str]) -> None:
    report = ChatTemplate(read_trl("qwen2_5_training")).inspect()
    assert [(b.line, b.end_line) for b in report.generation_blocks] == [(31, 50)]
    assert report.generation_roles == ("assistant",)
    assert report.covers_assistant_output is True
    assert report.end_of_turn_in_span is True


def test_report_sees_gemma_refuse_system_and_tools(read_trl: Callable[[str], str]) -> None:
    report = ChatTemplate(read_trl("gemma")).inspect()
    assert report.supports_system is False
    assert report.supports_tools is None or report.supports_tools is False
    assert {p.name for p in report.probes if not p.ok} >= {"system", "tool_call"}
    assert "probes that fail" in report.format()


def test_report_sees_qwen3_drop_think_from_history(read_trl: Callable[[str], str]) -> None:
    report = ChatTemplate(read_trl("qwen3")).inspect()
    assert report.think_in_history == "drops"


def test_report_sees_prefix_preserving_template() -> None:
    text = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
    report = ChatTemplate(text).inspect()
    assert (report.prefix_preserving, report.prefix_break) == (True, None)
    assert report.uses_add_generation_prompt is False
    assert report.supports_tools is False


def test_report_to_dict_is_json(read_trl: Callable[[str], str]) -> None:
    data = json.loads(ChatTemplate(read_trl("phi3_training")).inspect().to_json())
    assert data["has_generation_block"] is True
    assert data["generation_blocks"][0]["transformers_offsets_exact"] is True
    assert {"prefix_preserving", "supports_tools", "think_in_history", "probes"} <= set(data)


def test_end_of_turn_outside_block_is_reported() -> None:
    text = (
        "{% for m in messages %}<{{ m['role'] }}>{% if m['role'] == 'assistant' %}{% generation %}"
        "{{ m['content'] }}{% endgeneration %}{% else %}{{ m['content'] }}{% endif %}</s>{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    report = ChatTemplate(text).inspect()
    assert report.end_of_turn_in_span is False
    assert report.covers_assistant_output is False
    assert any("</s>" in problem for problem in report.coverage_problems)


def test_report_is_the_same_whatever_ran_before_it(read_trl: Callable[[str], str]) -> None:
    """inspect() first, or after the mask plan and the patch it needs: one report, and the structure read by the
    patch is never the finished report (nor the reverse)."""
    for family in ("qwen2_5", "qwen2_5_training", "gemma"):
        first = ChatTemplate(read_trl(family), name=f"{family}.jinja")
        report = first.inspect()
        first.mask_plan()
        patched_after = first.with_generation().text
        later = ChatTemplate(read_trl(family), name=f"{family}.jinja")
        later.mask_plan()
        patched_before = later.with_generation().text
        assert later.inspect() == report and first.inspect() == report, family
        assert patched_before == patched_after, family
        assert report.mask_method is not None, family
