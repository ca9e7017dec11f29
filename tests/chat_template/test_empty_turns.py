"""An empty assistant message: its true span is empty where the original writes no assistant text for it.

Verification accepts that empty span (and still refuses a block holding text the original does not
attribute to the turn); ``tokenize`` then trains exactly the turn's end-of-turn marker where the template
writes one, nothing otherwise, and ``mask_report`` counts such turns.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from whileai_datasets.chat_template import ChatTemplate
from whileai_datasets.errors import TemplateError
from whileai_datasets.tokenize import mask_report
from whileai_datasets.tokenize.token_masks import UnsupervisedRowsWarning, tokenize

CLASSES = Path(__file__).parent / "templates" / "classes"
SAY_NOTHING = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": ""}]
THEN_AGAIN = [*SAY_NOTHING, {"role": "user", "content": "Again"}, {"role": "assistant", "content": "Yo"}]


def _read(stem: str) -> str:
    return (CLASSES / f"{stem}.jinja").read_text(encoding="utf-8")


def _supervised_text(char_tokenizer: Callable[[str], Any], stem: str, messages: list[dict[str, Any]],
                     loss_mask: list[int]) -> str:
    tokenizer = char_tokenizer(_read(stem))
    transform = tokenize(tokenizer)
    row = transform.rows([messages], [None], [loss_mask])[0]
    assert row is not None and row.method == "patched"
    text = transform.plan.render_row(messages, None, loss_mask)[0].text
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    assert len(offsets) == len(row.mask)
    return "".join(text[a:e] for (a, e), flag in zip(offsets, row.mask) if flag)


@pytest.mark.parametrize("stem", ["empty_content_marker_between", "empty_content_eos_after_loop"])
def test_an_empty_last_answer_needs_no_block_of_its_own(stem: str) -> None:
    patched = ChatTemplate(_read(stem)).with_generation()
    rendered = patched.render(SAY_NOTHING, bos_token="<s>", eos_token="</s>")
    assert rendered.text == ChatTemplate(_read(stem)).render(SAY_NOTHING, bos_token="<s>", eos_token="</s>").text
    assert all(rendered.text[s:e] in ("", "</s>") for s, e in rendered.generation_spans)


def test_a_block_holding_text_the_turn_does_not_own_stays_refused() -> None:
    with pytest.raises(TemplateError, match=r"empty_content_borrowed.jinja:4: the same output writes assistant "
                                            r"text in some turns and other text in others"):
        ChatTemplate(_read("empty_content_borrowed"), name="empty_content_borrowed.jinja").with_generation()


def test_an_empty_marked_turn_trains_its_end_marker_where_the_template_writes_one(
    char_tokenizer: Callable[[str], Any]
) -> None:
    assert _supervised_text(char_tokenizer, "empty_content_eos_after_loop", SAY_NOTHING, [0, 1]) == "</s>"
    # not last: the template writes no marker for it, so it trains nothing (the later answer trains)
    assert _supervised_text(char_tokenizer, "empty_content_eos_after_loop", THEN_AGAIN, [0, 1, 0, 1]) == "Yo</s>"
    assert _supervised_text(char_tokenizer, "empty_content_ternary", SAY_NOTHING, [0, 1]) == "(no text)<|end|>\n"


def test_an_empty_marked_turn_without_a_marker_trains_nothing(char_tokenizer: Callable[[str], Any]) -> None:
    assert _supervised_text(char_tokenizer, "empty_content_marker_between", THEN_AGAIN, [0, 1, 0, 1]) == "Yo"
    tokenizer = char_tokenizer(_read("empty_content_marker_between"))
    row = tokenize(tokenizer).rows([SAY_NOTHING], [None], [[0, 1]])[0]
    assert row is not None and row.supervised == 0  # `<|turn|>assistant\n` is the prompt, never trained


def test_mask_report_counts_empty_assistant_turns_with_loss(char_tokenizer: Callable[[str], Any]) -> None:
    import datasets

    ds = datasets.Dataset.from_dict({"messages": [SAY_NOTHING, THEN_AGAIN, THEN_AGAIN],
                                     "loss_mask": [[0, 1], [0, 1, 0, 1], [0, 0, 0, 1]]})
    with pytest.warns(UnsupervisedRowsWarning, match=r"dropped 1 of 3 rows in this batch: no token of theirs"):
        out = ds.map(tokenize(char_tokenizer(_read("empty_content_marker_between"))), batched=True)
    report = mask_report(out, 3)
    assert (report["rows"], report["empty_assistant_turns"], report["rows_dropped_unsupervised"]) == (2, 1, 1)
    assert report["supervised_tokens"] == 4  # "Yo" twice
