"""pi and OpenClaw session trees: each branch a conversation of its own (or the current one by option), never
interleaved; a compaction's summary is context and what the model saw before it a row; every call, result, text
and readable thought of the file in some row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.session_readers import (
    FIXTURES,
    assert_renders,
    assert_row_shape,
    calls,
    head,
    images,
    others,
    read,
    records,
    results,
    said,
)
from whileai_datasets.errors import ExportFormatError, OptionError
from whileai_datasets.sessions import pi

TREES = {"pi": FIXTURES["pi"], "openclaw": FIXTURES["openclaw"]}


def _entries(path: Path) -> dict[str, dict]:
    return {value["id"]: value for _, value in records(path)[1:]}


def _path_to(entries: dict[str, dict], leaf: str) -> list[str]:
    """The fixture's own root-to-leaf walk, by parentId."""
    keys = [leaf]
    while entries[keys[-1]]["parentId"] is not None:
        keys.append(entries[keys[-1]]["parentId"])
    return keys[::-1]


def _said(entries: dict[str, dict], keys: list[str], kind: str) -> list:
    blocks = [block for key in keys if entries[key]["type"] == "message" and entries[key]["message"]["role"] ==
              "assistant" for block in entries[key]["message"]["content"]]
    return [block.get(kind) if kind != "toolCall" else block["id"] for block in blocks
            if block["type"] == {"text": "text", "thinking": "thinking", "toolCall": "toolCall"}[kind]
            and (kind != "thinking" or block["thinking"])]


@pytest.mark.parametrize("agent", TREES)
def test_pi_reads_every_call_result_text_and_thought_of_the_tree(agent: str) -> None:
    path = TREES[agent]
    rows = read(pi, path)
    entries = _entries(path)
    assistant = [block for entry in entries.values() if entry["type"] == "message"
                 and entry["message"]["role"] == "assistant" for block in entry["message"]["content"]]
    raw_calls = {block["id"]: (block["name"], block["arguments"]) for block in assistant if block["type"] == "toolCall"}
    assert calls(rows) == raw_calls and len(raw_calls) == 6
    assert results(rows) == {entry["message"]["toolCallId"] for entry in entries.values()
                             if entry["type"] == "message" and entry["message"]["role"] == "toolResult"}
    texts = [block["text"] for block in assistant if block["type"] == "text"]
    thoughts = [block["thinking"] for block in assistant if block["type"] == "thinking" and block["thinking"]]
    assert len(texts) == 7 and all(text in said(rows) for text in texts)
    assert len(thoughts) == 3 and all(thought in said(rows, "reasoning_content") for thought in thoughts)
    for row in rows:
        assert_row_shape(row, agent)
        assert row["session_id"] == records(path)[0][1]["id"]


def test_pi_branches_are_separate_conversations_never_interleaved() -> None:
    entries = _entries(TREES["pi"])
    rows = {row["conversation"]: row for row in read(pi, TREES["pi"])}
    assert sorted(rows) == ["branch:b0c1d2e3", "branch:d8e9f0a1", "pre-compaction:1"]
    for leaf in ("b0c1d2e3", "d8e9f0a1"):
        mine = _path_to(entries, leaf)
        others = [key for key in entries if key not in mine]
        row = rows[f"branch:{leaf}"]
        text = json.dumps(row["messages"])
        # every call of the branch's path after its last compaction is in its row, in order, none of another branch
        start = max((mine.index(key) for key in mine if entries[key]["type"] == "compaction"), default=-1)
        kept = mine[mine.index(entries[mine[start]]["firstKeptEntryId"]):] if start >= 0 else mine
        order = [call["id"] for msg in row["messages"] for call in msg.get("tool_calls") or ()]
        assert order == _said(entries, kept, "toolCall")
        assert not set(order) & set(_said(entries, others, "toolCall"))
        assert not any(entry_text in text for entry_text in _said(entries, others, "text"))


def test_pi_compaction_summary_is_context_and_the_history_before_it_is_a_row() -> None:
    entries = _entries(TREES["pi"])
    rows = {row["conversation"]: row for row in read(pi, TREES["pi"])}
    compaction = next(entry for entry in entries.values() if entry["type"] == "compaction")
    after = rows["branch:b0c1d2e3"]
    assert after["messages"][0] == {"role": "user", "content": compaction["summary"], "weight": 0}
    assert after["session_notes"]["compaction_summaries"] == 1
    before = rows["pre-compaction:1"]
    assert calls([before]).keys() == set(_said(entries, _path_to(entries, compaction["parentId"]), "toolCall"))
    assert before["messages"][-1] == {"role": "assistant", "content": "CI now uses Node 20."}
    other = rows["branch:d8e9f0a1"]
    summary = next(entry for entry in entries.values() if entry["type"] == "branch_summary")
    assert {"role": "user", "content": summary["summary"], "weight": 0} in other["messages"]


