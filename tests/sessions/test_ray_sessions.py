"""The Ray engine takes agent sessions unchanged: the same rows as the local export, the same audit findings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import ray_session

pytestmark = [
    pytest.mark.ray,
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context"),
]

DATA = Path(__file__).resolve().parents[1] / "data" / "sessions"
ray_runtime = pytest.fixture(scope="module", autouse=True)(ray_session.local_runtime)


@pytest.mark.parametrize("name", ["claude_code.jsonl", "gemini_legacy.json", "aider.chat.history.md"])
def test_a_session_exports_and_audits_the_same_on_ray_as_here(name: str, tmp_path: Path) -> None:
    from whileai_datasets import audit, export_dataset

    export_dataset(str(DATA / name), str(tmp_path / "local.jsonl"))
    export_dataset(str(DATA / name), str(tmp_path / "ray.jsonl"), engine="ray")
    local = [json.loads(line) for line in (tmp_path / "local.jsonl").read_text().splitlines()]
    on_ray = [json.loads(line) for part in sorted((tmp_path / "ray.jsonl").iterdir())
              for line in part.read_text().splitlines()]
    assert sorted(map(json.dumps, on_ray)) == sorted(map(json.dumps, local)) and local
    here, there = audit(str(DATA / name)).to_dict(), audit(str(DATA / name), engine="ray").to_dict()
    for finding in ("session_not_trained", "session_tools_inferred", "session_turns_cut", "missing_system"):
        assert there["findings"][finding]["rows"] == here["findings"][finding]["rows"], finding
