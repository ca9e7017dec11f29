"""Token masks on every template trl ships and on one small template per failure class.

The oracle (``mask_oracle.py``) does not use our span code: it searches the
rows' unique contents in transformers' own rendering of the original template.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.chat_template import mask_oracle as oracle
from tests.chat_template.conftest import trl_names, trl_template_dir
from whileai_datasets.chat_template import ChatTemplate
from whileai_datasets.errors import TemplateError
from whileai_datasets.tokenize import mask_report
from whileai_datasets.tokenize.token_masks import BadMaskRowsWarning, Tokenize, tokenize

LOCAL = Path(__file__).parent / "templates"
#: The failure classes of issue 10, one small template each, and the trl templates no structural patch fits.
#: CodeLlama-70B-Instruct builds each turn's header and trimmed content in one ``{% set %}`` expression.
FALLBACK = {"llama3_macro_scoped", "codellama_70b_instruct", "codellama_70b_source_destination"}


#: Failure-class templates left out here: the near misses that stay refused, and one that needs the tool list
#: on every row (the oracle's rows mostly have none; test_patch checks its masks against transformers).
NEAR_MISSES = {"empty_content_borrowed", "shared_output_note_in_answer", "shared_output_or_roles",
               "mixed_header_set_appended", "mixed_header_calls_loop_only", "mixed_header_role_macro_after_calls",
               "accumulated_namespace_printed_between", "shared_output_prompt_always_system"}


def _paths() -> dict[str, Path]:
    paths = {p.stem: p for p in sorted(LOCAL.glob("*.jinja"))}
    paths.update({p.stem: p for p in sorted((LOCAL / "classes").glob("*.jinja")) if p.stem not in NEAR_MISSES})
    if trl_names("all"):
        paths.update({stem: trl_template_dir() / f"{stem}.jinja" for stem in trl_names("all")})
    return paths


PATHS = _paths()
_TRANSFORMS: dict[str, Tokenize] = {}


@pytest.fixture(scope="module")
def transform_for(char_tokenizer: Callable[[str], Any]) -> Callable[[str], Tokenize]:
    def build(stem: str) -> Tokenize:
        if stem not in _TRANSFORMS:
            _TRANSFORMS[stem] = Tokenize(char_tokenizer(PATHS[stem].read_text(encoding="utf-8")))
        return _TRANSFORMS[stem]

    return build


def _row_sets(tokenizer: Any, template: str) -> list[tuple[list[dict[str, Any]], Any]]:
    rows: list[tuple[list[dict[str, Any]], Any]] = [(m, None) for m in oracle.plain_rows() + oracle.think_rows()]
    if ChatTemplate(template).inspect().content_format == "parts":  # llava: list-of-parts content only
        rows = [(oracle.as_parts(m), None) for m, _ in rows]
    for messages in oracle.tool_rows():
        text = oracle.render(tokenizer, template, messages, [oracle.TOOL], False)
        if text is not None and "Zanzibarcity" in text:  # the template supports tools
            rows.append((messages, [oracle.TOOL]))
    return [(m, t) for m, t in rows if oracle.render(tokenizer, template, m, t, False) is not None]


@pytest.mark.parametrize("mode", ["assistant", "final"])
@pytest.mark.parametrize("stem", sorted(PATHS))
def test_every_loss_turn_and_its_end_is_supervised_and_nothing_masked_is(
    stem: str, mode: str, transform_for: Callable[[str], Tokenize]
) -> None:
    transform = transform_for(stem)
    template = PATHS[stem].read_text(encoding="utf-8")
    declared = ChatTemplate(template).generation_blocks() != ()
    checked = 0
    for messages, tools in _row_sets(transform.tokenizer, template):
        flags = oracle.loss_mask(messages, mode)
        row = transform.rows([messages], [tools], [flags])[0]
        assert row is not None and row.supervised > 0
        assert oracle.mask_problems(transform.tokenizer, template, messages, flags, tools, row.input_ids,
                                    row.assistant_masks, declared) == []
        checked += 1
    assert checked >= 2


@pytest.mark.parametrize("stem", sorted(PATHS))
def test_the_mask_method_is_reported_per_template(stem: str, transform_for: Callable[[str], Tokenize]) -> None:
    report = ChatTemplate(PATHS[stem].read_text(encoding="utf-8")).inspect()
    expected = "template" if report.has_generation_block else "turns" if stem in FALLBACK else "patched"
    assert report.mask_method == expected == transform_for(stem).plan.method
    assert (report.mask_method_reason is not None) == (expected == "turns")
    assert f"token masks by:" in report.format()


def test_tool_call_arguments_are_handed_as_the_template_renders_them() -> None:
    concatenating = ChatTemplate((LOCAL / "string_arguments.jinja").read_text(encoding="utf-8"))
    assert concatenating.inspect().tool_call_arguments == "text"
    assert ChatTemplate.from_file(trl_template_dir() / "qwen2_5.jinja").inspect().tool_call_arguments == "dict"


# ---------------------------------------------------------------- never a silent wrong mask

#: A template whose own generation block wraps the user's content instead of the assistant's.
WRONG_BLOCK = (
    "{% for m in messages %}{% if m['role'] == 'user' %}<u>{% generation %}{{ m['content'] }}{% endgeneration %}"
    "</u>\n{% else %}<a>\n{{ m['content'] }}</a>\n{% endif %}{% endfor %}"
)
#: A block opened in an assistant pass that also writes the next user message.
LEAKING_BLOCK = (
    "{% for m in messages %}{% if m['role'] == 'assistant' %}<a>{% generation %}{{ m['content'] }}"
    "{% if not loop.last %}{{ '</a><u>' + messages[loop.index0 + 1]['content'] }}{% endif %}{% endgeneration %}"
    "{% elif loop.first %}<u>{{ m['content'] }}{% endif %}{% endfor %}"
)
#: A wrong block, and every assistant turn rendered after all user turns: no method finds the turns.
OUT_OF_ORDER = (
    "{% for m in messages %}{% if m['role'] == 'user' %}U:{% generation %}{{ m['content'] }}{% endgeneration %}\n"
    "{% endif %}{% endfor %}\n"
    "{% for m in messages %}{% if m['role'] == 'assistant' %}A:{{ m['content'] }}\n{% endif %}{% endfor %}"
)


def _rows() -> dict[str, list[Any]]:
    messages = oracle.plain_rows()[0][1:]
    return {"messages": [messages, messages], "loss_mask": [oracle.loss_mask(messages, "assistant")] * 2}


def _supervised(transform: Tokenize, batch: dict[str, Any]) -> list[str]:
    """The supervised text of each row, read through the tokenizer's offsets."""
    out = transform(batch)
    texts = []
    for messages, ids, mask in zip(batch["messages"], out["input_ids"], out["assistant_masks"]):
        text, _ = transform.row_spans(messages, None, batch["loss_mask"][0])
        offsets = transform.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        assert len(offsets) == len(ids)
        texts.append("".join(text[a:e] for (a, e), flag in zip(offsets, mask) if flag))
    return texts


