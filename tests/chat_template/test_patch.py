"""with_generation(): structural patches, proven by rendering, compared with trl's hand-written twins."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.chat_template.conftest import trl_names
from tests.support.hf_chat import apply_chat_template
from whileai_datasets.chat_template import ChatTemplate, RenderedChat
from whileai_datasets.chat_template.analysis.analysis import analyse
from whileai_datasets.chat_template.analysis.probes import PINNED_NOW, Probe, probe_set
from whileai_datasets.errors import TemplateError

# trl originals the patcher refuses, and why (the refusal message must say so).
EXPECTED_REFUSALS: dict[str, str] = {}

# Where our spans and trl's hand-written *_training twin differ (probes where both render the same
# text). "twin" = only the twin covers it, "ours" = only we cover it. Which one is right:
KNOWN_TWIN_DIFFERENCES = {
    # The generation prompt ends with `<｜Assistant｜>`, and after tool results with
    # `<｜tool▁outputs▁end｜>`: the model never writes them. Ours is right (role header stays out).
    "deepseek_r1_distill": {("twin", "<｜Assistant｜>"), ("twin", "<｜tool▁outputs▁end｜>")},
    "deepseekv3": {("twin", "<｜Assistant｜>")},
    # The prompt ends with `<|start|>assistant`; ours is right.
    "gptoss": {("twin", "<|start|>assistant")},
    # The prompt is `<|im_start|>assistant\n`: the newline is prompt. Ours matches inference exactly;
    # the twin's extra newline is harmless.
    "qwen2_5": {("twin", "\n")},
    # The prompt pre-fills an empty `<think>\n\n</think>\n\n`; the model never writes it. Ours starts after
    # it (the template writes it in the same output as the reasoning, split under a prompt test).
    "qwen3_5_nothink": {("twin", "<think>\n\n</think>\n\n")},
    "qwen3_5_think": {("twin", "<think>\n")},
    "qwen3_6": {("twin", "<think>\n")},
    "qwen3_8": {("twin", "<think>\n")},
    # The prompt ends with `<|start|>assistant`, the header of a turn's first channel only (a tool call
    # after the reasoning channel, or the answer after it, writes its own); ours is right.
    "muse_glimmer": {("twin", "<|start|>assistant")},
    # GLM ends a turn by writing the next role tag (`<|user|>` is an EOS token of the model). The twin
    # covers it and is right; the template prints it in the user's turn, so we leave it out.
    "glm4moe": {("twin", "<|user|>")},
    # llava has no generation prompt, so the model writes the space after `[/INST]`; ours is right
    # (and with sentencepiece the space belongs to the first content token anyway).
    "llava_next": {("ours", " ")},
}


def _render(template: ChatTemplate, probe: Probe, kwargs: dict[str, Any]) -> RenderedChat:
    return template.render(probe.messages, probe.tools, probe.add_generation_prompt, now=PINNED_NOW, **kwargs)


def _runs(indices: set[int], text: str) -> set[str]:
    runs, start, previous = set(), None, None
    for i in sorted(indices):
        if start is None or i != previous + 1:  # type: ignore[operator]
            if start is not None:
                runs.add(text[start : previous + 1])  # type: ignore[operator]
            start = i
        previous = i
    if start is not None:
        runs.add(text[start : previous + 1])  # type: ignore[operator]
    return runs


def _covered(rendered: RenderedChat) -> set[int]:
    return {i for start, end in rendered.generation_spans for i in range(start, end)}


def test_with_generation_patches_at_least_90_percent_of_trl_originals(
    patched: dict[str, ChatTemplate | TemplateError]
) -> None:
    refused = {stem: str(result) for stem, result in patched.items() if isinstance(result, TemplateError)}
    assert len(patched) >= 40
    assert (len(patched) - len(refused)) / len(patched) >= 0.9
    assert set(refused) == set(EXPECTED_REFUSALS)
    for stem, reason in EXPECTED_REFUSALS.items():
        assert reason in refused[stem] and f"{stem}.jinja:" in refused[stem]
        assert refused[stem].endswith("[refusal class: mixed-header]")


PATCHED_STEMS = [stem for stem in trl_names("original") if stem not in EXPECTED_REFUSALS]


@pytest.mark.parametrize("stem", PATCHED_STEMS)
def test_patched_template_renders_original_text_and_covers_each_assistant_turn(
    stem: str, patched: dict[str, ChatTemplate | TemplateError], read_trl: Callable[[str], str]
) -> None:
    result = patched[stem]
    assert isinstance(result, ChatTemplate), result
    original = read_trl(stem)
    analysis = analyse(original)
    assert result.generation_blocks() and all(b.transformers_offsets_exact for b in result.generation_blocks())
    for probe in probe_set(analysis.content_format):
        try:
            before = ChatTemplate(original).render(probe.messages, probe.tools, probe.add_generation_prompt,
                                                   now=PINNED_NOW, **analysis.kwargs)
        except TemplateError:
            continue
        after = _render(result, probe, analysis.kwargs)
        assert after.text == before.text
        owners = {b.message for b in after.generation_blocks if b.end > b.start}
        assert all(probe.messages[i]["role"] == "assistant" for i in owners if i is not None)
        for k, message in enumerate(probe.messages):
            start, end = after.message_spans[k]
            if message["role"] == "assistant" and end > start:
                assert any(start <= s < end or start < e <= end for s, e in after.generation_spans), (probe.name, k)


@pytest.mark.parametrize("stem", [s[: -len("_training")] for s in trl_names("training")
                                  if s[: -len("_training")] not in EXPECTED_REFUSALS])
def test_generation_spans_match_trl_twin_except_known_differences(
    stem: str, patched: dict[str, ChatTemplate | TemplateError], read_trl: Callable[[str], str]
) -> None:
    result = patched[stem]
    assert isinstance(result, ChatTemplate), result
    twin = ChatTemplate(read_trl(f"{stem}_training"))
    analysis = analyse(read_trl(stem))
    differences: set[tuple[str, str]] = set()
    compared = 0
    for probe in probe_set(analysis.content_format):
        try:
            theirs = _render(twin, probe, analysis.kwargs)
            ours = _render(result, probe, analysis.kwargs)
        except TemplateError:
            continue
        if theirs.text != ours.text:
            continue  # the twin also changes the rendering here (think handling, tojson, ...)
        compared += 1
        differences |= {("twin", run) for run in _runs(_covered(theirs) - _covered(ours), ours.text)}
        differences |= {("ours", run) for run in _runs(_covered(ours) - _covered(theirs), ours.text)}
    assert compared >= 2
    assert differences == KNOWN_TWIN_DIFFERENCES.get(stem, set())


@pytest.mark.parametrize("stem", PATCHED_STEMS)
def test_patched_template_gives_transformers_the_same_assistant_mask(
    stem: str, patched: dict[str, ChatTemplate | TemplateError], char_tokenizer: Callable[[str], Any]
) -> None:
    result = patched[stem]
    assert isinstance(result, ChatTemplate), result
    assert len(_masks_agree(char_tokenizer(result.text))) >= 1


def _masks_agree(tokenizer: Any) -> list[list[int]]:
    """Per probe the tokenizer renders: transformers' assistant mask, checked equal to ours."""
    ours_template = ChatTemplate.from_tokenizer(tokenizer)
    masks = []
    for probe in probe_set():
        try:
            out = apply_chat_template(tokenizer, probe.messages, tools=probe.tools, tokenize=True, return_dict=True,
                                      return_assistant_tokens_mask=True)
            rendered = ours_template.render(probe.messages, probe.tools)
        except Exception:  # noqa: BLE001, S112 - conversation not supported by this template
            continue
        offsets = tokenizer(rendered.text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        ours = [int(any(s < te and ts < e for s, e in rendered.generation_spans)) for ts, te in offsets]
        assert list(out["assistant_masks"]) == ours, probe.name
        masks.append(ours)
    return masks


# ---------------------------------------------------------------- hand-made shapes


def _patched_spans(text: str, messages: list[dict[str, Any]], *args: Any, **kwargs: Any) -> tuple[str, list[str]]:
    """The patched text, and the text of each generation span rendering ``messages`` (checked equal to the
    original's rendering)."""
    patched = ChatTemplate(text).with_generation()
    rendered = patched.render(messages, *args, **kwargs)
    assert rendered.text == ChatTemplate(text).render(messages, *args, **kwargs).text
    return patched.text, [rendered.text[s:e] for s, e in rendered.generation_spans]


SHARED_LINE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)


