"""Factories for the transform and export tests.

Rows come from whileai itself: its seeded agent (offline, deterministic) in
sft and rl modes, graded by a rule so rewards and GRPO groups exist, plus
hand-made rows for what the seeded agent never writes (think blocks, unicode,
odd arguments, multi-turn conversations with user steps, privileged blocks).
whileai's own functions are the oracle; nothing here is expected output.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SYSTEM_PROMPT as SYSTEM
from tests.conftest import TOOLS


def roundtrip(value: Any) -> Any:
    """``value`` as it reads back from whileai's JSONL writer."""
    return json.loads(json.dumps(value, default=str))


@functools.lru_cache(maxsize=None)
def _simulated(seed: int, mode: str, repeats: int, budget: int) -> str:
    import whileai as wai

    agent = wai.seeded_agent(TOOLS, seed=seed)
    data = wai.simulate(
        agent, tools=TOOLS, simulator=False, seed=seed, mode=mode, repeats=repeats, budget=budget, on_progress=None
    )
    rows = data.trajectories
    for i, row in enumerate(rows):
        # a deterministic grade, partial credit included, so groups have spread
        row["reward"] = [1.0, 0.0, 0.5, 0.75, 0.1, None][(i * 7 + seed) % 6]
    return json.dumps(rows, default=str)


def seeded_rows(seed: int = 0, mode: str = "sft", repeats: int = 1, budget: int = 24) -> list[dict[str, Any]]:
    """Rows from whileai's seeded agent, as its JSONL writer round-trips them."""
    return json.loads(_simulated(seed, mode, repeats, budget))


def _call(name: str, arguments: Any, call_id: str | None = None, wrapped: bool = False) -> dict[str, Any]:
    if wrapped:
        return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    call: dict[str, Any] = {"name": name, "arguments": arguments}
    if call_id:
        call["id"] = call_id
    return call


