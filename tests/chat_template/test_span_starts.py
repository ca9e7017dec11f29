"""A generation span starts exactly where the generation prompt ends (the prefix-diff rule).

For assistant turn ``k`` of a conversation, the model is prompted with
``render(messages[:k], add_generation_prompt=True)``; where that prompt is a
prefix of ``render(messages)``, the turn's first generation span must start at
its length: not earlier (text the prompt supplies is never the model's) and not
later.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.chat_template.conftest import trl_names
from whileai_datasets.chat_template import ChatTemplate
from whileai_datasets.chat_template.analysis.analysis import analyse
from whileai_datasets.chat_template.analysis.probes import PINNED_NOW, Probe, probe_set
from whileai_datasets.errors import TemplateError

REFUSED: set[str] = set()  # see test_patch.EXPECTED_REFUSALS

# Where the rule does not hold, and why: (the span starts "early"/"late", the text between).
KNOWN_START_EXCEPTIONS = {
    # After a tool result the generation prompt is empty, yet the next assistant message opens with its
    # role line; the expectations keep a role line out of every span (probes.expect_turn), so the span
    # starts after `<|turn>model\n` where prefix-diff would start before it.
    "diffusion_gemma": {("late", "<|turn>model\n")},
    # The prompt pre-fills `<think>\n`, but the turn writes it inside one variable with the reasoning
    # (`{% set content = "<think>\n" ~ reasoning ... %}{{ content }}`): no cut can fall inside a
    # variable, so the pre-filled tag is covered (allowed by probes._role_line_end).
    "nemotron_3_5_lightning": {("early", "<think>\n")},
    "nemotron_3_nano": {("early", "<think>\n")},
    "nemotron_3_super": {("early", "<think>\n")},
    "nemotron_3_ultra": {("early", "<think>\n")},
}


def start_mismatches(original: ChatTemplate, patched: ChatTemplate, probes: list[Probe],
                     kwargs: dict[str, Any]) -> set[tuple[str, int, str, str]]:
    """(probe, turn, early/late, text between) for every turn whose span misses the prompt's end."""
    found = set()
    for probe in probes:
        try:
            full = patched.render(probe.messages, probe.tools, probe.add_generation_prompt, now=PINNED_NOW, **kwargs)
        except TemplateError:
            continue
        for k, message in enumerate(probe.messages):
            if message["role"] != "assistant":
                continue
            try:
                prompt = original.render(probe.messages[:k], probe.tools, True, now=PINNED_NOW, **kwargs).text
            except TemplateError:
                continue
            if not full.text.startswith(prompt):
                continue
            start = min((s for s, _ in full.generation_spans_of(k)), default=None)
            if start is None:
                found.add((probe.name, k, "no span", ""))
            elif start != len(prompt):
                side = "early" if start < len(prompt) else "late"
                found.add((probe.name, k, side, full.text[min(start, len(prompt)) : max(start, len(prompt))]))
    return found


@pytest.mark.parametrize("stem", [s for s in trl_names("original") if s not in REFUSED])
def test_generation_span_starts_where_the_generation_prompt_ends(
    stem: str, patched: dict[str, ChatTemplate | TemplateError], trl_dir: Any
) -> None:
    result = patched[stem]
    assert isinstance(result, ChatTemplate), result
    original = ChatTemplate.from_file(trl_dir / f"{stem}.jinja")
    analysis = analyse(original.text)
    found = start_mismatches(original, result, probe_set(analysis.content_format), dict(analysis.kwargs))
    assert {(side, text) for _, _, side, text in found} == KNOWN_START_EXCEPTIONS.get(stem, set()), found


def _tool_call_only() -> Probe:
    return next(p for p in probe_set() if p.name == "tool_call")


