"""The normalizer's JSON encoders write exactly what ``json.dumps`` writes."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from whileai_datasets.rows.normalize import Encoder

ODD_VALUES: list[Any] = [
    {"order_id": "ORD-1", "amount": 12.5, "ok": True, "none": None},
    ["é", "\u2028", "\ud800", "\x00", 'quote " and \\ slash'],
    {"nested": [{"a": [1, 2, {"b": []}]}, {}], "big": 10**30, "float": 1e16, "neg": -0.0},
    [math.nan, math.inf, -math.inf],
    "just text",
    {1: "int key", 2.5: "float key", True: "bool key", None: "null key"},
    {"object": object},  # not JSON: default=str writes its str
]


@pytest.mark.parametrize("value", ODD_VALUES)
@pytest.mark.parametrize(
    "options",
    [{"separators": (",", ": "), "default": str}, {"default": str}, {"ensure_ascii": False, "default": str}],
)
def test_encoder_writes_what_json_dumps_writes(value: Any, options: dict[str, Any]) -> None:
    assert Encoder(**options).encode(value) == json.dumps(value, **options)


def test_encoder_refuses_a_circular_value_and_keeps_working() -> None:
    encoder = Encoder(ensure_ascii=False)
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference detected"):
        encoder.encode({"a": [loop]})
    shared = [1]
    # the same list twice is not a cycle: nothing is left marked from the failed call
    assert encoder.encode([shared, shared]) == "[[1], [1]]"


TEXTS = ["ORD-1", "é ü 中文", "\u2028", "\ud800", "\x00\x1f", 'quote " and \\ slash', "", "emoji 🎉"]


@pytest.mark.parametrize("value", [{"order_id": t, t: "x"} for t in TEXTS] + [{}, {"a": "b", "c": "d", "e": "f"}])
def test_wire_arguments_writes_an_object_of_texts_as_whileai_does(value: dict[str, str]) -> None:
    from whileai.simulations.export import _wire_arguments as theirs

    from whileai_datasets.rows.normalize import wire_arguments

    assert wire_arguments(value) == theirs(value)
    assert wire_arguments(value) == json.dumps(value, separators=(",", ": "), default=str)


def test_json_column_reuses_a_text_only_for_an_exactly_equal_object() -> None:
    from whileai_datasets.rows.normalize import encode_json_column

    # each neighbour compares equal in Python and encodes differently
    values: list[Any] = [
        {"a": 1}, {"a": True}, {"a": 1.0}, {"a": 1}, {"a": 0.0}, {"a": -0.0}, {1: "x"}, {True: "x"}, {"1": "x"},
        {"a": "x", "b": 2}, {"b": 2, "a": "x"}, {"a": "x", "b": 2}, {"a": "x", "b": 2}, None, {"a": [1]}, {"a": [True]},
        {"n": {"k": 1}}, {"n": {"k": True}}, {"a": math.nan}, {"a": math.nan}, [1], [1], "t", {"a": None}, {"a": None},
    ]
    assert encode_json_column(values) == [None if v is None else json.dumps(v, ensure_ascii=False) for v in values]