def edge_rows() -> list[dict[str, Any]]:
    """Hand-made rows for the cases the seeded agent never writes."""
    user = {"role": "user", "content": "Where is my order ORD-1?"}
    rows: list[dict[str, Any]] = [
        {  # think blocks: mixed case, across lines, several per turn, whitespace after
            "prompt": "Where is my order ORD-1?",
            "scenario_id": "grp-a",
            "rollout_index": 0,
            "reward": 1.0,
            "lineage": {"system_prompt_sha": "abc"},
            "messages": [
                user,
                {
                    "role": "assistant",
                    "content": "<THINK>plan\nthe call</Think>\n\n  ",
                    "tool_calls": [_call("lookup_order", {"order_id": "ORD-1"})],
                },
                {"role": "tool", "name": "lookup_order", "content": json.dumps({"status": "ok", "eta": "2 days"})},
                {
                    "role": "assistant",
                    "content": "<think>a</think>\u00a0<tHiNk>b\r\n</THINK>\u2003It ships in 2 days.  ",
                },
                {"role": "user", "content": "Thanks! And a refund on PAY-9?"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [_call("refund_payment", '{"payment_id": "PAY-9", "amount": 5}')],
                },
                {"role": "tool", "content": "refunded"},
                {"role": "assistant", "content": "Done <think>unclosed"},
            ],
        },
        {  # unicode: dotted/dotless I and the Kelvin sign in tags, Python-only whitespace
            "prompt": "Ünïcödé ask \u3000 with spaces",
            "scenario_id": "grp-a",
            "rollout_index": 1,
            "reward": 0.0,
            "lineage": {},
            "finish_reason": "length",
            "messages": [
                {"role": "user", "content": "ça va? 😀"},
                {
                    "role": "assistant",
                    "content": "\x1c<thİnk>secret</thınk>\x1f\u0085visible \u212a <thin\u212a>k</think>",
                },
                {"role": "assistant", "content": "\u2028 <think>x</think>\u000b\u000bpost\t\u200b"},
            ],
        },
        {  # arguments: dict, JSON string, doubly encoded, unparseable, odd types; ids and links
            "prompt": "Arguments zoo",
            "scenario_id": "grp-a",
            "rollout_index": 2,
            "reward": 0.5,
            "messages": [
                {"role": "tool", "content": "a tool message before any call"},
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        _call("lookup_order", {"order_id": "A", "n": 1.5, "ok": True, "none": None}),
                        _call("lookup_order", json.dumps({"b": 1, "a": [1, 2]})),
                        _call("lookup_order", json.dumps(json.dumps({"order_id": "B"}))),
                        _call("lookup_order", "order C please"),
                        _call("lookup_order", '{"a":1}', call_id="given-id", wrapped=True),
                        _call("lookup_order", [1, 2]),
                        _call("lookup_order", None),
                        _call("lookup_order", 7),
                        _call("lookup_order", '"just text"'),
                        _call("lookup_order", '{"x": "line\\nbreak", "q": "\\"quoted\\""}'),
                    ],
                },
                {"role": "tool", "name": "lookup_order", "content": "r1"},
                {"role": "tool", "content": "r2", "tool_call_id": "explicit"},
                {"role": "tool", "content": ""},
                {"role": "tool", "content": None},
                {"role": "assistant", "content": 'Quotes " backslash \\ nul \x00 bell \x07 tab\t done'},
            ],
        },
        {
            "prompt": "No agent turn",
            "scenario_id": "",
            "reward": None,
            "messages": [{"role": "user", "content": "hello?"}],
        },
        {
            "prompt": "No agent turn",
            "rollout_index": 3,
            "reward": 0.9,
            "messages": [{"role": "user", "content": "again?"}],
        },
        {  # long tool output (code points, not bytes) for truncation
            "prompt": "Long output",
            "scenario_id": "grp-b",
            "rollout_index": 0,
            "reward": 0.3,
            "lineage": {"unrolled_from": {"old": True}, "k": 1},
            "messages": [
                {"role": "user", "content": "dump it"},
                {"role": "assistant", "content": "", "tool_calls": [_call("lookup_order", {"order_id": "L"})]},
                {"role": "tool", "name": "lookup_order", "content": "é" * 150 + "😀" * 80 + "x" * 30},
                {"role": "assistant", "content": "<think>long</think>Summarized."},
            ],
        },
        {
            "prompt": "Long output",
            "scenario_id": "grp-b",
            "rollout_index": 1,
            "reward": 0.7,
            "lineage": ["not", "an", "object"][:0] or {"note": 'says "unrolled_from" in text'},
            "messages": [
                {"role": "user", "content": "dump it"},
                {"role": "assistant", "content": "", "tool_calls": [_call("lookup_order", {"order_id": "L"})]},
                {"role": "tool", "name": "lookup_order", "content": "z" * 41},
                {"role": "assistant", "content": "Short."},
            ],
        },
        {  # an engine row: prompt + steps with user and text steps; privileged that leaks
            "prompt": "Refund PAY-1 please",
            "scenario_id": "grp-c",
            "rollout_index": 0,
            "reward": 0.2,
            "privileged": {"reference": "The hidden refund code is ZETA-42-OMEGA", "principle": "short"},
            "steps": [
                {
                    "text": "<think>check first</think>Checking.",
                    "tool": "lookup_order",
                    "arguments": {"order_id": "PAY-1"},
                    "result": {"status": "ok"},
                },
                {"user": "hurry up"},
                {"text": "On it.", "tool": "refund_payment", "arguments": '{"payment_id": "PAY-1"}', "result": "done"},
            ],
            "final_text": "Refunded. The hidden refund code is ZETA-42-OMEGA.",
        },
        {  # privileged that does not leak
            "prompt": "Refund PAY-1 please",
            "scenario_id": "grp-c",
            "rollout_index": 1,
            "reward": 0.9,
            "privileged": {"hidden_state": {"ledger": ["balance is exactly 1234.56 EUR", "x"]}},
            "steps": [{"tool": "refund_payment", "arguments": {"payment_id": "PAY-1"}, "result": {"status": "ok"}}],
            "final_text": "Refunded.",
        },
    ]
    return [json.loads(json.dumps(row)) for row in rows]


def all_rows() -> list[dict[str, Any]]:
    """Seeded sft and rl rows (with repeats, so groups exist) and the edge rows."""
    return seeded_rows(0, "sft") + seeded_rows(1, "rl", repeats=3, budget=12) + edge_rows()


