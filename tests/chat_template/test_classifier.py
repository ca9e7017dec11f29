"""Guard/classifier templates (the whole conversation in one user prompt) are refused for chat training."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.chat_template.conftest import trl_names
from whileai_datasets import ChatTemplate
from whileai_datasets.errors import TemplateError

HERE = Path(__file__).parent / "templates" / "guards"
#: Llama-Guard- and ShieldGemma-style, and shapes beyond them: a judge prompt that always opens the
#: assistant's turn (rerank-style), a verdict question naming the judged role, one quoting the judged
#: message, a short verdict footer, the role named as the question's last word, a response judge that
#: refuses a conversation ending on the user, a guard whose policy is a variable no conversation supplies
#: (ShieldGemma's ``guideline``), a closing text that starts with the reply's header and then asks a verdict,
#: ShieldGemma's shape (only the last one or two messages, a policy read from a name the caller passes).
GUARDS = ["judge_prompt", "llama_style", "quoted_verdict", "response_judge", "role_named_last", "role_question",
          "shield_style", "verdict_footer", "shield_guideline", "header_then_verdict",
          "shieldgemma_guideline"]
#: Chat templates whose ends look like a guard's: the assistant's next header written after every
#: conversation (so [user] and [user, assistant] end the same way), the system note folded into the last
#: user turn (so [user] is not a prefix of [user, assistant]).
NEAR_MISSES = ["header_trailer_chat.jinja", "mistral_shared_output.jinja", "classes/shared_output_tekken.jinja"]
TEMPLATES = HERE.parent
REFUSAL = r"guard/classifier template, not a chat-training template: it puts the whole conversation into one user prompt"


@pytest.mark.parametrize("stem", GUARDS)
def test_with_generation_refuses_a_guard_template_saying_what_it_is(stem: str) -> None:
    chat = ChatTemplate.from_file(HERE / f"{stem}.jinja")
    with pytest.raises(TemplateError, match=rf"^{stem}\.jinja: this is a {REFUSAL}") as info:
        chat.with_generation()
    assert getattr(info.value, "refusal_class", None) == "classifier"
    assert "the conversation as the prompt and the verdict as the completion" in str(info.value)


@pytest.mark.parametrize("stem", GUARDS)
def test_inspect_reports_a_guard_template_and_no_mask_method(stem: str) -> None:
    report = ChatTemplate.from_file(HERE / f"{stem}.jinja").inspect()
    assert report.classifier and "closing text" in report.classifier
    assert report.mask_method is None
    assert "not a chat-training template" in report.format()


def test_tokenize_refuses_rows_on_a_guard_template(tmp_path: Path, load: Any) -> None:
    from tests.conftest import write_jsonl
    from tests.support.tiny_lm import train_tokenizer
    from whileai_datasets.tokenize.token_masks import tokenize

    rows = [{"messages": [{"role": "user", "content": "is this fine?"}, {"role": "assistant", "content": "it is."}]}]
    template = (HERE / "shield_style.jinja").read_text()
    tokenizer = train_tokenizer([str(rows)] * 3, chat_template=template)
    ds = load(write_jsonl(tmp_path / "rows.jsonl", rows)).with_format("arrow")
    with pytest.raises(TemplateError, match=REFUSAL):
        ds.map(tokenize(tokenizer), batched=True, remove_columns=ds.column_names)


@pytest.mark.parametrize("stem", trl_names("all"))
def test_no_chat_template_of_trl_is_taken_for_a_classifier(stem: str, read_trl: Any) -> None:
    assert ChatTemplate(read_trl(stem), name=f"{stem}.jinja").inspect().classifier is None


@pytest.mark.parametrize("name", NEAR_MISSES)
def test_a_chat_template_whose_ending_looks_like_a_guard_is_a_chat_template(name: str) -> None:
    chat = ChatTemplate.from_file(TEMPLATES / name)
    report = chat.inspect()
    assert report.classifier is None
    assert report.mask_method == "patched"
    chat.with_generation()


def test_a_judge_prompt_with_the_assistant_turn_always_open_is_still_a_guard() -> None:
    report = ChatTemplate.from_file(HERE / "judge_prompt.jinja").inspect()
    assert report.classifier is not None and "Does the last message of the conversation meet the policy?" in \
        report.classifier


def test_every_written_template_outside_the_guard_folder_is_not_a_guard() -> None:
    for path in sorted(TEMPLATES.rglob("*.jinja")):
        if path.parent != HERE:
            assert ChatTemplate.from_file(path).inspect().classifier is None, path.name


def test_codellama_70b_instruct_is_a_chat_template_masked_turn_by_turn() -> None:
    """Its conversations end with the next reply's header and an addressee (``Source: assistant`` /
    ``Destination: user``), whoever spoke last: the header, not a verdict question."""
    chat = ChatTemplate.from_file(TEMPLATES / "codellama_70b_instruct.jinja")
    report = chat.inspect()
    assert report.classifier is None and report.mask_method == "turns"


def test_codellama_70b_writing_the_next_assistant_header_after_every_conversation_is_a_chat_template() -> None:
    """What follows its last message is the same whatever it is (as in a guard), but it is the header
    every reply is written after ('Source: assistant'), with a destination line under it: not a verdict."""
    chat = ChatTemplate.from_file(TEMPLATES / "codellama_70b_source_destination.jinja")
    report = chat.inspect()
    assert report.classifier is None
    assert report.mask_method is not None
    try:
        chat.with_generation()
    except TemplateError as err:
        assert getattr(err, "refusal_class", None) != "classifier", str(err)


def test_shieldgemma_reading_its_policy_from_a_name_the_caller_passes_is_named_a_guard() -> None:
    report = ChatTemplate.from_file(HERE / "shieldgemma_guideline.jinja").inspect()
    assert report.classifier is not None
    assert "Does the Chatbot Response violate the policy above?" in report.classifier or \
        "Our safety principle" in report.classifier


def test_a_chat_template_reading_a_name_the_caller_passes_is_not_taken_for_a_guard() -> None:
    text = ("{{ '<|im_start|>system\\nYou are ' + persona + '.<|im_end|>\\n' }}"
            "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
            "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
    assert ChatTemplate(text, name="persona.jinja").inspect().classifier is None
