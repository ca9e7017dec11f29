"""``push_to`` publishes the written rows, through the real clients, to the local Hub of tests/hub."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hub.conftest import alice, hub, repo_id  # noqa: F401  (the session's local Hub server and its users)

from ._push_client import export_and_push, rows_on_the_hub
from .conftest import TOOLS, read_jsonl, seeded_rows, write_jsonl


def test_push_to_publishes_the_written_rows_privately(alice: Any, repo_id: str, tmp_path: Path) -> None:  # noqa: F811
    alice.login()  # push_to uses the token `hf auth login` cached, as whileai's does
    source = write_jsonl(tmp_path / "run.jsonl", seeded_rows(0, "sft"))
    output = tmp_path / "train.jsonl"
    out = alice.run(export_and_push, source=str(source), output=str(output), repo_id=repo_id, tools=TOOLS)
    assert out["hub"]["repo_id"] == repo_id and out["hub"]["private"] is True
    assert out["hub"]["splits"] == {"train": out["n"]}
    assert out["hub"]["url"].endswith(f"/datasets/{repo_id}") and out["hub"]["commit"]
    assert len(read_jsonl(output)) == out["n"]
    assert alice.on_another_machine().run(rows_on_the_hub, repo_id=repo_id, token=alice.token) == out["n"]
