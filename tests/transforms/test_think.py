"""strip_think: RE2 on Arrow against whileai's Python regex, code point by code point."""

from __future__ import annotations

import sys
from typing import Any

import datasets
import pyarrow as pa
import pytest

from whileai_datasets import transforms as wai_transforms
from whileai_datasets.transforms import think

from .conftest import canonical, edge_rows, messages_table, reference, seeded_rows, written


def _theirs(text: str) -> str:
    from whileai.simulations.export import _strip_think

    return str(_strip_think(text))


def _ours(texts: list[Any]) -> list[str]:
    return think.strip_think_text(pa.array(texts, pa.string())).to_pylist()


def _case_variants() -> list[str]:
    """Every code point whose case mapping touches a letter of "think"."""
    letters = set("thinkTHINK")
    out = []
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if 0xD800 <= code < 0xE000:
            continue
        if letters & set(char.lower() + char.upper() + char.casefold()):
            out.append(char)
    return out


def test_every_case_variant_of_the_tag_matches_as_in_python() -> None:
    texts = []
    for position in range(5):
        for char in _case_variants():
            word = "think"[:position] + char + "think"[position + 1 :]
            texts.append(f"a <{word}>x</think> b")
            texts.append(f"a <think>x</{word}> b")
    assert _ours(texts) == [_theirs(t) for t in texts]


def test_whitespace_after_a_block_and_around_the_text_is_pythons_unicode_set() -> None:
    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    lookalikes = ["\u200b", "\ufeff", "\u180e", "\u2060", "x"]
    texts = []
    for char in spaces + lookalikes:
        texts += [f"<think>a</think>{char}{char}b{char}", f"{char}text{char}", f"{char}<THINK>\n</think>{char}"]
    assert _ours(texts) == [_theirs(t) for t in texts]


@pytest.mark.parametrize(
    "text",
    [
        "<think>a\nb</think>\n\n answer",
        "x<THINK>1</think> <think>2</Think>\u00a0y",
        "<think>unclosed",
        "</think>only a close",
        "a<think>b<think>c</think>d</think>e",
        "<think></think>",
        "",
        "   ",
        "😀 <tHiNk>é</ThInK>\u3000ü",
        "<think>a</think><think>b</think>",
        "pre <think>x\r\n</think>\x85\x1fpost  ",
    ],
)
def test_strip_think_text_equals_whileai(text: str) -> None:
    assert _ours([text]) == [_theirs(text)]


def test_messages_after_strip_think_equal_whileai_rows() -> None:
    rows = seeded_rows(0, "sft") + edge_rows()
    table = think.strip_table(canonical(rows))
    theirs = reference(rows, strip_think=True)
    for ours, row in zip(written(wai_transforms.to_openai(table)), theirs):
        assert ours["messages"] == row["messages"]


def test_strip_think_leaves_user_and_tool_messages_alone() -> None:
    messages = [
        {"role": "user", "content": " <think>kept</think> "},
        {"role": "tool", "content": "<think>kept</think>"},
        {"role": "assistant", "content": " <think>gone</think> said "},
    ]
    table = wai_transforms.strip_think(canonical([{"messages": messages}], system=""))
    contents = [m["content"] for m in table.column("messages").to_pylist()[0]]
    assert contents == [" <think>kept</think> ", "<think>kept</think>", "said"]


def test_null_assistant_content_becomes_empty_as_in_whileai() -> None:
    table = messages_table([[{"role": "assistant", "content": None}, {"role": "user", "content": None}], None])
    out = wai_transforms.strip_think(table)
    assert [m["content"] for m in out.column("messages").to_pylist()[0]] == ["", None]
    assert out.column("messages").to_pylist()[1] is None


def test_a_sliced_batch_strips_only_its_own_rows() -> None:
    rows = edge_rows()
    table = canonical(rows)
    whole = think.strip_table(table).column("messages").to_pylist()
    sliced = wai_transforms.strip_think(table.slice(1, 3)).column("messages").to_pylist()
    assert sliced == whole[1:4]


def test_batch_size_one_equals_one_big_batch() -> None:
    ds = datasets.Dataset(canonical(edge_rows())).with_format("arrow")
    one = ds.map(wai_transforms.strip_think, batched=True, batch_size=1)
    big = ds.map(wai_transforms.strip_think, batched=True, batch_size=100)
    assert one.data.column("messages").to_pylist() == big.data.column("messages").to_pylist()


def test_strip_think_is_not_idempotent_on_interleaved_tags_exactly_like_whileai() -> None:
    # whileai's re.sub is a single pass: removing an inner block can form a new one
    text = "<th<think>x</think>ink>y</think>z"
    once = _ours([text])[0]
    assert once == _theirs(text) == "<think>y</think>z"
    assert _ours([once])[0] == _theirs(once) == "z"