def test_qwen2_5_tool_call_only_turn_starts_after_the_prompt_newline(
    patched: dict[str, ChatTemplate | TemplateError], trl_dir: Any
) -> None:
    result, probe = patched["qwen2_5"], _tool_call_only()
    assert isinstance(result, ChatTemplate), result
    original = ChatTemplate.from_file(trl_dir / "qwen2_5.jinja")
    prompt = original.render(probe.messages[:1], probe.tools, True).text
    rendered = result.render(probe.messages[:2], probe.tools)
    assert prompt.endswith("<|im_start|>assistant\n")
    assert rendered.text.startswith(prompt)
    spans = rendered.generation_spans_of(1)
    assert spans[0][0] == len(prompt)
    supervised = "".join(rendered.text[s:e] for s, e in spans)
    assert supervised == rendered.text[len(prompt) :]
    assert supervised.startswith('<tool_call>\n{"name": "get_weather"') and supervised.endswith("<|im_end|>\n")


@pytest.mark.parametrize("name", ["tool_call_with_content", "parallel_tool_calls"])
def test_qwen2_5_newline_before_a_later_tool_call_stays_supervised(
    name: str, patched: dict[str, ChatTemplate | TemplateError], trl_dir: Any
) -> None:
    result, probe = patched["qwen2_5"], next(p for p in probe_set() if p.name == name)
    assert isinstance(result, ChatTemplate), result
    k = next(i for i, m in enumerate(probe.messages) if m.get("tool_calls"))
    original = ChatTemplate.from_file(trl_dir / "qwen2_5.jinja")
    prompt = original.render(probe.messages[:k], probe.tools, True).text
    rendered = result.render(probe.messages[: k + 1], probe.tools)
    covered = "".join(rendered.text[s:e] for s, e in rendered.generation_spans_of(k))
    assert covered == rendered.text[len(prompt) :]  # the model writes the `\n` before each later call


SPLIT_NEWLINE = (
    "{% for m in messages %}{% if m.role == 'assistant' %}{{ '<|a|>' }}"
    "{% if m.content %}{{ '\\n' + m.content }}{% endif %}"
    "{% for call in m.tool_calls or [] %}{{ '\\n<call>' + call.function.name + '</call>' }}{% endfor %}"
    "{{ '<|end|>\\n' }}"
    "{% else %}{{ '<|u|>\\n' + m.content + '<|end|>\\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|a|>\\n' }}{% endif %}"
)


@pytest.mark.parametrize("content,calls", [("", ["x"]), ("", ["x", "y"]), ("Hi", ["x"]), ("Hi", [])])
def test_text_the_prompt_supplies_in_some_turns_only_is_split_under_a_test(content: str, calls: list[str]) -> None:
    template = ChatTemplate(SPLIT_NEWLINE)
    patched = template.with_generation()
    user = {"role": "user", "content": "Go"}
    tool_calls = [{"type": "function", "function": {"name": name, "arguments": {}}} for name in calls]
    messages = [user, {"role": "assistant", "content": content, "tool_calls": tool_calls}]
    prompt = template.render([user], add_generation_prompt=True).text
    rendered = patched.render(messages)
    assert rendered.text == template.render(messages).text and rendered.text.startswith(prompt)
    spans = rendered.generation_spans_of(1)
    assert spans[0][0] == len(prompt)
    assert "".join(rendered.text[s:e] for s, e in spans) == rendered.text[len(prompt) :]


def test_without_a_writable_test_the_earliest_start_is_kept() -> None:
    # the content is written in a loop of its own: whether it ran before the call cannot be tested at the call
    text = SPLIT_NEWLINE.replace("{% if m.content %}{{ '\\n' + m.content }}{% endif %}",
                                 "{% for part in ([m.content] if m.content else []) %}{{ '\\n' + part }}{% endfor %}")
    assert text != SPLIT_NEWLINE
    template = ChatTemplate(text)
    patched = template.with_generation()
    user = {"role": "user", "content": "Go"}
    call = {"type": "function", "function": {"name": "x", "arguments": {}}}
    messages = [user, {"role": "assistant", "content": "", "tool_calls": [call]}]
    prompt = template.render([user], add_generation_prompt=True).text
    rendered = patched.render(messages)
    assert rendered.text == template.render(messages).text
    assert rendered.generation_spans_of(1)[0][0] == len(prompt) - 1  # the prompt's `\n` is covered too
    assert "loop.first" not in patched.text