def test_pi_branch_abandoned_before_an_answer_adds_no_row(tmp_path: Path) -> None:
    lines = TREES["pi"].read_text(encoding="utf-8")
    abandoned = {"type": "message", "id": "ffff0002", "parentId": "e1f2a3b4", "timestamp": "2026-11-03T15:00:00.000Z",
                 "message": {"role": "user", "content": "Actually, wait"}}
    path = tmp_path / "session.jsonl"
    path.write_text(lines + json.dumps(abandoned) + "\n", encoding="utf-8")
    rows = read(pi, path)
    assert [row["conversation"] for row in rows] == [row["conversation"] for row in read(pi, TREES["pi"])]
    assert rows[0]["session_notes"]["branches_within_another"] == 1


def test_pi_current_branch_option_reads_only_the_path_pi_resumes() -> None:
    rows = read(pi, TREES["pi"], branches="current")
    assert [row["conversation"] for row in rows] == ["main"]
    whole = {row["conversation"]: row for row in read(pi, TREES["pi"])}
    assert rows[0]["messages"] == whole["branch:d8e9f0a1"]["messages"]
    with pytest.raises(OptionError, match="branches must be one of 'all', 'current', got 'leaf'"):
        read(pi, TREES["pi"], branches="leaf")


def test_pi_keeps_images_user_commands_and_counts_what_it_does_not_train() -> None:
    rows = {row["conversation"]: row for row in read(pi, TREES["pi"])}
    assert images(list(rows.values()), "user") == 2 and images(list(rows.values()), "tool") == 2
    other = rows["branch:d8e9f0a1"]
    assert {"role": "user", "content": "Ran `npm test`\n```\n# tests 9\n# pass 9\n```"} in other["messages"]
    assert other["session_notes"] == {"branch_summaries": 1, "redacted_thinking": 1, "custom_entries": 1,
                                      "label_entries": 1, "model_change_entries": 1,
                                      "thinking_level_change_entries": 1}
    assert other["tools_source"] == "inferred"


def test_pi_tells_openclaw_by_its_workspace() -> None:
    assert {row["agent"] for row in read(pi, TREES["openclaw"])} == {"openclaw"}
    assert {row["agent"] for row in read(pi, TREES["pi"])} == {"pi"}
    assert pi.agent_of({"cwd": "C:\\Users\\ana\\.openclaw\\workspace"}) == "openclaw"
    assert pi.agent_of({"cwd": "/home/ana/openclaw-fork"}) == "pi"


def test_pi_sniff_claims_only_session_trees() -> None:
    assert pi.sniff(head(pi, TREES["pi"])) and pi.sniff(head(pi, TREES["openclaw"]))
    assert not any(pi.sniff(other or []) for other in others(pi, *TREES))


def _copy(tmp_path: Path, change: dict[int, object]) -> Path:
    lines = TREES["pi"].read_text(encoding="utf-8").splitlines()
    for number, value in change.items():
        lines[number - 1:number] = [json.dumps(value)]
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_pi_refuses_an_entry_whose_parent_was_never_written(tmp_path: Path) -> None:
    orphan = {"type": "message", "id": "ffff0000", "parentId": "deadbeef", "message": {"role": "user", "content": "x"}}
    path = _copy(tmp_path, {6: orphan})
    with pytest.raises(ExportFormatError, match=rf"{path},? line 6: entry id 'ffff0000' with parentId 'deadbeef'"):
        read(pi, path)


def test_pi_refuses_an_unknown_message_role_naming_file_and_line(tmp_path: Path) -> None:
    entry = {"type": "message", "id": "ffff0001", "parentId": "d4e5f6a7", "message": {"role": "robot", "content": "x"}}
    last = len(records(TREES["pi"])) + 1  # a new leaf below the first user message
    path = _copy(tmp_path, {last: entry})
    with pytest.raises(ExportFormatError, match=rf"{path},? line {last}: a message entry with role 'robot'"):
        read(pi, path)


def test_pi_rows_render_through_a_real_chat_template() -> None:
    for path in TREES.values():
        for row in read(pi, path):
            assert_renders(row)
