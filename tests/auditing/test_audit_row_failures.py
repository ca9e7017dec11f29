"""Rows a template cannot render are findings counted by cause, never the end of an audit or of a skipping
``tokenize``; a raising ``tokenize`` says how many rows of the batch fail and why.

The templates are the shipped ones (``templates/``): Gemma 3 refuses a tool turn ("roles must
alternate"), Llama 3.1 refuses parallel tool calls, Qwen2.5 concatenates content strings. The tokenizer is
trained here on the rows (tests/support/tiny_lm.py).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_jsonl
from tests.support.tiny_lm import train_tokenizer
from whileai_datasets import ChatTemplate, TemplateError, audit, cli
from whileai_datasets.tokenize import mask_report
from whileai_datasets.tokenize.notices import BadMaskRowsWarning
from whileai_datasets.tokenize.row_failures import cause_of
from whileai_datasets.tokenize.token_masks import tokenize


def _call(i: int, name: str = "lookup") -> dict[str, Any]:
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps({"n": i})}}


def _rows() -> list[dict[str, Any]]:
    """Rows 1 and 4 hold a tool turn, row 4 two parallel calls; the others are plain talk."""
    rows = [{"messages": [{"role": "user", "content": f"question {i}"},
                          {"role": "assistant", "content": f"answer {i}"}]} for i in range(6)]
    for i, calls in ((1, [_call(1)]), (4, [_call(4), _call(5, "fetch")])):
        rows[i]["messages"][1:1] = [{"role": "assistant", "content": "", "tool_calls": calls},
                                    *({"role": "tool", "tool_call_id": c["id"], "content": "42"} for c in calls)]
    return rows


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("rows") / "rows.jsonl", _rows())


def _tokenizer(name: str) -> Any:
    return train_tokenizer([json.dumps(r) for r in _rows()] * 5, chat_template=ChatTemplate.shipped(name).text,
                           vocab_size=400)


@pytest.fixture(scope="module")
def gemma() -> Any:
    return _tokenizer("gemma3")


@pytest.mark.parametrize(("text", "cause"), [
    ("the template failed to render: TemplateError: Conversation roles must alternate user/assistant/user/...",
     "roles_must_alternate"),
    ("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...",
     "roles_must_alternate"),
    ("This model only supports single tool-calls at once!", "single_tool_call_only"),
    ("Tool call IDs should be alphanumeric strings with length 9!", "tool_call_id_format"),
    ('the template failed to render: TypeError: can only concatenate str (not "list") to str', "content_type"),
    ("Invalid content type", "content_type"),
    ("Cannot pass both content and thinking in an assistant message with tool calls!", "template_error"),
])
def test_a_templates_own_words_read_as_one_named_cause(text: str, cause: str) -> None:
    assert cause_of(TemplateError(text, location="t.jinja:3")) == cause


def test_tokenize_raising_says_how_many_rows_fail_and_why_and_skipping_trains_the_others(gemma: Any, load: Any,
                                                                                          source: Path) -> None:
    ds = load(source)
    with pytest.raises(TemplateError, match=r"^TokenizersBackend:\d+: row 1: .*Conversation roles must alternate.*; "
                                            r"2 of 6 rows of this batch fail: 2 roles-must-alternate \(rows 1, 4\)\. "
                                            r".*on_bad_row='skip' the other rows train"):
        ds.map(tokenize(gemma), batched=True, with_indices=True)
    with pytest.warns(BadMaskRowsWarning, match=r"dropped 2 of 6 rows .*: 2 roles-must-alternate \(first: row 1: "):
        trained = ds.map(tokenize(gemma, on_bad_row="skip"), batched=True, with_indices=True)
    assert trained["messages"] == [ds[i]["messages"] for i in (0, 2, 3, 5)]
    found = audit(str(source), tokenizer=gemma)  # on_bad_row="raise", and the audit still goes to the end
    assert found.supervised_tokens == mask_report(trained, ds.num_rows)["supervised_tokens"] > 0
    data = found.to_dict()
    alternate = data["findings"]["roles_must_alternate"]
    assert (alternate["rows"], data["findings"]["bad_rows"]["rows"]) == (2, 2)
    assert [(e["row"], e["line"]) for e in alternate["first"]] == [(1, 2), (4, 5)]
    assert "Conversation roles must alternate" in alternate["first_error"]
    assert data["findings"]["zero_loss"]["rows"] == 2 and data["trainers"]["trl"]["exact"] is True
    assert found.format().startswith("2 of 6 training rows fail the template (2 roles-must-alternate): tokenize "
                                     "with on_bad_row='skip' trains the other rows")


def test_each_cause_is_counted_apart_and_fail_on_takes_its_name(source: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    llama = _tokenizer("llama3_1")
    found = audit(str(source), tokenizer=llama)
    assert found.findings["single_tool_call_only"].first == [4]
    assert "only supports single tool-calls" in (found.findings["single_tool_call_only"].first_error or "")
    assert found.count("bad_rows") == found.count("single_tool_call_only") == 1
    llama.save_pretrained(tmp_path / "tok")
    base = ["audit", str(source), "--tokenizer", str(tmp_path / "tok")]
    assert cli.main([*base, "--fail-on", "single-tool-call-only"]) == 3
    out, err = capsys.readouterr()
    assert "--on-bad-row skip trains the other rows" in out and "single-tool-call-only (1 rows)" in err
    assert cli.main([*base, "--on-bad-row", "skip", "--fail-on", "roles-must-alternate"]) == 0
    capsys.readouterr()
    with pytest.warns(FutureWarning, match=r"--skip-bad-rows is deprecated .*use --on-bad-row skip"):
        assert cli.main([*base, "--skip-bad-rows", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["options"]["on_bad_row"] == "skip"


def test_when_every_row_fails_the_audit_says_so_first_and_no_trainer_is_exact(gemma: Any, tmp_path: Path) -> None:
    rows = [r for i, r in enumerate(_rows()) if i in (1, 4)]
    found = audit(write_jsonl(tmp_path / "tools.jsonl", rows), tokenizer=gemma, on_bad_row="skip")
    data = found.to_dict()
    assert data["tokens"]["supervised"] == 0 and data["findings"]["zero_loss"]["rows"] == 2
    assert "zero_loss" in data["problems"] and "roles_must_alternate" in data["problems"]
    assert not any(entry["exact"] for entry in data["trainers"].values())
    assert found.format().splitlines()[0] == ("NOTHING TRAINS: none of the 2 training rows has a supervised token "
                                              "(2 roles-must-alternate); every row is zero-loss")


def test_content_parts_under_plain_formatting_train_whichever_rows_the_template_keeps(load: Any,
                                                                                     tmp_path: Path) -> None:
    """Decoded, a messages column mixing text and parts cannot be written back by datasets (ArrowInvalid
    once a template kept both kinds): tokenize hands such batches over as Arrow."""
    rows = [{"messages": [{"role": "user", "content": f"question {i}"},
                          {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}] if i % 2
                           else f"answer {i}"}]} for i in range(6)]
    source = write_jsonl(tmp_path / "parts.jsonl", rows)
    ds = load(source)
    # Gemma 3 renders text parts (it keeps both kinds); Qwen2.5 concatenates content: its parts rows are
    # handed to it joined into one string (``chat_template.masks.text_parts``), and every row trains either way
    for name, joined in (("gemma3", 0), ("qwen2_5", 3)):
        tok = _tokenizer(name)
        trained = ds.map(tokenize(tok, on_bad_row="skip"), batched=True)
        found = audit(ds, tokenizer=tok)
        assert trained.num_rows == 6 and trained["messages"] == ds["messages"]
        assert found.supervised_tokens == sum(map(sum, trained["assistant_masks"]))
        assert (found.count("bad_rows"), found.count("text_parts_joined")) == (0, joined)


def test_check_max_length_reads_the_limit_the_rows_were_tokenized_with(gemma: Any, load: Any, source: Path) -> None:
    from whileai_datasets import TrainerCutWarning, check_max_length

    ds = load(source)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BadMaskRowsWarning)
        longest = max(ds.map(tokenize(gemma, on_bad_row="skip"), batched=True)["num_tokens"])
        tokenized = ds.map(tokenize(gemma, max_length=longest - 1, on_bad_row="skip"), batched=True)
    assert check_max_length(tokenized, longest - 1) == {
        "trainer_max_length": longest - 1, "tokenized_max_length": longest - 1, "longest": longest - 1, "rows": 4,
        "rows_cut": 0, "supervised_tokens": sum(tokenized["num_supervised_tokens"]), "supervised_tokens_cut": 0}
    shorter = longest - 4
    with pytest.warns(TrainerCutWarning, match=rf"max_length={shorter} cuts \d of 4 tokenized rows .* pass SFTConfig"
                                               rf"\(max_length={longest - 1}\), the max_length the rows were "):
        found = check_max_length(tokenized, shorter)
    assert found["supervised_tokens_cut"] == sum(sum(mask[shorter:]) for mask in tokenized["assistant_masks"]) > 0
    with pytest.raises(TypeError, match=r"expected a max_length \(int or None\), an SFTConfig or an SFTTrainer, "
                                        r"got str"):
        check_max_length(tokenized, "1024")
    # no row cut, yet the limit is known: tokenize records it in every row, in both formats it hands back
    roomy = longest + 50
    for fmt in (None, "arrow"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BadMaskRowsWarning)
            fits = ds.with_format(fmt).map(tokenize(gemma, max_length=roomy, on_bad_row="skip"), batched=True)
            unlimited = ds.with_format(fmt).map(tokenize(gemma, on_bad_row="skip"), batched=True)
        assert set(fits.with_format(None)["tokenized_max_length"]) == {roomy}
        assert check_max_length(fits, roomy)["tokenized_max_length"] == roomy
        assert check_max_length(unlimited, None)["tokenized_max_length"] is None


def test_a_syntax_error_is_named_once() -> None:
    broken = ChatTemplate("{% for m in messages %}{{ m.content }}")
    with pytest.raises(TemplateError, match=r"^<template>:1: syntax error: Unexpected end of template\. "):
        broken.with_generation()
    assert broken.inspect().syntax_error.startswith("Unexpected end of template")  # type: ignore[union-attr]


def test_the_audit_and_mask_report_say_one_naive_ratio(load: Any, tmp_path: Path) -> None:
    rows = [r for i, r in enumerate(_rows()) if i != 4] + [{"messages": [{"role": "user", "content": "anyone?"}]}]
    source = write_jsonl(tmp_path / "rows.jsonl", rows)  # the last row trains nothing: tokenize drops it
    tok = _tokenizer("qwen2_5")
    ds = load(source)
    trained = ds.map(tokenize(tok), batched=True)
    found = audit(ds, tokenizer=tok)
    assert trained.num_rows == 5 and found.count("zero_loss") == 1
    assert found.naive_ratio == mask_report(trained)["naive_over_masked"] > 1
    assert found.tokens > mask_report(trained)["tokens"]  # the audit's token total still counts every row
