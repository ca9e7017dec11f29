"""Prefills written in the same output as the content (Hy3, Kimi-K3), and histories that leave the prompt
inside one of its tags (DeepSeek-V3.2): patched with the byte-identical proof, each beside a near miss.

The templates are written here in the style of those models' templates (tool calls rendered, so every
probe's spans are judged).
"""

from __future__ import annotations

from typing import Any

import pytest

from whileai_datasets.chat_template import ChatTemplate
from whileai_datasets.chat_template.analysis.analysis import analyse
from whileai_datasets.errors import TemplateError

#: ``{prefill}`` is what the generation prompt writes after ``<|assistant|>``; ``{printed}`` the output
#: that writes an assistant turn (``body(m)`` writes the prefill, then the content and the calls)
TEMPLATE = (
    "{%- macro body(m) -%}<think></think>{{ m.content }}"
    "{%- for c in m.tool_calls or [] -%}<call>{{ c.function.name }} {{ c.function.arguments | tojson }}</call>"
    "{%- endfor -%}{%- endmacro -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'assistant' -%}HEADER{{ PRINTED }}"
    "{%- else -%}<|{{ m.role }}|>{{ m.content }}<|end|>{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>PREFILL{%- endif -%}"
)
ALWAYS = "<think></think>"
#: Kimi-K3's shape: the macro's output in a chain (no operand boundary where the content starts)
MACRO_CHAIN = "body(m) ~ '<|end|>'"
#: an operand that is no string (a field the message may lack): not even the operands can be measured
UNMEASURED = ("'<think></think>' ~ m.content ~ (m.tool_calls | tojson if m.tool_calls else '') ~ m.missing_field"
              " ~ '<|end|>'")
MESSAGES = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"},
            {"role": "user", "content": "More?"}, {"role": "assistant", "content": "No."}]


def _template(printed: str, prefill: str, header: str = "<|assistant|>") -> str:
    return TEMPLATE.replace("HEADER", header).replace("PRINTED", printed).replace("PREFILL", prefill)


def _spans(chat: ChatTemplate, messages: list[dict[str, Any]]) -> list[str]:
    rendered = chat.render(messages)
    return [rendered.text[a:e] for a, e in rendered.generation_spans]


@pytest.mark.parametrize("printed", [MACRO_CHAIN, UNMEASURED], ids=["macro-chain", "unmeasured-operand"])
def test_a_prefill_printed_with_the_content_is_cut_off_where_it_is_printed(printed: str) -> None:
    text = _template(printed, ALWAYS)
    patched = ChatTemplate(text, name="t.jinja").with_generation()
    assert ".startswith(\"<think></think>\")" in patched.text  # cut at run time, by the prompt's own text
    assert patched.render(MESSAGES).text == ChatTemplate(text).render(MESSAGES).text
    assert _spans(patched, MESSAGES) == ["Yo<|end|>", "No.<|end|>"]


#: the near miss: the calls come first, in their own output, so in a turn with calls the think block
#: printed with the content is the model's own text (its turn began with the calls); cutting it off
#: wherever the value starts with it would leave it out there
CALLS_FIRST = "<|assistant|>{%- for c in m.tool_calls or [] -%}<call>{{ c.function.name }}</call>{%- endfor -%}"


@pytest.mark.parametrize("printed", ["thought(m) ~ '<|end|>'", "'<think></think>' ~ m.content ~ m.missing_field"
                                     " ~ '<|end|>'"], ids=["macro-chain", "unmeasured-operand"])
def test_a_prefill_that_is_the_models_own_text_in_some_turns_stays_refused(printed: str) -> None:
    text = "{%- macro thought(m) -%}<think></think>{{ m.content }}{%- endmacro -%}" + _template(
        printed, ALWAYS, header=CALLS_FIRST)
    with pytest.raises(TemplateError, match=r"^t\.jinja:1: .*\[refusal class: mixed-header\]$"):
        ChatTemplate(text, name="t.jinja").with_generation()


def test_a_header_that_runs_into_a_value_is_cut_where_the_prompts_text_ends() -> None:
    """The header is one operand and the prefill opens the next (a value that goes on with the content), so
    the prompt's text runs over an operand boundary into a value: cut at run time after all of it (Jamba's
    ``bom + role_tag(role) + content``), proven on every probe like a prefill alone."""
    text = _template("'<|assistant|>' ~ body(m) ~ '<|end|>'", ALWAYS, header="")
    patched = ChatTemplate(text, name="t.jinja").with_generation()
    assert '.startswith("<|assistant|><think></think>")' in patched.text
    assert patched.render(MESSAGES).text == ChatTemplate(text).render(MESSAGES).text
    assert _spans(patched, MESSAGES) == ["Yo<|end|>", "No.<|end|>"]


def test_a_role_header_printed_with_the_content_in_one_value_is_no_prefill_and_stays_refused() -> None:
    """The same cut would work, but a turn built whole in one value (a variable, a macro) is the shape of the
    rewrites that split the variable or inline the macro, whose guards decide it; a header is no prefill."""
    text = "{%- macro turn(m) -%}<|assistant|>{{ body(m) }}{%- endmacro -%}" + _template(
        "turn(m) ~ '<|end|>'", ALWAYS, header="")
    with pytest.raises(TemplateError, match=r"^t\.jinja:1: .*\[refusal class: mixed-header\]$"):
        ChatTemplate(text, name="t.jinja").with_generation()


#: DeepSeek-V3.2's shape: the prompt prefills ``<think></think>``, the history writes ``</think>`` alone
HISTORY_CLOSES_ONLY = (
    "{%- for m in messages -%}"
    "{%- if m.role == 'assistant' -%}{{ '<|assistant|>' }}{{ close }}{{ m.content + '<|end|>' }}"
    "{%- else -%}<|{{ m.role }}|>{{ m.content }}<|end|>{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>{{ open }}{{ close }}{%- endif -%}"
)


def _must_texts(text: str) -> list[str]:
    analysis = analyse(text, None, "t.jinja")
    result = next(r for r in analysis.ok if r.run.probe.name == "multi_turn")
    return [result.run.text[t.must[0]:t.must[1]] for t in result.run.turns]


def test_a_history_that_leaves_the_prompt_inside_a_tag_starts_the_turn_at_that_tag() -> None:
    text = "{%- set open, close = '<think>', '</think>' -%}" + HISTORY_CLOSES_ONLY
    assert all(must.startswith("</think>") for must in _must_texts(text))  # not '/think>': no tag cut in two
    patched = ChatTemplate(text, name="t.jinja").with_generation()
    assert _spans(patched, MESSAGES) == ["</think>Yo<|end|>", "</think>No.<|end|>"]


def test_a_history_that_leaves_the_prompt_inside_plain_text_is_not_moved() -> None:
    """Brackets are no tag: the shared ``[`` stays prompt, as before."""
    text = "{%- set open, close = '[THINK]', '[/THINK]' -%}" + HISTORY_CLOSES_ONLY
    assert all(must.startswith("/THINK]") for must in _must_texts(text))