def test_shared_output_line_gets_role_condition_and_exact_spans() -> None:
    patched = ChatTemplate(SHARED_LINE).with_generation()
    assert "{% if message.role == 'assistant' %}" in patched.text
    rendered = patched.render([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}])
    assert rendered.text == "<|user|>\nHi<|end|>\n<|assistant|>\nYo<|end|>\n"
    assert [rendered.text[s:e] for s, e in rendered.generation_spans] == ["Yo<|end|>\n"]


#: A turn built in one variable, something between the assignment and the output, the output.
ONE_VARIABLE = (
    "{{% for m in messages %}}\n{{% set line = '<|' + m['role'] + '|>' + m['content'] + '<|end|>' %}}\n"
    "{between}\n{{{{ line }}}}\n{{% endfor %}}{{% if add_generation_prompt %}}<|assistant|>{{% endif %}}"
)


def test_header_and_content_in_one_variable_are_split_into_two_outputs() -> None:
    text = ONE_VARIABLE.format(between="{% if loop.first %}{% set line = bos_token + line %}{% endif %}")
    patched = ChatTemplate(text, name="t.jinja").with_generation()
    assert "{% set line, line__wai_tail = ('<|' + m['role'] + '|>'), (m['content'] + '<|end|>')" in patched.text
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]
    rendered = patched.render(messages, bos_token="<s>")
    assert rendered.text == ChatTemplate(text).render(messages, bos_token="<s>").text
    assert [rendered.text[s:e] for s, e in rendered.generation_spans] == ["Yo<|end|>\n"]


