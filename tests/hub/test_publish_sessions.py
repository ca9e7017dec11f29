"""publish() takes a dataset loaded from agent session logs: its rows and their session columns round-trip
through the local hub."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.hub.test_publish import load_to_disk, publish_saved

DATA = Path(__file__).resolve().parents[1] / "data" / "sessions"


def _sessions(out: str, cache: str) -> dict[str, Any]:
    """Two agents' sessions loaded through the front door and saved (how a dataset reaches a client process)."""
    import datasets

    import whileai_datasets  # noqa: F401  (registers whileai/export)

    ds = datasets.load_dataset("whileai/export", data_files=[str(DATA / "codex.jsonl"), str(DATA / "cline.json")],
                               cache_dir=cache)
    ds.save_to_disk(out)
    return {"rows": ds["train"].num_rows, "agents": sorted(set(ds["train"]["agent"]))}


def test_publish_takes_a_session_dataset(alice: Any, repo_id: str, tmp_path: Path) -> None:
    from datasets import load_from_disk

    from whileai_datasets.rows.features import messages_from_arrow

    saved = str(tmp_path / "sessions")
    made = alice.run(_sessions, out=saved, cache=str(tmp_path / "cache"))
    assert made["agents"] == ["cline", "codex"]
    alice.run(publish_saved, path=saved, repo_id=repo_id, token=alice.token)
    alice.on_another_machine().run(load_to_disk, repo_id=repo_id, out=str(tmp_path / "back"), token=alice.token,
                                   name="canonical")
    back = load_from_disk(str(tmp_path / "back"))["train"]
    source = load_from_disk(saved)["train"]
    assert back.num_rows == made["rows"] > 0
    for column in ("agent", "session_id", "source_file", "conversation", "tools_source"):
        assert back[column] == source[column], column
    # content parts (an image in a Cline user turn) are stored locally as marked text: compare them decoded
    local = messages_from_arrow(source.data.column("messages"))
    assert [[(m["role"], m["content"]) for m in row] for row in back["messages"]] == \
        [[(m["role"], m["content"]) for m in row] for row in local]
