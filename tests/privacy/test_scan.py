"""The secrets scan finds every planted secret row and none of the look-alikes, wherever the value sits."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from datasets import Dataset, Features, Json, List, load_dataset

import whileai_datasets
from tests.support import planted_secrets
from whileai_datasets.privacy import SECRET_KINDS, refuse_secrets, rules, scan
from whileai_datasets.privacy.scanning import Findings


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[planted_secrets.Planted]]:
    path = tmp_path_factory.mktemp("planted") / "rollouts.jsonl"
    return path, planted_secrets.write_jsonl(path)


@pytest.fixture(scope="module")
def rows(planted):
    path, _ = planted
    return load_dataset("whileai/export", data_files=str(path), split="train")


def test_every_kind_is_planted_in_every_place(planted) -> None:
    _, plans = planted
    kinds = Counter(p.kind for p in plans if p.group == "secret")
    assert set(kinds) == set(SECRET_KINDS)
    assert set(kinds.values()) == {len(planted_secrets.PLACES)}


def test_scan_finds_every_planted_secret_row_and_no_lookalike(rows, planted) -> None:
    _, plans = planted
    found = Findings()
    secret, personal = found.add(rows.data.table)

    assert [i for i, hit in enumerate(secret) if hit] == [i for i, p in enumerate(plans) if p.group == "secret"]
    assert [i for i, hit in enumerate(personal) if hit] == [i for i, p in enumerate(plans) if p.group == "personal"]
    by_kind = {kind: count.rows for kind, count in found.kinds.items()}
    assert by_kind == {p.kind: len(planted_secrets.PLACES) for p in plans if p.group != "lookalike"}


def test_places_name_the_field_and_never_show_a_value(rows, planted) -> None:
    _, plans = planted
    found = scan(rows).to_dict()
    text = json.dumps(found)
    for plan in plans:
        for value in plan.values:
            if plan.group == "secret":
                assert value not in text
    fields = {p["field"] for kind in found["secrets"].values() for p in kind["first"]}
    assert {"messages[1].content", "messages[2].tool_calls[0].function.arguments", "messages[3].content"} <= fields


def test_the_audit_counts_secrets_and_personal_data_apart_with_file_and_line(planted) -> None:
    path, plans = planted
    data = whileai_datasets.audit(str(path)).to_dict()

    secret_rows = [i for i, p in enumerate(plans) if p.group == "secret"]
    assert data["findings"]["secrets"]["rows"] == len(secret_rows)
    assert data["findings"]["personal_data"]["rows"] == sum(p.group == "personal" for p in plans)
    assert "secrets" in data["problems"] and "personal_data" not in data["problems"]
    first = data["privacy"]["secrets"]["aws_access_key"]["first"][0]
    row = next(i for i, p in enumerate(plans) if p.kind == "aws_access_key")
    assert (first["row"], first["line"], first["field"]) == (row, row + 1, "messages[1].content")
    assert first["preview"] == "AKIA…(20 chars)"
    text = whileai_datasets.audit(str(path)).format()
    assert "secrets (publish refuses them)" in text and plans[row].values[0] not in text


def test_refuse_secrets_names_kinds_and_rows_but_no_value(rows, planted) -> None:
    _, plans = planted
    with pytest.raises(whileai_datasets.PublishError, match=r"found secrets in 57 of 87 rows: aws_access_key in 3 "
                       r"rows \(row 0 messages\[1\]\.content; row 1 messages\[2\]\.tool_calls\[0\]") as raised:
        refuse_secrets(rows)
    assert not any(value in str(raised.value) for p in plans for value in p.values)


def test_a_claude_code_style_session_row_is_scanned_like_any_other() -> None:
    """Whatever produced the rows (a session reader's canonical rows too), the scan reads their strings."""
    token = "hf_" + "".join(chr(ord("a") + (i * 7) % 26) for i in range(34))
    messages = [{"role": "user", "content": "deploy it"},
                {"role": "assistant",
                 "content": [{"type": "tool_use", "name": "Bash", "input": {"command": "cat .env"}}]},
                {"role": "user", "content": [{"type": "tool_result", "content": f"HF_TOKEN={token}\n"}]}]
    # datasets' own agent-trace typing (its json loader's): each message one Json value, the metadata Json too
    session = Dataset.from_dict({"messages": [messages], "metadata": [{"cwd": "/Users/casey/app", "agent": "claude"}]},
                                features=Features({"messages": List(Json()), "metadata": Json()}))
    found = scan(session).to_dict()
    assert found["secrets"]["huggingface_token"]["first"][0]["field"] == "messages[2]"
    assert found["personal"]["home_user"]["first"][0]["field"] == "metadata"


def test_spans_leave_the_key_name_and_url_around_the_value() -> None:
    password = "Zq" + "9" * 6 + "xT"
    text = f"DATABASE_URL=postgres://app:{password}@db:5432/x"
    assert [(s.kind, text[s.start:s.end]) for s in rules.spans(text)] == [("url_password", password)]


@pytest.mark.parametrize("text", ["see /home/$USER/x and /Users/<name>/y", "ls: -rw-r--r-- 1 root wheel 3 Jan a",
                                  "email git@github.com:acme/api.git", "HF_TOKEN=HUB_TOKEN,"])
def test_stand_ins_are_not_found(text: str) -> None:
    assert rules.spans(text) == []


def test_splits_of_one_table_are_scanned_once_and_named_by_split(rows, planted) -> None:
    """``split_by``'s splits select from one table: scanned in its order, each place named in its split."""
    from whileai_datasets.hub import split_by
    from whileai_datasets.hub.reading import chunks
    from whileai_datasets.privacy import gate

    _, plans = planted
    grouped = rows.add_column("group", [str(i % 7) for i in range(rows.num_rows)])
    splits = split_by(grouped, "group", test_size=0.3)
    assert gate._partition(splits) is not None
    found = gate.screen(splits, "allow", chunks)

    one_by_one = Findings()
    for name, split in splits.items():
        one_by_one.merge(gate.scan_tables(chunks(split), split=name))
    assert {k: (v.rows, v.values) for k, v in found.kinds.items()} == \
        {k: (v.rows, v.values) for k, v in one_by_one.kinds.items()}
    for kind, count in found.secrets.items():
        for place in count.first:
            row = splits[place["split"]][place["row"]]["messages"]
            texts = [m["content"] or "" for m in row] + [c["function"]["arguments"] for m in row
                                                          for c in m["tool_calls"] or []]
            assert any(value in text or json.dumps(value)[1:-1] in text
                       for p in plans if p.kind == kind for value in p.values for text in texts), (kind, place)