def test_a_variable_read_between_its_assignment_and_its_output_is_not_split() -> None:
    text = ONE_VARIABLE.format(between="{% if line | length > 400 %}{{ raise_exception('too long') }}{% endif %}")
    with pytest.raises(TemplateError, match=r"^t\.jinja:\d: the output at this line writes the role header"):
        ChatTemplate(text, name="t.jinja").with_generation()


ONE_VARIABLE_THEN_MORE = (
    "{{% for m in messages %}}{{% set line = '<|' + m['role'] + '|>' + m['content'] %}}{{{{ {printed} }}}}"
    "{{% endfor %}}{{% if add_generation_prompt %}}<|assistant|>{{% endif %}}"
)


def test_a_variable_printed_first_in_a_chain_is_split_before_its_content() -> None:
    """CodeLlama-70B's shape: the turn built in a variable, printed with its end marker after it."""
    text = ONE_VARIABLE_THEN_MORE.format(printed="line + '<|end|>\\n'")
    patched = ChatTemplate(text, name="t.jinja").with_generation()
    assert "{% set line, line__wai_tail = ('<|' + m['role'] + '|>'), (m['content'])" in patched.text
    assert "{{ line }}" in patched.text and "{{ line__wai_tail + '<|end|>\\n' }}" in patched.text
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]
    rendered = patched.render(messages)
    assert rendered.text == ChatTemplate(text).render(messages).text == "<|user|>Hi<|end|>\n<|assistant|>Yo<|end|>\n"
    assert [rendered.text[s:e] for s, e in rendered.generation_spans] == ["Yo<|end|>\n"]