@pytest.mark.parametrize("template", [WRONG_BLOCK, LEAKING_BLOCK], ids=["misses", "leaks"])
def test_rows_whose_blocks_fail_the_check_are_masked_by_per_turn_rendering(
    template: str, char_tokenizer: Callable[[str], Any]
) -> None:
    transform = tokenize(char_tokenizer(template))
    assert transform.plan.method == "template"
    out = transform(_rows())
    assert list(out["mask_method"]) == ["turns", "turns"]
    for text in _supervised(transform, _rows()):
        assert "Reply narwhal first." in text and "Reply pangolin final." in text
        assert "Userask" not in text


def test_a_mask_no_method_gets_right_raises_naming_row_message_and_line(char_tokenizer: Callable[[str], Any]) -> None:
    transform = tokenize(char_tokenizer(OUT_OF_ORDER))
    with pytest.raises(TemplateError, match=r"^TokenizersBackend:3: row 7, messages\[1\] \(assistant\): the assistant "
                                            r"content carries loss but 'Reply narwhal first\.' of it is not supervised "
                                            r"\(mask method 'template', and per-turn rendering does not find it either\)"):
        transform(_rows(), indices=[7, 8])


def test_skipping_bad_rows_drops_warns_and_counts_them(char_tokenizer: Callable[[str], Any]) -> None:
    import datasets

    transform = tokenize(char_tokenizer(OUT_OF_ORDER), on_bad_row="skip")
    good = {"messages": [[{"role": "user", "content": "hi"}]], "loss_mask": [[0]]}
    ds = datasets.Dataset.from_dict({key: _rows()[key] + good[key] for key in good})
    with pytest.warns(BadMaskRowsWarning, match=r"dropped 2 of 3 rows in this batch whose token mask failed"), \
            pytest.warns(UserWarning, match=r"dropped 1 of 3 rows in this batch: no token of theirs"):
        out = ds.map(transform, batched=True)
    assert out.num_rows == 0
    assert mask_report(out, 3)["rows"] == 0


