"""Invariants of the transforms on generated conversations (hypothesis),
checked against whileai where whileai defines the answer."""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from whileai_datasets import transforms as wai_transforms
from whileai_datasets.transforms import think

from .conftest import messages_table

ROLES = ("system", "user", "assistant", "tool")
WHITESPACE = " \t\n\r\x0b\x0c\x1c\x85\xa0\u2003\u3000"
TAGS = ("<think>", "</think>", "<THINK>", "</Think>", "<thİnk>", "</thin\u212a>")

# Arrow strings are UTF-8: no lone surrogates
chars = st.characters(blacklist_categories=("Cs",))
plain_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="<>"), max_size=12)
block = st.builds(lambda a, b: f"<think>{a}</think>{b}", plain_text, st.text(alphabet=WHITESPACE, max_size=3))
# think blocks between text that holds no tag characters: the cases where stripping settles in one pass
tidy_text = st.lists(st.one_of(plain_text, block, st.text(alphabet=WHITESPACE, max_size=3)), max_size=6).map("".join)
# anything, tags and their pieces included
wild_text = st.lists(
    st.one_of(st.text(alphabet=chars, max_size=8), st.sampled_from(TAGS), st.text(alphabet=WHITESPACE, max_size=3)),
    max_size=8,
).map("".join)
message = st.builds(lambda role, content: {"role": role, "content": content}, st.sampled_from(ROLES), wild_text)
conversations = st.lists(st.lists(message, max_size=8), min_size=1, max_size=6)


def _assistant_count(conversation: list[dict[str, Any]]) -> int:
    return sum(m["role"] == "assistant" for m in conversation)


@settings(max_examples=150, deadline=None)
@given(conversations)
def test_unroll_yields_one_row_per_assistant_turn(convs: list[list[dict[str, Any]]]) -> None:
    from whileai.simulations.export import _unroll

    table = wai_transforms.loss_mask("assistant")(messages_table(convs))
    out = wai_transforms.unroll(table).to_pylist()
    assert len(out) == sum(max(_assistant_count(c), 1) for c in convs)
    expected = []
    for conv in convs:
        entry = {"messages": conv, "loss_mask": [int(m["role"] == "assistant") for m in conv]}
        expected += [(len(s["messages"]), s["loss_mask"], s.get("unroll")) for s in _unroll(entry, {})]
    assert [(len(r["messages"]), r["loss_mask"], r["unroll"]) for r in out] == expected


@settings(max_examples=150, deadline=None)
@given(conversations, st.sampled_from(["assistant", "final"]))
def test_masks_have_one_entry_per_message_and_equal_whileai(convs: list[list[dict[str, Any]]], mode: str) -> None:
    from whileai.simulations import loss_mask

    masks = wai_transforms.loss_mask(mode)(messages_table(convs)).column("loss_mask").to_pylist()
    assert [len(m) for m in masks] == [len(c) for c in convs]
    assert masks == [loss_mask(c, mode=mode) for c in convs]


@settings(max_examples=300, deadline=None)
@given(st.lists(wild_text, min_size=1, max_size=10))
def test_strip_think_equals_whileai_on_any_text(texts: list[str]) -> None:
    from whileai.simulations.export import _strip_think

    assert think.strip_think_text(pa.array(texts)).to_pylist() == [_strip_think(t) for t in texts]


@settings(max_examples=300, deadline=None)
@given(st.lists(tidy_text, min_size=1, max_size=10))
def test_strip_think_is_idempotent(texts: list[str]) -> None:
    once = think.strip_think_text(pa.array(texts))
    assert think.strip_think_text(once).to_pylist() == once.to_pylist()
    assert not any(re.search("(?i)<think>", t) for t in once.to_pylist())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=chars, max_size=60), min_size=1, max_size=8), st.integers(min_value=0, max_value=50))
def test_truncation_keeps_at_most_max_chars_of_the_original(contents: list[str], max_chars: int) -> None:
    from whileai.simulations.export import _convert_messages

    table = messages_table([[{"role": "tool", "content": c} for c in contents]])
    out = wai_transforms.truncate_tool_output(max_chars)(table).to_pylist()[0]
    theirs = _convert_messages(
        [{"role": "tool", "content": c} for c in contents],
        system="",
        strip_think=False,
        max_tool_output_chars=max_chars,
    )
    for original, message, their in zip(contents, out["messages"], theirs):
        new = message["content"]
        assert new == their["content"]
        if len(original) <= max_chars:
            assert new == original
        else:
            marker = f"\n[... {len(original) - max_chars} chars of tool output truncated]"
            assert new == original[:max_chars] + marker  # never more than max_chars of the original
    cut = [len(c) - max_chars for c in contents if len(c) > max_chars]
    assert out["tool_output_truncated"] == (len(cut) or None)
    assert out["tool_output_chars_cut"] == (sum(cut) if cut else None)


def test_the_marker_can_lengthen_a_message_barely_over_the_limit_as_in_whileai() -> None:
    from whileai.simulations.export import _convert_messages

    table = messages_table([[{"role": "tool", "content": "x" * 11}]])
    ours = wai_transforms.truncate_tool_output(10)(table).to_pylist()[0]["messages"][0]["content"]
    [theirs] = _convert_messages(
        [{"role": "tool", "content": "x" * 11}], system="", strip_think=False, max_tool_output_chars=10
    )
    assert ours == theirs["content"] and len(ours) > 11