def test_a_chain_that_reads_its_variable_again_is_not_split() -> None:
    text = ONE_VARIABLE_THEN_MORE.format(printed="line + '<|end|>' + (line | length | string)")
    with pytest.raises(TemplateError, match=r"^t\.jinja:1: the output at this line writes the role header"):
        ChatTemplate(text, name="t.jinja").with_generation()


MACRO_TURN = (
    "{% macro turn(m, end='<|end|>') %}<|{{ m['role'] }}|>{{ m['content'] }}{{ end }}{% endmacro %}"
    "{% for m in messages %}{{ turn(m) }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def test_a_turn_written_by_a_macro_is_inlined_at_its_call() -> None:
    chat = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]
    patched, spans = _patched_spans(MACRO_TURN, chat)
    assert "{%+ with m = m, end = '<|end|>' %}<|{{ m['role'] }}|>" in patched
    assert spans == ["Yo<|end|>"]


@pytest.mark.parametrize("changes", [
    [("{{ turn(m) }}", "{{ turn(m) | trim }}")],  # the call is not alone in its tag
    [("{{ end }}{% endmacro %}", "{{ end }}{{ note }}{% endmacro %}"),  # `note` is the loop's own inline
     ("{% for m in messages %}", "{% for m in messages %}{% set note = m.get('note', '') %}")],
    [("{{ end }}{% endmacro %}", "{{ end }}{% if loop is defined %}!{% endif %}{% endmacro %}")],  # `loop` is the caller's inline
])
def test_a_macro_whose_inlined_body_could_read_other_values_stays_refused(changes: list[tuple[str, str]]) -> None:
    near = MACRO_TURN
    for old, new in changes:
        assert old in near
        near = near.replace(old, new)
    with pytest.raises(TemplateError, match=r"role header.*\[refusal class: mixed-header\]$"):
        ChatTemplate(near).with_generation()


def test_an_inlined_macro_gives_transformers_our_assistant_mask(char_tokenizer: Callable[[str], Any]) -> None:
    text = (Path(__file__).parent / "templates" / "llama3_macro.jinja").read_text(encoding="utf-8")
    patched = ChatTemplate(text, name="llama3_macro.jinja").with_generation()
    assert "{%- macro turn(message) -%}" in patched.text and "{%- with message = message -%}" in patched.text
    assert all(b.transformers_offsets_exact for b in patched.generation_blocks())
    assert sum(any(mask) for mask in _masks_agree(char_tokenizer(patched.text))) >= 3


