"""A secret a coding agent read into its session (a ``.env`` file's line in a tool result) is found the way a
rollout's is: the scan reads the rows a session reader wrote, whatever wrote them (issue 49)."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import datasets

from whileai_datasets import audit
from whileai_datasets.privacy import scan

DATA = Path(__file__).resolve().parent.parent / "data" / "sessions"


def _planted_session(tmp_path: Path) -> tuple[Path, str]:
    """The Claude Code fixture with an Anthropic key (made now, not stored) in its first tool result."""
    rng = random.Random(49)
    key = "sk-ant-api03-" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(93)) + "AA"
    lines = []
    for line in (DATA / "claude_code.jsonl").read_text().splitlines():
        record = json.loads(line)
        content = record.get("message", {}).get("content")
        if isinstance(content, list) and content and content[0].get("tool_use_id") == "toolu_01A":
            content[0]["content"] += f"\n$ cat .env\nANTHROPIC_API_KEY={key}\n"
        lines.append(json.dumps(record))
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path, key


def test_a_secret_in_a_session_tool_result_is_found_by_the_audit_and_the_scan(tmp_path: Path) -> None:
    path, key = _planted_session(tmp_path)
    ds = datasets.load_dataset("whileai/export", data_files=str(path), split="train",
                               cache_dir=str(tmp_path / "cache"))
    found = scan(ds).to_dict()["secrets"]
    assert found["anthropic_key"]["rows"] == 1, found
    report = audit(str(path)).to_dict()
    assert report["findings"]["secrets"]["rows"] == 1
    assert key not in json.dumps(report)  # named by kind and place, never shown
    clean = audit(str(DATA / "claude_code.jsonl")).to_dict()
    assert clean["findings"]["secrets"]["rows"] == 0
