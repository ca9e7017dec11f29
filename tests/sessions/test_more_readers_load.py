"""The rows the OpenHands, Cline, Droid and pi/OpenClaw readers yield are rows the package takes: written as
``messages`` JSONL they load through ``load_dataset("whileai/export")`` and come back to the template exactly as
read (content parts, reasoning, calls; the builder writes a call's JSON text its own way and reads ``weight``
into the loss mask)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import template_rows, write_jsonl
from tests.support.session_readers import FIXTURES, read
from whileai_datasets.sessions import cline, droid, openhands, pi

READERS = {"openhands": openhands, "cline": cline, "cline_xml": cline, "droid": droid, "pi": pi, "openclaw": pi}


def test_session_rows_load_through_the_builder_and_round_trip(tmp_path: Path, load: Callable[..., Any]) -> None:
    rows = [row for name, path in FIXTURES.items() for row in read(READERS[name], path)]
    path = write_jsonl(tmp_path / "sessions.jsonl", ({"messages": row["messages"], "tools": row["tools"]}
                                                      for row in rows))
    ds = load(path)
    assert len(ds) == len(rows) == 11
    loaded = template_rows(ds)
    assert [_parsed(row["messages"]) for row in loaded] == [_parsed(row["messages"]) for row in rows]
    assert [row["tools"] for row in loaded] == [row["tools"] for row in rows]
    for row, mask in zip(rows, ds["loss_mask"]):
        assert mask == [int(msg["role"] == "assistant" and msg.get("weight", 1) != 0) for msg in row["messages"]]


def _parsed(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with each call's arguments parsed, and no ``weight`` (the builder reads it into the loss mask)."""
    messages = [{key: value for key, value in msg.items() if key != "weight"} for msg in messages]
    return [{**msg, "tool_calls": [{**call, "function": {**call["function"],
                                                          "arguments": json.loads(call["function"]["arguments"])}}
                                   for call in msg["tool_calls"]]} if "tool_calls" in msg else msg
            for msg in messages]