def test_existing_blocks_that_cover_assistant_output_are_kept() -> None:
    text = (
        "{% for m in messages %}<|{{ m['role'] }}|>{% if m['role'] == 'assistant' %}{% generation %}"
        "{{ m['content'] }}<|end|>{% endgeneration %}{% else %}{{ m['content'] }}<|end|>{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    template = ChatTemplate(text)
    assert template.with_generation() is template


def test_existing_block_around_user_text_is_reported() -> None:
    text = (
        "{% for m in messages %}<|{{ m['role'] }}|>{% generation %}{{ m['content'] }}<|end|>{% endgeneration %}"
        "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    report = ChatTemplate(text).inspect()
    assert report.covers_assistant_output is False
    assert set(report.generation_roles) >= {"user"}
    with pytest.raises(TemplateError, match=r"<template>:1: the template already has generation blocks"):
        ChatTemplate(text).with_generation()


WHITESPACE_SHAPES = {
    "indented_variables": (
        "{% for m in messages %}\n"
        "  {% if m['role'] == 'assistant' %}\n"
        "    A: {{ m['content'] }}\n"
        "  {% else %}\n"
        "    U: {{ m['content'] }}\n"
        "  {% endif %}\n"
        "{% endfor %}\n"
        "{% if add_generation_prompt %}    A: {% endif %}"
    ),
    "minus_and_plus": (
        "{%- for m in messages -%}\n"
        "  {%+ if m['role'] == 'assistant' +%}\n"
        "A:{{- ' ' + m['content'] -}}\n"
        "  {%- else %}U: {{ m['content'] }}\n{% endif %}\n"
        "{%- endfor %}{% if add_generation_prompt %}A:{% endif %}"
    ),
    "data_tokens": (
        "{% for m in messages %}{% if m['role'] == 'assistant' %}<a>{{ m['content'] }}</a>\n"
        "{% else %}<u>{{ m['content'] }}</u>\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<a>{% endif %}"
    ),
}


@pytest.mark.parametrize("name", sorted(WHITESPACE_SHAPES))
def test_patch_keeps_every_whitespace_character(name: str) -> None:
    original = ChatTemplate(WHITESPACE_SHAPES[name])
    patched = original.with_generation()
    chat = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"},
            {"role": "user", "content": "Again"}, {"role": "assistant", "content": "Sure"}]
    before, after = original.render(chat), patched.render(chat)
    assert after.text == before.text
    assert ["Yo" in after.text[s:e] or "Sure" in after.text[s:e] for s, e in after.generation_spans].count(True) == 2


# ---------------------------------------------------------------- failure classes (issue 23)

CLASSES = Path(__file__).parent / "templates" / "classes"
#: Written here in the style of real templates; what each gives today (a refusal names its class).
CLASS_OUTCOMES = {
    "empty_content_ternary": "patched",
    # the turn in one expression, the end marker only between turns: an empty last answer has an empty span
    "empty_content_marker_between": "patched",
    "empty_content_eos_after_loop": "patched",  # the end marker after the loop is the empty turn's whole span
    # near miss: an empty answer renders the question again, text the model never writes for that turn
    "empty_content_borrowed": "shared-output",
    "mixed_header_codellama": "patched",  # one `{{ chunk }}` for every role, inside the message loop
    "mixed_header_set": "patched",  # header and content built in one `{% set %}`: split before the content
    # the same, the content reaching the `{% set %}` through another variable (axolotl's llama3)
    "mixed_header_set_derived": "patched",
    # near miss: the variable is extended after the content on the last turn; a split would move that text
    "mixed_header_set_appended": "mixed-header",
    # a macro writes the whole turn and reads a name set once at the top: inlined at the call (GigaChat)
    "mixed_header_macro_global": "patched",
    # the header again after a turn's tool calls (DeepSeek-R1-distill): the calls' loop has no test of its own,
    # the closing marker after it in the same branch does, so that branch's test is the prompt test
    "mixed_header_after_calls": "patched",
    # near miss: the loop alone writes the calls; how often a loop ran is no test
    "mixed_header_calls_loop_only": "mixed-header",
    # the system note moves to the last user turn: that history turn's span is where its own pass writes
    # what the model generates after the prompt, so the role test inside the loop is proven on every probe
    "shared_output_tekken": "patched",
    # the system note only in a user message that ends the conversation: no prompt is a prefix of the
    # render, but the prompt adds nothing and the answer's pass writes only a space before the content
    "shared_output_system_if_last": "patched",
    # one output for user, system and plain answers under an `or`; a last tool message is closed
    # differently: the header the prompt ends with is where the answer's pass starts
    "shared_output_or_roles": "patched",
    # near miss: the system note is written inside the last answer's pass, before its content
    "shared_output_note_in_answer": "mixed-header",
    # the generation prompt writes a default system block when the conversation has none: read the prompt
    # off the conversation that opens with a system message (muse_glimmer as vLLM ships it)
    "shared_output_prompt_adds_system": "patched",
    # near miss: the system block comes with every prompt, so the prompt is a suffix of no conversation
    "shared_output_prompt_always_system": "shared-output",
    # the role tag from a macro with a space the prompt leaves out, after an if that closes the turn before
    # (Jamba): the if's output is sunk without moving whitespace, the output cut after the prompt's text
    "mixed_header_role_macro_space": "patched",
    # near miss: a turn's calls, header and all, written first by a loop: the header again is the model's
    "mixed_header_role_macro_after_calls": "mixed-header",
    # every turn appended to one namespace string printed at the end (Reka-Edge): each append printed
    "accumulated_namespace": "patched",
    # near miss: an end marker printed directly between appends would move if the appends were printed
    "accumulated_namespace_printed_between": "mixed-header",
}


@pytest.mark.parametrize("stem", sorted(CLASS_OUTCOMES))
def test_failure_class_templates_are_patched_exactly_or_refused_naming_their_class(stem: str) -> None:
    original = (CLASSES / f"{stem}.jinja").read_text(encoding="utf-8")
    expected = CLASS_OUTCOMES[stem]
    if expected != "patched":
        with pytest.raises(TemplateError, match=rf"\[refusal class: {expected}\]$") as info:
            ChatTemplate(original, name=f"{stem}.jinja").with_generation()
        assert getattr(info.value, "refusal_class", None) == expected
        return
    patched = ChatTemplate(original, name=f"{stem}.jinja").with_generation()
    analysis = analyse(original)
    rendered = 0
    for probe in probe_set(analysis.content_format):
        try:
            before = ChatTemplate(original).render(probe.messages, probe.tools, probe.add_generation_prompt,
                                                   now=PINNED_NOW, **analysis.kwargs)
        except TemplateError:
            continue
        after = _render(patched, probe, analysis.kwargs)
        assert after.text == before.text, probe.name
        for start, end in after.generation_spans:  # only assistant output is in a block
            assert any(s <= start and end <= e for (s, e), m in zip(after.message_spans, probe.messages)
                       if m["role"] == "assistant") or after.text[start:end].strip() in ("", "</s>"), probe.name
        rendered += 1
    assert rendered >= 3


def test_a_shared_output_in_the_message_loop_is_split_by_the_role_inside_the_loop() -> None:
    text = (Path(__file__).parent / "templates" / "mistral_shared_output.jinja").read_text(encoding="utf-8")
    patched = ChatTemplate(text).with_generation().text
    loop_at, condition_at = patched.index("{%- for message in messages %}"), patched.index("message.role == 'assistant'")
    assert condition_at > loop_at  # the test on the loop variable sits inside the loop
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]
    rendered = ChatTemplate(patched).render(messages, bos_token="<s>", eos_token="</s>")
    assert [rendered.text[s:e] for s, e in rendered.generation_spans] == [" Yo</s>"]


