"""``show-mask`` previews the real pipeline: the export's options and defaults, the cut, the worst rows, notes.

Rows are written by each test; the tokenizer is trained on their words (tests/support/tiny_lm.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_jsonl
from tests.support.tiny_lm import train_tokenizer, trl_template
from whileai_datasets import audit, cli
from whileai_datasets.tokenize.views import CUT_MARK

CHATML = (
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{% generation %}{{ m.content }}<|im_end|>{% endgeneration %}\n"
    "{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)
NO_SYSTEM = (
    "{%- for m in messages %}{%- if m.role != 'system' %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
    "{%- endif %}{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)
WORDS = ["hello there how are you", "fine thanks", "the order is late", "refund it please", "pondering deeply",
         "You are a careful support agent", "what is two plus two", "four", "a long answer " * 8]


def _talk(*turns: tuple[str, str]) -> dict[str, Any]:
    return {"messages": [{"role": role, "content": text} for role, text in turns]}


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("show-mask") / "tok"
    train_tokenizer(WORDS * 20, chat_template=trl_template("qwen2_5"), vocab_size=400).save_pretrained(str(folder))
    return folder


def _show(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["show-mask", *args, "--no-color"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _template(tmp_path: Path, text: str) -> str:
    path = tmp_path / "t.jinja"
    path.write_text(text)
    return str(path)


def test_think_blocks_are_kept_as_load_and_tokenize_keep_them_unless_stripped(
    tmp_path: Path, tokenizer_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = write_jsonl(tmp_path / "r.jsonl", [_talk(("user", "what is two plus two"),
                                                    ("assistant", "<think>pondering deeply</think>four"))])
    template = _template(tmp_path, CHATML)
    code, out, _ = _show(capsys, str(rows), "--tokenizer", str(tokenizer_dir), "--template", template)
    # CHATML's generation prompt ends at "assistant" ("{%-" strips the newline after it), so the model writes
    # the newline that opens its turn: it trains, though the template's generation block starts after it
    assert code == 0 and "[[\n<think>pondering deeply</think>four<|im_end|>]]" in out
    assert "note: 1 turn(s) with <think> blocks kept and trained, as load_dataset + tokenize keep them" in out
    code, out, _ = _show(capsys, str(rows), "--tokenizer", str(tokenizer_dir), "--template", template, "--strip-think")
    assert code == 0 and "pondering deeply" not in out and "[[\nfour<|im_end|>]]" in out
    assert "note: 1 <think> block(s) stripped (--strip-think), as export does" in out
    # export's flag, the default here, is still taken
    code, out, _ = _show(capsys, str(rows), "--tokenizer", str(tokenizer_dir), "--template", template, "--keep-think")
    assert code == 0 and "pondering deeply" in out


def test_max_length_draws_the_cut_and_counts_what_it_drops(
    tmp_path: Path, tokenizer_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = write_jsonl(tmp_path / "r.jsonl", [_talk(("user", "hello there how are you"),
                                                    ("assistant", "a long answer " * 8))])
    args = [str(rows), "--tokenizer", str(tokenizer_dir), "--template", _template(tmp_path, CHATML)]
    _, whole, _ = _show(capsys, *args, "--json")
    total = json.loads(whole)[0]["tokens"]
    code, out, _ = _show(capsys, *args, "--max-length", "12")
    assert code == 0 and CUT_MARK in out
    assert "12 tokens" in out and f"max_length cut {total - 12} tokens" in out


def test_rows_and_worst_pick_rows_by_their_number_in_the_source(
    tmp_path: Path, tokenizer_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    talks = [_talk(("user", "hello there how are you " * (1 + i)), ("assistant", "fine thanks")) for i in range(5)]
    rows = write_jsonl(tmp_path / "r.jsonl", talks)
    args = [str(rows), "--tokenizer", str(tokenizer_dir), "--template", _template(tmp_path, CHATML)]
    code, out, _ = _show(capsys, *args, "--row", "1", "--rows", "3")
    assert code == 0 and [line for line in out.splitlines() if line.startswith("== ")] == \
        ["== row 1", "== row 2", "== row 3"]
    code, out, _ = _show(capsys, *args, "--worst", "--rows", "2", "--json")
    least = audit(str(rows), tokenizer=_tokenizer(tokenizer_dir), template=args[4]).worst["least_supervised"]
    least_rows = least.rows[:2].tolist()
    assert code == 0 and [entry["row"] for entry in json.loads(out)] == least_rows == [4, 3]


def _tokenizer(folder: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def test_notes_say_what_the_template_drops_or_adds(
    tmp_path: Path, tokenizer_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = write_jsonl(tmp_path / "r.jsonl", [_talk(("user", "hello there"), ("assistant", "fine thanks"))])
    code, out, _ = _show(capsys, str(rows), "--tokenizer", str(tokenizer_dir), "--system-prompt", "Be brief.",
                         "--template", _template(tmp_path, NO_SYSTEM))
    assert code == 0 and "note: the template leaves the system message out of the render" in out
    code, out, _ = _show(capsys, str(rows), "--tokenizer", str(tokenizer_dir))  # Qwen2.5's own template
    assert code == 0 and "note: the template adds its own default system prompt: 'You are Qwen" in out


def test_unroll_shows_each_sample_of_the_row(tmp_path: Path, tokenizer_dir: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    rows = write_jsonl(tmp_path / "r.jsonl", [_talk(("user", "hello there"), ("assistant", "fine thanks"),
                                                    ("user", "the order is late"), ("assistant", "refund it please"))])
    code, out, _ = _show(capsys, str(rows), "--tokenizer", str(tokenizer_dir), "--unroll",
                         "--template", _template(tmp_path, CHATML))
    assert code == 0
    assert [line for line in out.splitlines() if line.startswith("== ")] == \
        ["== row 0, sample 1 of 2", "== row 0, sample 2 of 2"]


def test_a_row_past_the_end_is_named_with_the_range(tmp_path: Path, tokenizer_dir: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    rows = write_jsonl(tmp_path / "r.jsonl", [_talk(("user", "hello there"), ("assistant", "fine thanks"))])
    code, _, err = _show(capsys, str(rows), "--tokenizer", str(tokenizer_dir), "--row", "5")
    assert code == 1 and "row 5 is out of range: the source has 1 rows" in err and "Ask for rows 0 to 0." in err
