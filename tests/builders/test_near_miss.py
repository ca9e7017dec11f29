"""Near-miss inputs (issue 29): rows under ``conversations``, tools as JSON text, ``.json`` arrays,
rows with no conversation. Each is read with nothing lost or refused naming file, line and key."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

import whileai_datasets
from tests.conftest import read_jsonl, template_rows, write_jsonl
from tests.support.near_miss_rows import (
    LLAMA_FACTORY_EXPECTED,
    LLAMA_FACTORY_ROWS,
    LOOKUP,
    OPENAI_CONVERSATION_ROW,
    TOOLS_TEXT,
)
from whileai_datasets import BadRowsWarning, ExportFormatError
from whileai_datasets.reading import json_array


def _read(ds: Any) -> list[tuple[Any, Any, Any]]:
    return [(row["messages"], row["loss_mask"], row["tools"]) for row in template_rows(ds)]


def _json_array(path: Path, rows: list[Any], indent: int | None = 2) -> Path:
    path.write_text(json.dumps(rows, indent=indent, ensure_ascii=False), encoding="utf-8")
    return path


# ---------------------------------------------------------------- conversations


def test_a_llama_factory_json_array_reads_with_nothing_lost(tmp_path: Path, load: Any) -> None:
    ds = load(_json_array(tmp_path / "llamafactory.json", LLAMA_FACTORY_ROWS))
    assert _read(ds) == LLAMA_FACTORY_EXPECTED


def test_sharegpt_rows_read_the_same_from_jsonl(tmp_path: Path, load: Any) -> None:
    ds = load(write_jsonl(tmp_path / "sharegpt.jsonl", LLAMA_FACTORY_ROWS))
    assert _read(ds) == LLAMA_FACTORY_EXPECTED


def test_openai_messages_under_conversations_read_as_messages_would(tmp_path: Path, load: Any) -> None:
    under_messages = {**{k: v for k, v in OPENAI_CONVERSATION_ROW.items() if k != "conversations"},
                      "messages": OPENAI_CONVERSATION_ROW["conversations"]}
    ours = load(write_jsonl(tmp_path / "conversations.jsonl", [OPENAI_CONVERSATION_ROW]), keep_message_keys=True)
    theirs = load(write_jsonl(tmp_path / "messages.jsonl", [under_messages]), keep_message_keys=True)
    assert ours.to_list() == theirs.to_list()
    row = template_rows(ours)[0]
    assert row["messages"][1]["reasoning_content"] == "Look it up."
    assert row["messages"][0]["content"] == [{"type": "text", "text": "Where is order 9?"}]
    assert row["reward"] == 1.0 and row["tools"] == [LOOKUP]


def test_the_system_prompt_option_comes_before_the_rows_own_system(tmp_path: Path, load: Any) -> None:
    ds = load(write_jsonl(tmp_path / "run.jsonl", LLAMA_FACTORY_ROWS[:1]), system_prompt="Global rules.")
    messages, mask, _ = _read(ds)[0]
    assert messages[:2] == [{"role": "system", "content": "Global rules."},
                            {"role": "system", "content": "You are a careful support agent."}]
    assert messages[2:] == LLAMA_FACTORY_EXPECTED[0][0][1:] and mask == [0, *LLAMA_FACTORY_EXPECTED[0][1]]


def test_the_tools_option_replaces_tools_given_as_text(tmp_path: Path, load: Any) -> None:
    ds = load(write_jsonl(tmp_path / "run.jsonl", LLAMA_FACTORY_ROWS[:2]), tools=json.dumps([LOOKUP]))
    assert [row["tools"] for row in ds] == [[LOOKUP], [LOOKUP]]


def test_the_export_writes_a_llama_factory_file_as_openai_rows(tmp_path: Path) -> None:
    source = _json_array(tmp_path / "llamafactory.json", LLAMA_FACTORY_ROWS)
    report = whileai_datasets.export_dataset(str(source), str(tmp_path / "out.jsonl"), tools=[LOOKUP])
    written = read_jsonl(tmp_path / "out.jsonl")
    assert report["n"] == 3 and report["tool_call_roundtrip"]["invalid"] == 0
    # strip_think (on by default, as in whileai) drops the reasoning; everything else is as read
    assert written[0]["messages"][-1] == {"role": "assistant", "content": "It has shipped."}
    assert written[1]["messages"][2:4] == LLAMA_FACTORY_EXPECTED[1][0][2:4]
    assert [row["loss_mask"] for row in written] == [mask for _, mask, _ in LLAMA_FACTORY_EXPECTED]
    assert all(row["tools"] == [LOOKUP] for row in written)


@pytest.mark.parametrize(
    ("turn", "message"),
    [
        ({"from": "bot", "value": "hi"}, r"run\.jsonl line 1 \(row 0\), conversations\[1\]\.from: expected one of "
         r"'human', 'gpt', 'system', 'function_call', 'observation', got 'bot'\. Fix the row .*on_bad_row='skip'"),
        ({"value": "hi"}, r"conversations\[1\]\.from: expected one of .*, got no 'from'"),
        ({"from": "gpt", "value": ["a"]}, r"conversations\[1\]\.value: expected the turn's text, got list"),
        ({"from": "function_call", "value": "lookup_order(7)"},
         r"conversations\[1\]\.value: expected the JSON of \{\"name\": \.\.\., \"arguments\": \{\.\.\.\}\} or a list "
         r"of them, got unparseable text .* starting 'lookup_order\(7\)'"),
        ({"from": "function_call", "value": '{"arguments": {}}'},
         r"conversations\[1\]\.value: expected the JSON of .*, got JSON \{\"arguments\": \{\}\}"),
        ("hi", r"conversations\[1\]: expected a turn object, got str"),
    ],
)
def test_a_bad_sharegpt_turn_names_file_line_and_key(tmp_path: Path, load: Any, turn: Any, message: str) -> None:
    row = {"conversations": [{"from": "human", "value": "hi"}, turn]}
    with pytest.raises(ExportFormatError, match=message):
        load(write_jsonl(tmp_path / "run.jsonl", [row]))


def test_a_bad_openai_message_under_conversations_names_its_index(tmp_path: Path, load: Any) -> None:
    row = {"conversations": [{"role": "user", "content": "hi"}, {"role": "bot", "content": "x"}], "system": "S"}
    with pytest.raises(ExportFormatError, match=r"line 1 \(row 0\), conversations\[1\]\.role: expected one of"):
        load(write_jsonl(tmp_path / "run.jsonl", [row]))


# ---------------------------------------------------------------- tools as text


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ("[not json", r"line 1 \(row 0\), tools: expected JSON text of a list of tool schemas, got unparseable text"),
        ('{"name": "x"}', r"tools: expected JSON text of a list of tool schemas, got JSON \{\"name\": \"x\"\}"),
        ("[1, 2]", r"tools: expected JSON text of a list of tool schemas, got JSON \[1, 2\]"),
        ({"name": "x"}, r"tools: expected a list of tool schemas \(or JSON text of one\), got dict"),
    ],
)
def test_tools_that_are_not_schemas_are_refused(tmp_path: Path, load: Any, tools: Any, message: str) -> None:
    row = {**LLAMA_FACTORY_ROWS[0], "tools": tools}
    with pytest.raises(ExportFormatError, match=message):
        load(write_jsonl(tmp_path / "run.jsonl", [row]))


@pytest.mark.parametrize(("tools", "expected"), [(TOOLS_TEXT, 2), ("", None), (" \n", None), ("[]", None), ([], None)])
def test_tools_text_reads_as_its_list_and_empty_text_as_none(tmp_path: Path, load: Any, tools: Any,
                                                             expected: int | None) -> None:
    ds = load(write_jsonl(tmp_path / "run.jsonl", [{**LLAMA_FACTORY_ROWS[0], "tools": tools}]))
    got = ds[0]["tools"]
    assert (len(got) if got is not None else None) == expected


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ("[{oops", r"tools: tools starts with '\[', so it was read as JSON text of tool schemas, but it does not parse"),
        ('["lookup_order"]', r"tools: tools \(JSON text\) must hold tool schemas \(objects\), got str in the list"),
    ],
)
def test_a_tools_option_given_as_bad_json_text_is_refused(tmp_path: Path, load: Any, tools: str, message: str) -> None:
    with pytest.raises(ExportFormatError, match=message):
        load(write_jsonl(tmp_path / "run.jsonl", LLAMA_FACTORY_ROWS[:1]), tools=tools)


# ---------------------------------------------------------------- .json files


def test_a_json_file_of_one_row_per_line_reads_as_jsonl(tmp_path: Path, load: Any) -> None:
    ds = load(write_jsonl(tmp_path / "rows.json", LLAMA_FACTORY_ROWS))
    assert _read(ds) == LLAMA_FACTORY_EXPECTED


def test_a_compressed_json_array_reads_too(tmp_path: Path, load: Any) -> None:
    path = tmp_path / "rows.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump(LLAMA_FACTORY_ROWS, handle)
    assert _read(load(path)) == LLAMA_FACTORY_EXPECTED


def test_an_array_file_is_never_cut_into_line_ranges(tmp_path: Path, load: Any) -> None:
    rows = [LLAMA_FACTORY_ROWS[i % 3] for i in range(400)]
    path = _json_array(tmp_path / "big.json", rows)
    ds = load(path, shard_bytes=4096, num_proc=2)  # a JSONL file this size would be cut in about 60 shards
    assert _read(ds) == [LLAMA_FACTORY_EXPECTED[i % 3] for i in range(400)]
    two = load(path, parse_workers=2, cache_dir=str(tmp_path / "workers"))
    assert two.to_list() == ds.to_list()


def test_an_array_is_read_a_block_at_a_time_with_exact_lines(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                             load: Any) -> None:
    # blocks of 7 bytes: every element, and multi-byte characters, are cut across blocks
    monkeypatch.setattr(json_array, "BLOCK_BYTES", 7)
    rows = [{"messages": [{"role": "user", "content": f"héllo 🤖 {i}"}], "reward": i * 1.5} for i in range(20)]
    path = _json_array(tmp_path / "rows.json", rows)
    ds = load(path, "raw")
    lines = path.read_text(encoding="utf-8").split("\n")
    assert [row["source_line"] for row in ds] == [n + 1 for n, line in enumerate(lines) if line == "  {"]
    assert [row["extra"]["messages"] for row in ds] == [row["messages"] for row in rows]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[{"messages": []},\n {"prompt": "cut', r"rows\.json line 2 \(array index 1\): not valid JSON \(Unterminated "
         r"string starting\)\. A JSON array cannot be read past text that is not JSON"),
        ('[{"prompt": "a", "final_text": "b"}\n {"prompt": "c"}]',
         r"rows\.json line 2 \(array index 1\): expected ',' or '\]' after array index 0, got '\{'"),
        ('[{"prompt": "a", "final_text": "b"}] trailing', r"rows\.json line 1: text after the array's closing '\]'"),
        ('[{"prompt": "a", "final_text": "b"},]', r"rows\.json line 1 \(array index 1\): not valid JSON"),
        ("[", r"rows\.json line 1 \(array index 0\): the array is not closed"),
    ],
)
def test_a_json_array_that_is_not_json_names_line_and_index(tmp_path: Path, load: Any, text: str,
                                                            message: str) -> None:
    (tmp_path / "rows.json").write_text(text, encoding="utf-8")
    with pytest.raises(ExportFormatError, match=message):
        load(tmp_path / "rows.json", on_bad_row="skip")  # skipping cannot step past text that is not JSON


def test_bad_elements_of_an_array_are_skipped_by_index(tmp_path: Path, load: Any) -> None:
    rows = [LLAMA_FACTORY_ROWS[2], [1], {"question": "q"}, {"conversations": [{"from": "x", "value": "y"}]},
            LLAMA_FACTORY_ROWS[2], "\ud83e"]
    path = tmp_path / "rows.json"  # element i on line i + 2
    path.write_text("[\n" + ",\n".join(json.dumps(row) for row in rows) + "\n]\n", encoding="utf-8")
    with pytest.raises(ExportFormatError, match=r"rows\.json line 3 \(array index 1\): expected a JSON object"):
        load(path)
    with pytest.warns(BadRowsWarning, match=r"skipped 4 bad row\(s\)"):
        ds = load(path, on_bad_row="skip", cache_dir=str(tmp_path / "skip"))
    assert ds.num_rows == 2
    locations = whileai_datasets.bad_rows(ds)["locations"]
    assert locations == ["rows.json line 3 (array index 1)", "rows.json line 4 (array index 2)",
                         "rows.json line 5 (array index 3), conversations[0].from", "rows.json line 7 (array index 5)"]


def test_an_empty_array_has_no_rows(tmp_path: Path, load: Any) -> None:
    (tmp_path / "rows.json").write_text(" [ ]\n", encoding="utf-8")
    with pytest.raises(ExportFormatError, match=r"rows\.json: no rows in rows\.json: the file holds an empty JSON "
                       r"array\. .*or leave the file out of data_files"):
        load(tmp_path / "rows.json")


# ---------------------------------------------------------------- no conversation


def test_an_eval_row_is_refused_naming_its_keys(tmp_path: Path, load: Any) -> None:
    path = write_jsonl(tmp_path / "eval.jsonl", [{"question": "2 + 2?", "reply": "4", "score": 1}])
    with pytest.raises(ExportFormatError, match=r"eval\.jsonl line 1 \(row 0\): no conversation to train on: the row "
                       r"has 'question', 'reply', 'score'\. Did you mean 'prompt' for 'question'\? Did you mean 'response' for "
                       r"'reply'\? A trainable row holds `messages`.*`conversations`.*"
                       r"pass on_bad_row='skip' to leave such rows out"):
        load(path, system_prompt="S")  # not a system-only conversation, as whileai makes it


@pytest.mark.parametrize(("row", "found"), [({"messages": []}, r"the row has 'messages' \(messages empty\)"),
                                            ({"conversations": [], "system": "S"},
                                             r"the row has 'conversations', 'system' \(conversations empty\)"),
                                            ({}, "the row is an empty object")])
def test_an_empty_conversation_is_refused(tmp_path: Path, load: Any, row: dict[str, Any], found: str) -> None:
    with pytest.raises(ExportFormatError, match=rf"no conversation to train on: {found}"):
        load(write_jsonl(tmp_path / "run.jsonl", [row]))


def test_rows_with_no_conversation_are_skipped_on_request(tmp_path: Path, load: Any) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", [{"question": "q"}, *LLAMA_FACTORY_ROWS, {"reply": "r"}])
    with pytest.warns(BadRowsWarning, match=r"skipped 2 bad row\(s\) \(on_bad_row='skip'\); first: run\.jsonl line 1 "
                      r"\(row 0\): no conversation to train on"):
        ds = load(path, on_bad_row="skip")
    assert _read(ds) == LLAMA_FACTORY_EXPECTED