@pytest.mark.parametrize("stem", ["mixed_header_set", "mixed_header_codellama", "empty_content_ternary",
                                  "empty_content_marker_between", "empty_content_eos_after_loop",
                                  "shared_output_tekken", "shared_output_system_if_last", "shared_output_or_roles",
                                  "mixed_header_set_derived", "mixed_header_macro_global",
                                  "mixed_header_after_calls", "shared_output_prompt_adds_system",
                                  "mixed_header_role_macro_space", "accumulated_namespace"])
def test_a_patched_tokenizer_config_gives_transformers_our_assistant_mask(
    stem: str, tmp_path: Path, char_tokenizer: Callable[[str], Any]
) -> None:
    from transformers import AutoTokenizer

    text = (CLASSES / f"{stem}.jinja").read_text(encoding="utf-8")
    char_tokenizer(text).save_pretrained(tmp_path / "hub")
    config_path = tmp_path / "hub" / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    (tmp_path / "hub" / "chat_template.jinja").unlink(missing_ok=True)  # the template inside the config, as on the Hub
    config_path.write_text(json.dumps({**config, "chat_template": text}), encoding="utf-8")
    patched = ChatTemplate.from_file(config_path).with_generation()
    config_path.write_text(json.dumps({**config, "chat_template": patched.text}), encoding="utf-8")  # handed to TRL
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "hub")
    assert tokenizer.chat_template == patched.text
    assert sum(any(mask) for mask in _masks_agree(tokenizer)) >= 2


