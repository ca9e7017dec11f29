"""A turn whose output the template does not render is never counted right; a trimmed content is.

Also: the stop tokens the model stops on come from the tokenizer and the generation config beside it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.chat_template.test_span_rule import ROWS, TOOLS, _char_tokenizer
from whileai_datasets.chat_template import ChatTemplate
from whileai_datasets.chat_template.masks.dropped import dropped_output
from whileai_datasets.chat_template.masks.turn_edges import stop_tokens
from whileai_datasets.errors import TemplateError
from whileai_datasets.tokenize import mask_report
from whileai_datasets.tokenize.token_masks import BadMaskRowsWarning, template_messages, tokenize


def _trl(trl_dir: Path, stem: str) -> str:
    return (trl_dir / f"{stem}.jinja").read_text(encoding="utf-8")


def test_dropped_output_names_each_missing_piece(trl_dir: Path) -> None:
    chat = ChatTemplate(_trl(trl_dir, "llama3"), special_tokens={"bos_token": "<s>", "eos_token": "</s>"})
    messages = template_messages(ROWS["parallel_beside_reasoning"])
    rendered = chat.render(messages, tools=TOOLS)
    flags = [int(m["role"] == "assistant") for m in messages]
    found = {(d.message, d.kind, d.what) for d in dropped_output(rendered, messages, flags)}
    assert {(2, "tool_calls", "get_weather(Oslocity)"), (2, "tool_calls", "get_weather(Limacity)"),
            (7, "tool_calls", "get_weather(Quitocity)")} <= found
    assert (2, "reasoning", "Ponder marmot.") in found  # reported, never a refusal by itself
    assert not any(kind == "content" for _, kind, _ in found)  # every content is rendered


def test_a_template_dropping_tool_calls_trains_no_row_with_them(trl_dir: Path) -> None:
    import datasets

    tokenizer = _char_tokenizer(_trl(trl_dir, "phi3"))
    rows = [ROWS["one_call"], ROWS["parallel_beside_reasoning"], ROWS["one_call"][:1] + [
        {"role": "assistant", "content": "Plain answer ocelot."}]]
    ds = datasets.Dataset.from_dict({"messages": rows, "tools": [json.dumps(TOOLS)] * 3,
                                     "loss_mask": [[int(m["role"] == "assistant") for m in r] for r in rows]})
    with pytest.raises(TemplateError, match=r"row 0, messages\[1\] \(assistant\): the template does not render "
                                            r"its tool call 'get_weather\(Zanzibarcity\)'"):
        ds.map(tokenize(tokenizer), batched=True)
    with pytest.warns(BadMaskRowsWarning, match=r"2 of 3 rows"):
        out = ds.map(tokenize(tokenizer, on_bad_row="skip"), batched=True)
    assert mask_report(out, 3)["bad_rows_dropped"] == 2 and out.num_rows == 1


def test_content_the_template_only_trims_is_trained_not_refused(trl_dir: Path) -> None:
    for stem in ("llama3_1", "qwen2_5"):
        tokenizer = _char_tokenizer(_trl(trl_dir, stem))
        messages = [{"role": "user", "content": "Userask trim?"},
                    {"role": "assistant", "content": "\n  Answer with   spaces ocelot.\n"}]
        trained = "".join(_trained_text(tokenizer, messages, [0, 1]))
        assert "Answer with   spaces ocelot." in trained, stem


def test_stop_tokens_come_from_the_generation_config_beside_the_tokenizer(tmp_path: Path, trl_dir: Path) -> None:
    tokenizer = _char_tokenizer(_trl(trl_dir, "glm4moe"))
    for token in ("<|user|>", "<|observation|>"):
        tokenizer.add_special_tokens({"additional_special_tokens": [token]}, replace_extra_special_tokens=False)
    tokenizer.save_pretrained(tmp_path)
    ids = tokenizer.convert_tokens_to_ids(["</s>", "<|user|>", "<|observation|>"])
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": ids}), encoding="utf-8")
    from transformers import AutoTokenizer

    saved = AutoTokenizer.from_pretrained(tmp_path)
    assert stop_tokens(saved) == ("</s>", "<|user|>", "<|observation|>")
    assert stop_tokens(tokenizer) == ("</s>",)  # built in memory: no config beside it
    # a config that cannot be read is named, never read as "no stop token"
    (tmp_path / "generation_config.json").write_text('{"eos_token_id": [2,', encoding="utf-8")
    with pytest.raises(TemplateError, match=r"generation_config\.json: the generation config cannot be read: .*"
                                            r"pass tokenize\(\.\.\., stop_tokens=\[\.\.\.\]\)"):
        stop_tokens(saved)


def _trained_text(tokenizer: Any, messages: list[dict[str, Any]], flags: list[int], **options: Any) -> list[str]:
    transform = tokenize(tokenizer, **options)
    text, spans = transform.row_spans(messages, TOOLS, flags)
    return [text[a:e] for a, e in spans]


def test_glm_trains_the_stop_token_it_stops_on_and_nemotron_never_its_prefill(trl_dir: Path) -> None:
    glm = _char_tokenizer(_trl(trl_dir, "glm4moe"))
    messages = ROWS["one_call"]
    flags = [0, 1, 0, 1]
    plain = _trained_text(glm, messages, flags)
    stopped = _trained_text(glm, messages, flags, stop_tokens=["<|observation|>", "<|user|>"])
    assert plain[0].endswith("</tool_call>") and stopped[0] == plain[0] + "<|observation|>"
    assert stopped[1] == plain[1]  # nothing after the row's last turn
    nemotron = _char_tokenizer(_trl(trl_dir, "nemotron_3_nano"))
    trained = _trained_text(nemotron, messages, flags)
    assert all(span.startswith("</think>") or not span.startswith("<think>") for span in trained)
    assert sum("</think>" in span for span in trained) == 2  # both turns alike


@pytest.mark.parametrize("stem", ["idefics3", "smolvlm"])
def test_a_template_that_renders_string_content_as_nothing_is_caught_with_the_row_count(
        stem: str, trl_dir: Path) -> None:
    """These templates read content as a list of parts: a string content renders as ``User: <end_of_utterance>``,
    and the turn would train its end marker alone. tokenize refuses it, counting the rows; inspect names it."""
    template = _trl(trl_dir, stem)
    tokenizer = _char_tokenizer(template)
    said = [{"role": "user", "content": "Userask heron?"}, {"role": "assistant", "content": "Reply okapi."}]
    parts = [{**m, "content": [{"type": "text", "text": m["content"]}]} for m in said]
    transform = tokenize(tokenizer)
    assert transform.rows([parts], [None], [[0, 1]])[0] is not None  # its own shape trains
    with pytest.raises(TemplateError, match=r"row 1, messages\[1\] \(assistant\): the template does not render its "
                                            r"content 'Reply okapi\.'.*2 of 3 rows of this batch fail: "
                                            r"2 template-drops-content \(rows 1, 2\)"):
        transform.rows([parts, said, said], [None] * 3, [[0, 1]] * 3)
    kept = tokenize(tokenizer, on_bad_row="skip").rows([parts, said, said], [None] * 3, [[0, 1]] * 3)
    assert [row is not None for row in kept] == [True, False, False]
    report = ChatTemplate(template).inspect()
    assert report.content_format == "parts"
    assert any("with string content, messages[1]: the template does not render its content" in d
               for d in report.dropped_output), report.dropped_output