def test_skipped_rows_are_counted_in_mask_report(char_tokenizer: Callable[[str], Any]) -> None:
    import datasets

    template = OUT_OF_ORDER.replace("A:{{ m['content'] }}", "A:{% if m['content'] == 'ok' %}{% generation %}"
                                    "{{ m['content'] }}{% endgeneration %}{% else %}{{ m['content'] }}{% endif %}")
    transform = tokenize(char_tokenizer(template), on_bad_row="skip")
    fine = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    ds = datasets.Dataset.from_dict({"messages": [fine, *_rows()["messages"]],
                                     "loss_mask": [[0, 1], *_rows()["loss_mask"]]})
    with pytest.warns(BadMaskRowsWarning, match=r"dropped 2 of 3 rows"):
        out = ds.map(transform, batched=True)
    report = mask_report(out, 3)
    assert (out.num_rows, report["bad_rows_dropped"], report["rows_dropped_unsupervised"]) == (1, 2, 0)
    assert report["mask_methods"] == {"template": 1}


def test_on_bad_row_is_checked(char_tokenizer: Callable[[str], Any]) -> None:
    with pytest.raises(Exception, match=r"on_bad_row must be one of 'raise', 'skip', got 'drop'"):
        tokenize(char_tokenizer(WRONG_BLOCK), on_bad_row="drop")  # type: ignore[arg-type]


def test_tool_call_probes_are_judged_only_where_the_template_renders_tool_calls() -> None:
    from whileai_datasets.chat_template.analysis.analysis import analyse

    def meaningful(text: str) -> dict[str, bool]:
        return {r.run.probe.name: r.meaningful for r in analyse(text).results if r.rendered is not None}

    no_tools = meaningful((LOCAL / "chatml_no_tools.jinja").read_text(encoding="utf-8"))
    assert no_tools["tool_call"] is False and no_tools["parallel_tool_calls"] is False
    assert no_tools["multi_turn"] is True
    assert meaningful((trl_template_dir() / "qwen2_5.jinja").read_text(encoding="utf-8"))["tool_call"] is True
    ChatTemplate((LOCAL / "chatml_no_tools.jinja").read_text(encoding="utf-8")).with_generation()


def test_an_answer_quoting_the_question_is_supervised_whole_under_per_turn_rendering(
    transform_for: Callable[[str], Tokenize]
) -> None:
    transform = transform_for("llama3_macro_scoped")
    assert transform.plan.method == "turns"
    messages = [{"role": "user", "content": "Userask echo please?"},
                {"role": "assistant", "content": "You said: Userask echo please? Reply parrot."},
                {"role": "user", "content": "Userask again?"},
                {"role": "assistant", "content": "Reply final heron."}]
    flags = oracle.loss_mask(messages, "assistant")
    text, spans = transform.row_spans(messages, None, flags)
    supervised = "".join(text[a:e] for a, e in spans)
    assert "You said: Userask echo please? Reply parrot.<|eot_id|>" in supervised
    assert "Userask again?" not in supervised


def test_a_row_the_span_markers_break_is_masked_over_plain_renders(char_tokenizer: Callable[[str], Any]) -> None:
    # the template measures its captured output, which holds span markers: only long rows notice
    template = ("{% set body %}{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</{{ m['role'] }}>\n"
                "{% endfor %}{% endset %}{% if body | length > 300 %}{{ raise_exception('conversation too long') }}"
                "{% endif %}{{ body }}")
    transform = tokenize(char_tokenizer(template))
    assert transform.plan.tracking_exact
    reply = "Reply " + "long " * 47  # 293 characters rendered; the markers add 16
    messages = [{"role": "user", "content": "Userask short?"}, {"role": "assistant", "content": reply}]
    flags = oracle.loss_mask(messages, "assistant")
    text, spans, method = transform.checked_spans(messages, None, flags)
    assert len(text) <= 300 and method == "turns"
    assert "".join(text[a:e] for a, e in spans) == f"<assistant>{reply}</assistant>\n"
    too_long = [messages[0], {"role": "assistant", "content": reply * 2}]
    with pytest.raises(TemplateError, match=r"conversation too long"):
        transform.checked_spans(too_long, None, flags)