def test_a_history_turn_is_judged_where_its_own_pass_writes_the_generated_text() -> None:
    text = (CLASSES / "shared_output_tekken.jinja").read_text(encoding="utf-8")
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Yo"}, {"role": "user", "content": "Again"}]
    expected = analyse(text).results  # the sys note moves off the first user turn once a later one exists
    multi = next(r.run for r in expected if r.run.probe.name == "generation_prompt_multi")
    assert [multi.text[a:e] for a, e in (t.must for t in multi.turns)] == ["Paris.</s>"]
    assert _patched_spans(text, chat, None, True, bos_token="<s>", eos_token="</s>")[1] == ["Yo</s>"]


#: The answer's header is the prompt's in a plain turn and the model's after a reasoning channel (muse-style).
CHANNELS = (
    "{%- for m in messages -%}{%- if m.role == 'assistant' -%}"
    "{%- if m.get('reasoning_content') -%}{{- '<|a|>think:' + m.reasoning_content + '<|eom|>' -}}{%- endif -%}"
    "{{- '<|a|>' -}}{{- m.content + '<|eot|>' -}}"
    "{%- else -%}{{- '<|' + m.role + '|>' + m.content + '<|eot|>' -}}{%- endif -%}"
    "{%- endfor -%}{%- if add_generation_prompt -%}<|a|>{%- endif -%}"
)
REASONED = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"},
            {"role": "user", "content": "Why"}, {"role": "assistant", "content": "So", "reasoning_content": "hmm"}]


def test_a_header_the_prompt_supplies_only_in_some_turns_is_written_under_a_prompt_test() -> None:
    patched, spans = _patched_spans(CHANNELS, REASONED)
    assert "{%- if not (((m.get('reasoning_content')))) %}{{- '<|a|>' }}{% endif %}{% generation %}" in patched
    assert spans == ["Yo<|eot|>", "think:hmm<|eom|>", "<|a|>So<|eot|>"]  # the second `<|a|>` is the model's


def test_a_header_whose_turns_no_test_tells_apart_stays_refused() -> None:
    looped = CHANNELS.replace(  # the reasoning channel written by a loop: how often it ran is not a test
        "{%- if m.get('reasoning_content') -%}{{- '<|a|>think:' + m.reasoning_content + '<|eom|>' -}}{%- endif -%}",
        "{%- for r in ([m.reasoning_content] if m.get('reasoning_content') else []) -%}"
        "{{- '<|a|>think:' + r + '<|eom|>' -}}{%- endfor -%}")
    assert looped != CHANNELS
    with pytest.raises(TemplateError, match=r"no test at this line tells those turns apart.*\[refusal class: mixed-header\]$"):
        ChatTemplate(looped).with_generation()


def test_a_history_turn_that_renders_other_text_than_the_model_writes_stays_refused() -> None:
    text = (CLASSES / "shared_output_tekken.jinja").read_text(encoding="utf-8")
    plain = "{%- set out = message['content'] + eos_token -%}"
    assert plain in text
    near = text.replace(plain, "{%- set out = (message['content'] if loop.last else message['content'] | upper)"
                                " + eos_token -%}")
    with pytest.raises(TemplateError, match=r"\[refusal class: shared-output\]$"):
        ChatTemplate(near, name="near.jinja").with_generation()


#: an output right after an if, both with ``-`` signs, between indented block tags (trim and lstrip apply)
SINK_SHAPE = (
    "{% for m in messages %}\n"
    "  {% if not loop.first %}\n    {{- '<sep>' -}}\n  {% endif %}\n"
    "  {{- '<' + m.role + '> ' + m.content -}}\n"
    "  {% set seen = true %}\n"
    "{% endfor %}\n"
)


