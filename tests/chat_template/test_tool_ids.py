"""Tool-call ids rewritten into the 9 characters Mistral's templates require: consistent, lossless, named."""

from __future__ import annotations

from pathlib import Path

from tests.chat_template.test_span_rule import MISTRAL, ROWS, TOOLS, _char_tokenizer
from whileai_datasets.chat_template import ChatTemplate
from whileai_datasets.chat_template.inspect import format_report
from whileai_datasets.chat_template.masks.tool_ids import nine_character_id, rewrite_ids
from whileai_datasets.tokenize.token_masks import tokenize


def test_each_id_and_its_result_get_the_same_nine_characters() -> None:
    given = ROWS["parallel_beside_reasoning"]
    rewritten = rewrite_ids(given, "nine_characters")
    calls = [c["id"] for m in rewritten for c in m.get("tool_calls") or []]
    answers = [m["tool_call_id"] for m in rewritten if m["role"] == "tool"]
    assert calls == answers and all(len(i) == 9 and i.isalnum() for i in calls)
    assert len(set(calls)) == 3  # distinct ids stay distinct
    assert nine_character_id("abcdefghi") == "abcdefghi"  # already 9 characters: kept
    assert given[2]["tool_calls"][0]["id"] == "call_a"  # the input is not written over
    assert rewrite_ids(given, "as_given") == given


def test_mistral_v3_rows_are_rewritten_not_refused_and_inspect_says_so() -> None:
    text = (MISTRAL / "mistral_v3_tekken.jinja").read_text(encoding="utf-8")
    transform = tokenize(_char_tokenizer(text))
    assert transform.plan.tool_call_ids == "nine_characters"
    rendered, spans = transform.row_spans(ROWS["one_call"], TOOLS, [0, 1, 0, 1])
    trained = "".join(rendered[a:e] for a, e in spans)
    assert f'"id": "{nine_character_id("call_1")}"' in trained and "Zanzibarcity" in trained
    report = ChatTemplate(text, special_tokens={"bos_token": "<s>", "eos_token": "</s>"}).inspect()
    assert report.tool_call_ids == "nine_characters"
    assert "tool-call ids:            rewritten to the 9 characters" in format_report(report)


def test_templates_that_take_any_id_keep_them(trl_dir: Path) -> None:
    transform = tokenize(_char_tokenizer((trl_dir / "qwen2_5.jinja").read_text(encoding="utf-8")))
    assert transform.plan.tool_call_ids == "as_given"