#: The warnings of rows that train nothing (or open with two system messages): the parity modules export
#: fixtures that hold such rows on purpose; tests/export/test_nothing_to_train.py checks the warnings themselves.
QUIET_LOSS_WARNINGS = [
    pytest.mark.filterwarnings("ignore::whileai_datasets.errors.NothingToTrainWarning"),
    pytest.mark.filterwarnings("ignore::whileai_datasets.errors.DuplicateSystemWarning"),
]


def with_rows_without_loss(report: dict[str, Any], rows: list[Any]) -> dict[str, Any]:
    """whileai's ``report`` plus the one key ours adds (``rows_without_loss``, present when not 0), counted here
    from whileai's written ``rows``: rows whose messages hold no assistant turn, plus the rows TRL's completion
    shape dropped."""
    empty = sum(1 for row in rows if "messages" in row
                and not any(m.get("role") == "assistant" for m in row["messages"]))
    count = empty + int(report.get("no_completion_dropped", 0))
    return {**report, "rows_without_loss": count} if count else dict(report)


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, default=str) + "\n")
    return path


def read_jsonl(path: str | Path) -> list[Any]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@pytest.fixture
def load_canonical(tmp_path: Path) -> Any:
    """``load_dataset("whileai/export", ...)`` of rows, with a per-test cache."""
    import datasets

    import whileai_datasets  # noqa: F401

    def _load(rows: list[dict[str, Any]], **kwargs: Any) -> Any:
        path = write_jsonl(tmp_path / f"rows-{len(list(tmp_path.iterdir()))}.jsonl", rows)
        kwargs.setdefault("cache_dir", str(tmp_path / "cache"))
        return datasets.load_dataset("whileai/export", data_files=str(path), split="train", **kwargs)

    return _load


def canonical(rows: list[dict[str, Any]], *, system: str = SYSTEM, config: str = "default") -> Any:
    """Canonical rows as the builder makes them (a ``pyarrow.Table``)."""
    from whileai_datasets.export.sources import normalize_rows

    return normalize_rows(rows, config, system)


def with_tools(table: Any, tools: list[dict[str, Any]] | None = TOOLS) -> Any:
    """``table`` with whileai's ``tools`` on every row (null when there are none)."""
    import pyarrow as pa

    from whileai_datasets.columnar import _arrow

    text = json.dumps(tools) if tools else None
    return _arrow.set_column(table, "tools", pa.array([text] * table.num_rows, pa.string()).cast(pa.json_()))


def written(table: Any, *, preference: bool = False) -> list[dict[str, Any]]:
    """The rows as the JSONL writer writes them, parsed back."""
    from whileai_datasets.columnar import _json
    from whileai_datasets.shaping import writer

    rules = writer.PREFERENCE_NULLS if preference else writer.TRAINING_NULLS
    return [json.loads(line) for line in _json.encode_rows(table, keep_null=rules).to_pylist()]


def decoded(table: Any) -> list[dict[str, Any]]:
    """The rows as ``Dataset(table)[i]`` decodes them."""
    import datasets

    from whileai_datasets.columnar import _arrow

    ds = datasets.Dataset(_arrow.with_features(table))
    return [ds[i] for i in range(len(ds))]


def without_none(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if v is not None}


def reference(rows: list[dict[str, Any]], **kwargs: Any) -> list[dict[str, Any]]:
    """whileai's ``training_rows`` (system prompt and tools given), as its JSONL reads back."""
    from whileai.simulations import training_rows

    kwargs.setdefault("system_prompt", SYSTEM)
    kwargs.setdefault("tools", TOOLS)
    return roundtrip(training_rows(rows, **kwargs))


def messages_table(conversations: list[list[dict[str, Any]] | None], **columns: list[Any]) -> Any:
    """A table with a ``messages`` column (``List(Message)`` storage) built
    from message dicts as given, nulls included, plus any other columns."""
    import pyarrow as pa

    from whileai_datasets.columnar import _arrow
    from whileai_datasets.rows.features import MESSAGE_TYPE, message_to_storage

    stored = [None if c is None else [message_to_storage(m) for m in c] for c in conversations]
    data = {"messages": _arrow.typed_array(stored, pa.list_(MESSAGE_TYPE))}
    data.update({name: pa.array(values) for name, values in columns.items()})
    return pa.table(data)
