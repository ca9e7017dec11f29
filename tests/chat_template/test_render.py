"""render(): the text transformers would produce, with spans per message and per block."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from tests.chat_template.conftest import trl_names
from tests.support.hf_chat import apply_chat_template
from whileai_datasets.chat_template import ChatTemplate
from whileai_datasets.chat_template.analysis.probes import (
    probe_set,
    with_parts,
    with_string_arguments,
)
from whileai_datasets.errors import TemplateError

CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
    {"role": "tool", "content": "Snow", "tool_call_id": "c1", "name": "get_weather"},
    {"role": "assistant", "content": "It snows."},
]


def _transformers_text(tokenizer: Any, messages: list[dict[str, Any]], tools: Any, agp: bool) -> str | None:
    try:
        return str(apply_chat_template(tokenizer, messages, tools=tools, tokenize=False, add_generation_prompt=agp))
    except Exception:  # noqa: BLE001 - the template rejects this conversation in transformers too
        return None


@pytest.mark.parametrize("stem", trl_names("all"))
def test_render_equals_transformers_on_every_trl_template(
    stem: str, read_trl: Callable[[str], str], char_tokenizer: Callable[[str], Any]
) -> None:
    tokenizer = char_tokenizer(read_trl(stem))
    template = ChatTemplate.from_tokenizer(tokenizer)
    compared = 0
    for probe in probe_set():
        for variant in (probe, with_parts(probe), with_string_arguments(probe)):
            expected = _transformers_text(tokenizer, variant.messages, variant.tools, variant.add_generation_prompt)
            if expected is None:
                with pytest.raises(TemplateError, match="failed to render|forbids|the template reads"):
                    template.render(variant.messages, variant.tools, variant.add_generation_prompt,
                                    now=datetime.now())
                continue
            rendered = template.render(variant.messages, variant.tools, variant.add_generation_prompt)
            assert rendered.text == expected, (stem, variant.name)
            compared += 1
    assert compared >= 5


@pytest.mark.parametrize("stem", trl_names("training"))
def test_generation_spans_equal_transformers_assistant_masks(
    stem: str, read_trl: Callable[[str], str], char_tokenizer: Callable[[str], Any]
) -> None:
    tokenizer = char_tokenizer(read_trl(stem))
    template = ChatTemplate.from_tokenizer(tokenizer)
    checked = 0
    for probe in probe_set():
        try:
            out = apply_chat_template(tokenizer, probe.messages, tools=probe.tools, tokenize=True, return_dict=True,
                                      return_assistant_tokens_mask=True)
        except Exception:  # noqa: BLE001, S112 - conversation not supported by this template
            continue
        rendered = template.render(probe.messages, probe.tools)
        offsets = tokenizer(rendered.text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        ours = [int(any(s < e_tok and s_tok < e for s, e in rendered.generation_spans)) for s_tok, e_tok in offsets]
        assert list(out["assistant_masks"]) == ours, (stem, probe.name)
        checked += 1
    assert checked >= 1


def test_message_spans_cover_each_message_in_order() -> None:
    text = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</{{ m['role'] }}>{% endfor %}"
    rendered = ChatTemplate(text).render(CHAT[:3])
    pieces = [rendered.text[s:e] for s, e in rendered.message_spans]
    assert pieces == ["<system>Be brief.</system>", "<user>Hi</user>", "<assistant>Hello!</assistant>"]


def test_system_message_rendered_before_the_loop_gets_the_preamble(read_trl: Callable[[str], str]) -> None:
    rendered = ChatTemplate(read_trl("qwen2_5")).render(CHAT)
    start, end = rendered.message_spans[0]
    assert (start, rendered.text[start:end]) == (0, "<|im_start|>system\nBe brief.<|im_end|>\n")
    start, end = rendered.message_spans[6]
    assert rendered.text[start:end] == "<|im_start|>assistant\nIt snows.<|im_end|>\n"


def test_generation_blocks_know_their_message(read_trl: Callable[[str], str]) -> None:
    rendered = ChatTemplate(read_trl("qwen2_5_training")).render(CHAT)
    owners = [block.message for block in rendered.generation_blocks]
    assert owners == [2, 4, 6]
    assert rendered.text[slice(*rendered.generation_spans_of(6)[0])] == "\nIt snows.<|im_end|>\n"
    assert all(block.line == 31 for block in rendered.generation_blocks)


def test_block_inside_macro_gets_the_offsets_where_its_text_lands() -> None:
    text = (
        "{% macro answer(m) %}[{% generation %}{{ m['content'] }}{% endgeneration %}]{% endmacro %}"
        "{% for m in messages %}{{ m['role'] }}: {% if m['role'] == 'assistant' %}{{ answer(m) }}"
        "{% else %}{{ m['content'] }}{% endif %};{% endfor %}"
    )
    rendered = ChatTemplate(text).render(CHAT[1:3])
    assert rendered.text == "user: Hi;assistant: [Hello!];"
    assert [rendered.text[s:e] for s, e in rendered.generation_spans] == ["Hello!"]


def test_block_inside_set_capture_gets_the_offsets_where_its_text_lands() -> None:
    text = (
        "{% for m in messages %}{% set body %}{% generation %}{{ m['content'] }}{% endgeneration %}{% endset %}"
        "<{{ m['role'] }}>{{ body }}\n{% endfor %}"
    )
    rendered = ChatTemplate(text).render(CHAT[1:3])
    assert [rendered.text[s:e] for s, e in rendered.generation_spans] == ["Hi", "Hello!"]
    assert [b.message for b in rendered.generation_blocks] == [0, 1]


def test_render_refuses_input_with_the_reserved_marker_characters() -> None:
    with pytest.raises(TemplateError, match=r"inputs\[.messages.\]\[0\]\[.content.\]: the input contains"):
        ChatTemplate("{{ messages[0]['content'] }}").render([{"role": "user", "content": "a\ue000b"}])


@pytest.mark.parametrize("text", ["{% set __wai_iter = namespace %}{{ messages[0].content }}",
                                  "\n{% for __wai_loop_open in messages %}x{% endfor %}"])
def test_render_refuses_a_template_that_uses_the_span_trackers_names(text: str) -> None:
    # the tracker's callbacks compile to plain calls (no sandbox check): a template may not bind those names
    with pytest.raises(TemplateError, match=r"uses the name '__wai_(iter|loop_open)', which span tracking reserves") as err:
        ChatTemplate(text).render([{"role": "user", "content": "hi"}])
    assert err.value.location == f"template line {text.count(chr(10), 0, text.index('__wai')) + 1}"


def test_render_pins_strftime_now() -> None:
    rendered = ChatTemplate("{{ strftime_now('%d %b %Y') }}").render([], now=datetime(2024, 7, 26))
    assert rendered.text == "26 Jul 2024"


def test_render_drops_none_keys_and_aliases_reasoning_like_transformers() -> None:
    text = "{% for m in messages %}{{ m.tool_calls is defined }}|{{ m.thinking }}|{{ m.reasoning_content }}{% endfor %}"
    rendered = ChatTemplate(text).render([{"role": "assistant", "content": "x", "tool_calls": None,
                                           "reasoning": "why"}])
    assert rendered.text == "False|why|why"


def test_render_passes_special_tokens_and_kwargs_override_them() -> None:
    template = ChatTemplate("{{ bos_token }}{{ flag }}", special_tokens={"bos_token": "<s>"})
    assert template.render([], flag=1).text == "<s>1"
    assert template.render([], bos_token="[B]").text == "[B]"


def test_render_renders_list_of_parts_content(read_trl: Callable[[str], str]) -> None:
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is it?"}]}]
    rendered = ChatTemplate(read_trl("qwen2_5_vl")).render(messages, add_generation_prompt=True)
    assert "<|vision_start|><|image_pad|><|vision_end|>What is it?<|im_end|>" in rendered.text


def test_render_reports_template_mutating_a_list() -> None:
    text = "{% set seen = [] %}{% for m in messages %}{{ seen.append(m) }}{% endfor %}"
    with pytest.raises(TemplateError, match=r"calls .append\(\) on a list, which changes it in place.*namespace"):
        ChatTemplate(text).render(CHAT[:1])


def test_render_error_names_template_line_and_cause() -> None:
    text = "{% for m in messages %}\n{{ raise_exception('roles must alternate') }}{% endfor %}"
    with pytest.raises(TemplateError, match=r"^t\.jinja:2: the template failed to render: .*roles must alternate"):
        ChatTemplate(text, name="t.jinja").render(CHAT[:1])


def test_a_missing_special_token_is_named_with_how_to_pass_it() -> None:
    template = ChatTemplate("{{ bos_token }}{% for m in messages %}{{ m.content + eos_token }}{% endfor %}",
                            name="t.jinja")
    with pytest.raises(TemplateError, match=r"^t\.jinja:1: the template reads 'eos_token', a special token this "
                                            r"render was not given\. Pass it: render\(\.\.\., eos_token=tokenizer"):
        template.render([{"role": "user", "content": "hi"}])
    rendered = template.render([{"role": "user", "content": "hi"}], bos_token="<s>", eos_token="</s>")
    assert rendered.text == "<s>hi</s>"


def test_an_item_the_row_lacks_is_named_as_the_rows_not_the_templates() -> None:
    template = ChatTemplate("{{ messages[0]['content'] }}", name="t.jinja")
    with pytest.raises(TemplateError, match=r"this conversation does not have \(list object has no element 0\)\. "
                                            r"The template expects a message"):
        template.render([])


def test_an_other_undefined_name_is_named() -> None:
    template = ChatTemplate("{% for m in messages %}{{ m.content ~ custom_setting.suffix }}{% endfor %}", name="t.jinja")
    with pytest.raises(TemplateError, match=r"reads 'custom_setting', which is neither a message field nor a render "
                                            r"argument\. Pass it as render\(\.\.\., custom_setting=\.\.\.\)"):
        template.render([{"role": "user", "content": "hi"}])


def test_a_batch_renders_each_variable_as_its_own_type_when_values_are_equal() -> None:
    from whileai_datasets.chat_template.rendering.render import batch_inputs, render_plain

    text = "{{ flag }}|{{ messages[0]['content'] }}"
    messages = [{"role": "user", "content": "hi"}]
    with batch_inputs():  # the context but for messages is prepared once per batch, by its values' types too
        rendered = [render_plain(text, messages, kwargs={"flag": value}) for value in (1, True, 1.0, 1)]
    assert rendered == ["1|hi", "True|hi", "1.0|hi", "1|hi"]
