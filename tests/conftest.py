"""Shared test factories. Tests make their own data: whileai's seeded agent
runs offline in well under a second, and tests/data holds small hand-written
rows for the shapes the seeded agent never writes."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.support.s3_server import s3, s3_server  # noqa: F401  (fixtures: a bucket on a local S3-protocol server)

# Every Ray runtime the suite starts (tests/support/ray_session.py, tests/support/ray_cluster.py, the CLI in subprocesses)
# listens on 127.0.0.1 only: Ray reads this when it is first imported and then binds its GCS, raylets, object
# managers and workers to the loopback address instead of every interface.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
# A runtime started without an address is the test's own: Ray would otherwise join whatever cluster
# /tmp/ray/ray_current_cluster names (another suite's three-node cluster running beside this one, as CI
# runs the oldest-stack suite beside the Ray stage), and ``ray.init(num_cpus=...)`` then fails there.
# Tests that want a cluster pass its address explicitly, which this does not override.
os.environ["RAY_ADDRESS"] = "local"

DATA = Path(__file__).parent / "data"

# Hypothesis profiles of the fuzz tests (tests/builders/test_fuzz.py): "fuzz-ci" is what CI runs,
# reproducible (derandomized, no example database) and well under a minute; WAI_FUZZ_PROFILE=fuzz-long
# searches longer, at random. The deadline is the hang check: one example is one small file, read in about
# 10 ms here, but CI runs two suites side by side on two cores and one replayed example once took 5.02 s
# there, so the deadline is a minute: a hang still fails, a loaded machine does not.
FUZZ_DEADLINE_MS = 60_000
settings.register_profile("fuzz-ci", max_examples=250, derandomize=True, database=None, deadline=FUZZ_DEADLINE_MS,
                          print_blob=True)
settings.register_profile("fuzz-long", max_examples=5000, derandomize=False, deadline=FUZZ_DEADLINE_MS,
                          print_blob=True)

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Look up an order",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "refund_payment",
            "description": "Refund a payment",
            "parameters": {
                "type": "object",
                "properties": {"payment_id": {"type": "string"}, "amount": {"type": "number"}},
                "required": ["payment_id"],
            },
        },
    },
]
SYSTEM_PROMPT = "You are a careful support agent."


def seeded_rows(seed: int = 0, mode: str = "sft", repeats: int = 1, budget: int = 24) -> list[dict[str, Any]]:
    """Rows from whileai's seeded demo agent, graded by a rule, as the JSONL
    writer would round-trip them."""
    import whileai as wai

    agent = wai.seeded_agent(TOOLS, seed=seed)
    data = wai.simulate(
        agent, tools=TOOLS, simulator=False, seed=seed, mode=mode, repeats=repeats, budget=budget, on_progress=None
    )
    data.grade(lambda row: 1.0 if str(row.get("final_text") or "").endswith(": ok.") else 0.0)
    return [json.loads(json.dumps(row, default=str)) for row in data.trajectories]


def template_rows(ds: Any) -> list[dict[str, Any]]:
    """A dataset's (or table's, or any iterable's) rows with each message struct read back as this package hands
    messages to a chat template or a JSONL file (``rows.features.message_from_storage``: the message's own keys,
    none of the nulls the struct fills in). ``ds[i]`` shows a message struct's storage form, every field."""
    import pyarrow as pa

    rows = ds.to_pylist() if isinstance(ds, pa.Table) else list(ds.with_format(None) if hasattr(ds, "with_format")
                                                                  and not hasattr(ds, "n_shards") else ds)
    return [template_value(row) for row in rows]


def template_value(value: Any) -> Any:
    """``value`` with every message struct in it (storage form) read back to the message it stands for."""
    from whileai_datasets.rows.features import is_storage_form, message_from_storage

    if is_storage_form(value):
        return message_from_storage(value)
    if isinstance(value, dict):
        return {key: template_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [template_value(item) for item in value]
    return value


def write_jsonl(path: Path, rows: Iterable[Any]) -> Path:
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write((row if isinstance(row, str) else json.dumps(row, ensure_ascii=False)) + "\n")
    return path


def read_jsonl(path: Path) -> list[Any]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@pytest.fixture
def load(tmp_path: Path) -> Callable[..., Any]:
    """``load_dataset("whileai/export", ...)`` with a per-test cache."""
    import datasets

    import whileai_datasets  # noqa: F401

    def _load(data_files: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("split", "train")
        kwargs.setdefault("cache_dir", str(tmp_path / "cache"))
        if isinstance(data_files, Path):
            data_files = str(data_files)
        return datasets.load_dataset("whileai/export", *args, data_files=data_files, **kwargs)

    return _load


@pytest.fixture(autouse=True)
def _quiet_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
