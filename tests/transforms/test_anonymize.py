"""``anonymize`` replaces the planted values and nothing else: every other character of every row is kept."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from datasets import Dataset, load_dataset
from datasets.fingerprint import Hasher

from tests.support import planted_secrets
from whileai_datasets import OptionError
from whileai_datasets import transforms as wai_transforms
from whileai_datasets.privacy import scan

KEY = "test-key-0"
#: What a replaced span may become: a typed placeholder or a pseudonym.
REPLACEMENT = re.compile(r"<secret:[a-z0-9_]+>|user-[0-9a-f]{10}(?:@example\.com)?")


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Dataset, list[planted_secrets.Planted]]:
    path = tmp_path_factory.mktemp("planted") / "rollouts.jsonl"
    plans = planted_secrets.write_jsonl(path)
    return load_dataset("whileai/export", data_files=str(path), split="train"), plans


@pytest.fixture(scope="module")
def anonymized(planted) -> Dataset:
    rows, _ = planted
    return rows.with_format("arrow").map(wai_transforms.anonymize(key=KEY), batched=True).with_format(None)


def _strings(value: Any, path: str = "") -> dict[str, str]:
    """Every string of a row by its path."""
    if isinstance(value, str):
        return {path: value}
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _strings(item, f"{path}.{key}").items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _strings(item, f"{path}[{i}]").items()}
    return {}


def _only_spans_changed(before: str, after: str, values: list[str]) -> bool:
    """``after`` is ``before`` with (some of) ``values`` each replaced by a placeholder or pseudonym, every other
    character the same, in the same order. A value may sit in JSON text (tool-call arguments), escaped there."""
    values = sorted({*values, *(json.dumps(v)[1:-1] for v in values)}, key=len, reverse=True)
    pattern = "".join(f"(?:{re.escape(piece)})" if i % 2 == 0 else f"({REPLACEMENT.pattern})"
                      for i, piece in enumerate(re.split("(" + "|".join(map(re.escape, values)) + ")", before)))
    return re.fullmatch(pattern, after, flags=re.DOTALL) is not None


def test_no_planted_value_is_left(anonymized, planted) -> None:
    _, plans = planted
    text = json.dumps(anonymized.to_list())
    for plan in plans:
        for value in plan.values:
            assert value not in text, plan.kind
    assert scan(anonymized.remove_columns("anonymized")).secret_rows == 0


def test_a_diff_of_each_row_shows_only_the_replaced_spans(anonymized, planted) -> None:
    rows, plans = planted
    for before, after, plan in zip(rows.to_list(), anonymized.to_list(), plans):
        after.pop("anonymized")
        old, new = _strings(before), _strings(after)
        assert old.keys() == new.keys()
        for path, text in old.items():
            if plan.group == "lookalike" or text == new[path]:
                assert text == new[path], (plan.kind, path)
            else:
                values = plan.values if plan.group == "secret" else [plan.values[0]]
                assert _only_spans_changed(text, new[path], values), (plan.kind, path, new[path])


def test_lookalikes_stay_byte_for_byte(anonymized, planted) -> None:
    rows, plans = planted
    for i, plan in enumerate(plans):
        if plan.group == "lookalike":
            assert anonymized[i]["messages"] == rows[i]["messages"], plan.kind


def test_tool_arguments_stay_json_text_as_written() -> None:
    """Replaced inside the text: never decoded and encoded again (``0.00005`` stays, spacing stays)."""
    token = "ghp_" + "a1B2" * 9
    arguments = '{ "cmd" : "push https://' + token + '@github.com/a/b.git",\n  "ratio": 0.00005, "n": 1.0 }'
    table = pa.table({"messages": [[{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "sh", "arguments": arguments}}]}]]})
    out = wai_transforms.anonymize(key=KEY)(table).column("messages").to_pylist()[0][0]
    assert out["tool_calls"][0]["function"]["arguments"] == arguments.replace(token, "<secret:github_token>")


def test_it_reports_what_it_replaced_by_kind(anonymized, planted) -> None:
    _, plans = planted
    for row, plan in zip(anonymized["anonymized"], plans):
        kinds = {entry["kind"]: entry["count"] for entry in row or []}
        if plan.group == "lookalike":
            assert row is None
        else:
            assert plan.kind in kinds
    url_token = next(i for i, p in enumerate(plans) if p.kind == "url_token")
    assert anonymized[url_token]["anonymized"] == [{"kind": "url_token", "count": 2}]  # fetch and push lines


def test_a_name_gets_one_pseudonym_across_messages_arguments_metadata_and_runs() -> None:
    text = "see /home/alice/app, /home/alice.\n-rw-r--r-- 1 alice alice 3 Jan a"
    table = pa.table({
        "messages": [[{"role": "user", "content": text},
                      {"role": "tool", "content": 'drwxr-xr-x  2 alice staff 64 Jan 1 src'}]],
        "meta": [json.dumps({"cwd": "/Users/alice", "email": "Alice@corp.io"})],
        "other": ["mail alice@corp.io"],
    })
    first = wai_transforms.anonymize(key=KEY)(table).to_pylist()[0]
    again = wai_transforms.anonymize(key=KEY)(table).to_pylist()[0]
    other = wai_transforms.anonymize(key="another")(table).to_pylist()[0]
    names = set(re.findall(r"user-[0-9a-f]{10}(?!@)", json.dumps(first["messages"]) + first["meta"]))
    assert len(names) == 1 and "alice" not in json.dumps(first)
    name = names.pop()
    assert first["messages"][0]["content"] == f"see /home/{name}/app, /home/{name}.\n-rw-r--r-- 1 {name} {name} 3 Jan a"
    assert first["messages"][1]["content"] == f"drwxr-xr-x  2 {name} staff 64 Jan 1 src"
    assert json.loads(first["meta"])["email"] == first["other"].removeprefix("mail ")  # case-insensitive address
    assert again == first and other != first


def test_anonymizing_twice_changes_nothing_more(anonymized) -> None:
    table = anonymized.remove_columns("anonymized").data.table
    assert wai_transforms.anonymize(key=KEY, report_column=None)(table).equals(table)


def test_nulls_pass_through() -> None:
    table = pa.table({"messages": [[{"role": "user", "content": None}], None], "meta": [None, "x@corp.io"]})
    out = wai_transforms.anonymize(key=KEY)(table)
    assert out.column("messages").to_pylist() == [[{"role": "user", "content": None}], None]
    assert out.column("meta").to_pylist()[0] is None and out.column("meta").to_pylist()[1].endswith("@example.com")


def test_a_sliced_batch_and_one_row_batches_give_the_same_rows(planted) -> None:
    rows, _ = planted
    table = rows.data.table
    whole = wai_transforms.anonymize(key=KEY)(table)
    assert wai_transforms.anonymize(key=KEY)(table.slice(1)).to_pylist() == whole.slice(1).to_pylist()
    one = rows.with_format("arrow").map(wai_transforms.anonymize(key=KEY), batched=True, batch_size=1)
    assert one.with_format(None).to_list() == whole.to_pylist()


def test_it_pickles_and_hashes_stably_for_num_proc_and_the_cache() -> None:
    made = wai_transforms.anonymize(key=KEY)
    assert pickle.loads(pickle.dumps(made)) == made
    assert Hasher.hash(made) == Hasher.hash(wai_transforms.anonymize(key=KEY))
    assert Hasher.hash(made) != Hasher.hash(wai_transforms.anonymize(key="other"))


def test_pseudonyms_need_a_key() -> None:
    with pytest.raises(OptionError, match=r"anonymize\(key=None\): anonymize needs a key"):
        wai_transforms.anonymize()
    assert wai_transforms.anonymize(personal=False)(pa.table({"t": ["a@corp.io"]})).column("t").to_pylist() == [
        "a@corp.io"]


def test_a_path_is_not_needed(tmp_path: Path) -> None:
    """Plain formatting (dicts of lists) works too."""
    ds = Dataset.from_dict({"text": ["key AKIA" + "Q" * 16 + "."]})
    out = ds.map(wai_transforms.anonymize(personal=False), batched=True)
    assert out["text"] == ["key <secret:aws_access_key>."]
