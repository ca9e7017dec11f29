"""Parallel calls serialized for a template that takes one call per turn: each call followed by its own result."""

from __future__ import annotations

import json
from typing import Any

import pytest

from whileai_datasets import ChatTemplate
from whileai_datasets.chat_template.masks.parallel_calls import serialize_parallel_calls
from whileai_datasets.errors import TemplateError


def _call(id_: str | None, name: str, **arguments: Any) -> dict[str, Any]:
    call = {"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return call if id_ is None else {"id": id_, **call}


def _result(id_: str | None, text: str) -> dict[str, Any]:
    return {"role": "tool", "content": text, **({} if id_ is None else {"tool_call_id": id_})}


def _row(ids: tuple[str | None, str | None], answers: tuple[str | None, ...]) -> list[dict[str, Any]]:
    """Two calls (reading a.py and b.py, with ``ids``), results answering ``answers`` (the answer to a.py says
    "text of a"; results with no id answer in order), and a closing answer."""
    files = {ids[0]: "a", ids[1]: "b"} if None not in ids else {}
    return [{"role": "user", "content": "read both files"},
            {"role": "assistant", "content": "Reading both.", "reasoning_content": "two reads at once",
             "tool_calls": [_call(ids[0], "read", path="a.py"), _call(ids[1], "read", path="b.py")]},
            *[_result(answer, f"text of {files.get(answer, 'ab'[n])}") for n, answer in enumerate(answers)],
            {"role": "assistant", "content": "Both read."}]


def test_each_call_is_followed_by_its_own_result_matched_by_id_whatever_the_results_order() -> None:
    messages = _row(("c1", "c2"), ("c2", "c1"))  # the results come back in the other order
    out, mask, origin, turns = serialize_parallel_calls(messages, [0, 1, 0, 0, 1])
    assert turns == 1
    assert [(m["role"], [c["id"] for c in m.get("tool_calls", [])], m.get("tool_call_id")) for m in out] == [
        ("user", [], None), ("assistant", ["c1"], None), ("tool", [], "c1"), ("assistant", ["c2"], None),
        ("tool", [], "c2"), ("assistant", [], None)]
    assert out[2]["content"] == "text of a" and out[4]["content"] == "text of b"
    # the text and reasoning beside the calls are said once, on the first; each call turn carries the turn's loss
    assert out[1]["content"] == "Reading both." and out[1]["reasoning_content"] == "two reads at once"
    assert out[3]["content"] == "" and "reasoning_content" not in out[3]
    assert mask == [0, 1, 0, 1, 0, 1] and origin == [0, 1, 3, 1, 2, 4]
    assert messages[1]["tool_calls"][1]["id"] == "c2" and len(messages) == 5  # the row given is not changed


def test_results_without_ids_answer_the_calls_in_order() -> None:
    out, mask, _, turns = serialize_parallel_calls(_row((None, None), (None, None)), [0, 1, 0, 0, 1])
    assert turns == 1 and [m["role"] for m in out] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [json.loads(out[i]["tool_calls"][0]["function"]["arguments"])["path"] for i in (1, 3)] == ["a.py", "b.py"]
    assert mask == [0, 1, 0, 1, 0, 1]


def test_calls_and_results_that_do_not_pair_one_to_one_are_left_as_they_are() -> None:
    for ids, answers in ((("c1", "c2"), ("c1",)),  # a call never answered
                         (("c1", "c1"), ("c1", "c1")),  # two calls with one id
                         (("c1", "c2"), ("c1", "c3")),  # a result no call asked for
                         (("c1", "c2"), ("c1", None))):  # one result with an id, one without
        messages = _row(ids, answers)
        mask = [0, 1, *[0] * len(answers), 1]
        assert serialize_parallel_calls(messages, mask) == (messages, mask, list(range(len(messages))), 0)


def test_the_serialized_row_is_what_llama_3_1_renders_and_the_whole_row_is_not() -> None:
    chat = ChatTemplate.shipped("llama3_1")
    messages = _row(("c1", "c2"), ("c2", "c1"))
    messages[1]["content"] = ""
    out, _, _, _ = serialize_parallel_calls(messages, [0, 1, 0, 0, 1])
    text = chat.render(out).text
    first, second = text.index("a.py"), text.index("b.py")
    assert first < text.index("text of a") < second < text.index("text of b")
    with pytest.raises(TemplateError, match="only supports single tool-calls"):  # the template's own refusal
        chat.render(messages)