def test_an_output_sunk_into_the_if_before_it_renders_the_same_text() -> None:
    """The whitespace the output's ``-`` signs stripped goes with it (left in place, it was printed). Other
    sign shapes may print their whitespace elsewhere once sunk: tracing the rewrite then sees another text,
    and the next rewrite is tried."""
    from whileai_datasets.chat_template.analysis.trace import collect_units
    from whileai_datasets.chat_template.patching.repair import sink_into_previous_if
    from whileai_datasets.chat_template.sandbox.source import parse_located

    text = SINK_SHAPE
    unit = next(u for u in collect_units(parse_located(text)) if "m.content" in text[u.start : u.start + 40])
    sunk = sink_into_previous_if(text, unit.start)
    assert sunk is not None and sunk.count("m.content") == 2
    for chat in ([{"role": "user", "content": "Hi"}], [{"role": "user", "content": "Hi"},
                                                      {"role": "assistant", "content": "Yo"}]):
        assert ChatTemplate(sunk).render(chat).text == ChatTemplate(text).render(chat).text


def test_appends_to_a_namespace_string_are_printed_where_they_are_made() -> None:
    text = (CLASSES / "accumulated_namespace.jinja").read_text(encoding="utf-8")
    chat = [{"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Yo", "tool_calls": [
                {"type": "function", "function": {"name": "f", "arguments": {}}}]},
            {"role": "tool", "content": "ok"}, {"role": "assistant", "content": "Done"}]
    patched, spans = _patched_spans(text, chat)
    assert "{{- acc.text -}}" not in patched and "{% set acc.text = acc.text ~ " in patched
    assert "".join(spans) == " Yo\n<call>f</call><end>\n Done<end>\n"


def test_an_output_before_the_first_append_stays_where_it_is() -> None:
    """A BOS token printed before the string is built: it runs before every append, rewritten or not."""
    text = (CLASSES / "accumulated_namespace.jinja").read_text(encoding="utf-8")
    start = '{%- set acc = namespace(text="") -%}'
    chat = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]
    patched, spans = _patched_spans(text.replace(start, start + "{{- bos_token -}}"), chat, bos_token="<s>")
    assert "{{- bos_token -}}" in patched and spans == [" ", "Yo", "<end>\n"]


@pytest.mark.parametrize("change", [
    # an output in the loop that appends, before the first append: its passes interleave with the appends
    ("{%- for message in messages -%}", "{%- for message in messages -%}{{- '|' -}}"),
    # the string is written by a macro that has no namespace of its own
    ("{%- set acc = namespace(text=\"\") -%}",
     "{%- macro note() -%}{%- set acc.text = acc.text ~ '!' -%}{%- endmacro -%}{%- set acc = namespace(text=\"\") -%}"),
    ("{%- set acc = namespace(text=\"\") -%}", "{%- set acc = namespace(text=\"> \") -%}"),  # starts non-empty
    ("{{- acc.text -}}", "{{- acc.text -}}{%- set acc.text = acc.text ~ 'late' -%}"),  # appended after the print
])
def test_a_namespace_string_that_is_not_only_appended_before_its_print_is_not_rewritten(
        change: tuple[str, str]) -> None:
    from whileai_datasets.chat_template.analysis.trace import collect_units
    from whileai_datasets.chat_template.patching.accumulated import print_accumulated
    from whileai_datasets.chat_template.sandbox.source import parse_located

    text = (CLASSES / "accumulated_namespace.jinja").read_text(encoding="utf-8")
    assert change[0] in text
    near = text.replace(change[0], change[1])
    unit = next(u for u in collect_units(parse_located(near)) if not u.is_data)
    assert print_accumulated(near, unit.start) is None
    with pytest.raises(TemplateError, match=r"\[refusal class: mixed-header\]$"):
        ChatTemplate(near).with_generation()
