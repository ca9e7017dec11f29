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
