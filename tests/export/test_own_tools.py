"""A row's own ``tools`` (a list, or JSON text of one, as trainers' tool-call demos write them) are kept on
every path: ``load_dataset``, ``export_dataset`` (every source and format, unrolled too), the CLI
``export``, ``audit`` and ``show-mask``; a ``tools=`` option replaces them on every path alike.

tests/data/tools_as_text.jsonl: three rows, tools as JSON text per row (one tool, two tools, ``"[]"``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import read_jsonl
from tests.support.tiny_lm import train_tokenizer, trl_template
from whileai_datasets import audit, cli, export_dataset, mask_report
from whileai_datasets.tokenize import tokenize

DATA = Path(__file__).parent.parent / "data" / "tools_as_text.jsonl"
#: each row's own tools as read from the file (the third row's "[]" is no tools)
OWN = [json.loads(row["tools"]) or None for row in read_jsonl(DATA)]
OPTION = [{"type": "function", "function": {"name": "refund", "description": "Refund an order",
                                            "parameters": {"type": "object", "properties": {}}}}]
#: a template that never renders tool schemas
CHATML = (
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return train_tokenizer([DATA.read_text()] * 5, chat_template=trl_template("qwen2_5"), vocab_size=500)


@pytest.mark.parametrize("fmt", ["openai", "trl", "fireworks"])
@pytest.mark.parametrize("unroll", [False, True])
def test_export_of_a_path_keeps_each_rows_own_tools(tmp_path: Path, fmt: str, unroll: bool) -> None:
    report = export_dataset(str(DATA), str(tmp_path / "out.jsonl"), format=fmt, unroll=unroll)
    written = read_jsonl(tmp_path / "out.jsonl")
    per_row = [2, 2, 1] if unroll else [1, 1, 1]  # samples per source row (one per assistant turn unrolled)
    expected = [tools for tools, n in zip(OWN, per_row) for _ in range(n)]
    assert [row.get("tools") for row in written] == expected
    assert report["with_tools"] == sum(tools is not None for tools in expected)


def test_export_of_rows_in_memory_and_of_a_loaded_dataset_keeps_them(tmp_path: Path, load: Any) -> None:
    export_dataset(read_jsonl(DATA), str(tmp_path / "rows.jsonl"))
    export_dataset(load(DATA), str(tmp_path / "ds.parquet"))
    assert [row.get("tools") for row in read_jsonl(tmp_path / "rows.jsonl")] == OWN
    import datasets

    assert datasets.Dataset.from_parquet(str(tmp_path / "ds.parquet"))["tools"] == OWN


def test_the_tools_option_replaces_them_on_every_row(tmp_path: Path) -> None:
    report = export_dataset(str(DATA), str(tmp_path / "out.jsonl"), tools=OPTION)
    assert [row["tools"] for row in read_jsonl(tmp_path / "out.jsonl")] == [OPTION] * 3
    assert report["with_tools"] == 3


def test_the_cli_export_keeps_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["export", str(DATA), str(tmp_path / "out.jsonl")]) == 0
    assert "with_tools" in capsys.readouterr().out
    assert [row.get("tools") for row in read_jsonl(tmp_path / "out.jsonl")] == OWN


def test_the_audit_counts_the_tokens_their_schemas_take_as_tokenize_does(tokenizer: Any, load: Any) -> None:
    found = audit(str(DATA), tokenizer=tokenizer)
    canonical = load(DATA)
    report = mask_report(canonical.map(tokenize(tokenizer), batched=True, remove_columns=canonical.column_names))
    assert (found.tokens, found.supervised_tokens) == (report["tokens"], report["supervised_tokens"])
    bare = [{k: v for k, v in row.items() if k != "tools"} for row in read_jsonl(DATA)]
    without = audit(bare, tokenizer=tokenizer)  # what the audit counted before: no schemas
    schema_tokens = len(tokenizer(json.dumps(OWN[1][1]))["input_ids"])
    assert found.tokens - without.tokens > schema_tokens  # row 1's second schema alone is more than that


def test_a_template_that_drops_tool_schemas_is_found_on_the_rows_that_have_them(tmp_path: Path) -> None:
    tok = train_tokenizer([DATA.read_text()] * 5, chat_template=CHATML, vocab_size=400)
    found = audit(str(DATA), tokenizer=tok)
    drops = found.findings["template_drops_tools"]
    assert (drops.rows, list(drops.first)) == (2, [0, 1])


def test_show_mask_renders_them(tokenizer: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "tok"
    tokenizer.save_pretrained(str(folder))
    code = cli.main(["show-mask", str(DATA), "--tokenizer", str(folder), "--rows", "2", "--no-color"])
    out = capsys.readouterr().out
    assert code == 0 and "Current weather for a city" in out and "Status of an order by id" in out
