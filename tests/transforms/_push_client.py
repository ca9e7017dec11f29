"""Client side of test_push.py: run in a child process by tests/hub/conftest.py's
``Identity.run`` (loaded by file path, so it imports nothing from the tests)."""

from __future__ import annotations

from typing import Any


def export_and_push(source: str, output: str, repo_id: str, tools: list[Any]) -> dict[str, Any]:
    import whileai_datasets

    report = whileai_datasets.export_dataset(source, output, tools=tools, unroll=True, validate=False, push_to=repo_id)
    return {"hub": report["hub"], "n": report["n"]}


def rows_on_the_hub(repo_id: str, token: str) -> int:
    from datasets import load_dataset

    return int(load_dataset(repo_id, token=token, split="train").num_rows)
