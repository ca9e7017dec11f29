"""Nothing the user wrote is dropped without a word: keys no row shape reads are counted and said once per
dataset (``UnreadKeysWarning``, with a "did you mean" for near misses); a ``prompt`` / ``response`` row is
one user and one assistant turn; ShareGPT ``from`` / ``value`` turns read the same under ``messages`` as
under ``conversations``.

Fixtures (tests/data): ``misspelt_keys.jsonl`` (``contnet``, ``thinking``, ``mesages``),
``prompt_response_rows.jsonl`` (``prompt`` + ``response`` / ``completion`` text),
``sharegpt_under_messages.jsonl`` (``from`` / ``value`` turns under ``messages``, a tool call among them).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import read_jsonl, write_jsonl
from whileai_datasets import ExportFormatError, UnreadKeysWarning, export_dataset
from whileai_datasets.reading import parallel

DATA = Path(__file__).parent.parent / "data"
MISSPELT = DATA / "misspelt_keys.jsonl"
PROMPT_RESPONSE = DATA / "prompt_response_rows.jsonl"
SHAREGPT = DATA / "sharegpt_under_messages.jsonl"


def test_misspelt_keys_are_said_once_with_counts_first_locations_and_a_guess(load: Any) -> None:
    with pytest.warns(UnreadKeysWarning) as caught:
        ds = load(MISSPELT)
    assert len(caught) == 1
    said = str(caught[0].message)
    assert said.startswith("split 'train': 3 key(s) were not read: ")
    assert ("message key 'contnet' in 1 message(s) (first: misspelt_keys.jsonl line 1 (row 0), messages[0].contnet): "
            "did you mean 'content'?") in said
    assert ("message key 'thinking' in 1 message(s) (first: misspelt_keys.jsonl line 2 (row 1), "
            "messages[1].thinking): did you mean 'reasoning_content'?") in said
    assert "row key 'mesages' in 1 row(s) (first: misspelt_keys.jsonl line 3 (row 2), mesages): did you mean " \
           "'messages'?" in said
    assert "'refusal'" not in said  # a null value loses nothing
    assert "keep_message_keys=True keeps them" in said
    assert ds[0]["messages"][0]["content"] == ""  # read as it was written: the warning is the point


def test_the_warning_comes_again_from_the_cache_and_once_per_load(load: Any) -> None:
    with pytest.warns(UnreadKeysWarning):
        load(MISSPELT)
    with pytest.warns(UnreadKeysWarning) as caught:
        load(MISSPELT)
    assert len(caught) == 1


def test_kept_message_keys_are_still_said_as_kept(load: Any) -> None:
    with pytest.warns(UnreadKeysWarning, match="message keys are kept in each message's 'extra' but no chat "
                                               "template renders them"):
        ds = load(MISSPELT, keep_message_keys=True)
    assert ds[0]["messages"][0]["extra"] == {"contnet": "Where is my order?"}


def test_streaming_says_it_per_file(tmp_path: Path) -> None:
    import datasets

    stream = datasets.load_dataset("whileai/export", data_files=str(MISSPELT), split="train", streaming=True)
    with pytest.warns(UnreadKeysWarning, match=r"^misspelt_keys\.jsonl: 3 key\(s\) were not read"):
        assert len(list(stream)) == 3


def test_parse_workers_report_the_keys_with_their_real_lines(tmp_path: Path, load: Any) -> None:
    assert 3000 * 100 > 2 * parallel.PIECE_MIN_BYTES  # several pieces: the keys are in the last one
    good = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    bad = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "contnet": "x"}]}
    path = write_jsonl(tmp_path / "big.jsonl", [good] * 3000 + [bad] * 2)
    with pytest.warns(UnreadKeysWarning, match=r"'contnet' in 2 message\(s\) \(first: big\.jsonl line 3001 "
                                               r"\(row 3000\), messages\[1\]\.contnet\)"):
        load(path, parse_workers=2)


def test_rows_in_memory_are_said_by_the_export(tmp_path: Path) -> None:
    with pytest.warns(UnreadKeysWarning, match=r"^the rows: 3 key\(s\) were not read: .*rows row 0, "
                                               r"messages\[0\]\.contnet\): did you mean 'content'") as caught:
        export_dataset(read_jsonl(MISSPELT), str(tmp_path / "out.jsonl"))
    assert caught[0].filename == __file__


def test_a_reply_beside_a_conversation_read_from_other_keys_is_said(tmp_path: Path, load: Any) -> None:
    row = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}], "output": "x"}
    with pytest.warns(UnreadKeysWarning, match=r"row key 'output' in 1 row\(s\) .*did you mean 'response' \(read "
                                               r"as the reply beside a text 'prompt' only\)\?"):
        load(write_jsonl(tmp_path / "r.jsonl", [row]))


def test_whileai_rows_and_their_metadata_say_nothing(tmp_path: Path, load: Any) -> None:
    rows = [{"prompt": "hi", "final_text": "yo", "judge_meta": {"a": 1}, "scenario_dimensions": {},
             "tools_used": ["x"], "arm": "structured"}]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnreadKeysWarning)
        assert load(write_jsonl(tmp_path / "r.jsonl", rows)).num_rows == 1


def test_prompt_and_response_text_are_one_user_and_one_assistant_turn(load: Any) -> None:
    ds = load(PROMPT_RESPONSE)
    assert [[(m["role"], m["content"]) for m in row] for row in ds["messages"]] == [
        [("user", "Translate 'bonjour' to English."), ("assistant", "Hello.")],
        [("user", "What is the capital of Italy?"), ("assistant", " Rome.")],
    ]
    assert ds["loss_mask"] == [[0, 1], [0, 1]] and ds["prompt"] == [row["prompt"] for row in read_jsonl(PROMPT_RESPONSE)]


def test_sharegpt_turns_under_messages_read_as_under_conversations(tmp_path: Path, load: Any) -> None:
    moved = [{"conversations": row.pop("messages"), **row} for row in read_jsonl(SHAREGPT)]
    under_messages, under_conversations = load(SHAREGPT), load(write_jsonl(tmp_path / "c.jsonl", moved))
    assert under_messages["messages"] == under_conversations["messages"]
    assert under_messages["loss_mask"] == under_conversations["loss_mask"] == [[0, 0, 1], [0, 1, 0, 1]]
    assert under_messages[1]["messages"][1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert under_messages["tools"][1] == json.loads(read_jsonl(SHAREGPT)[1]["tools"])


def test_a_bad_sharegpt_turn_under_messages_is_named_there(tmp_path: Path, load: Any) -> None:
    row = {"messages": [{"from": "human", "value": "hi"}, {"from": "bot", "value": "yo"}]}
    with pytest.raises(ExportFormatError, match=r"r\.jsonl line 1 \(row 0\), messages\[1\]\.from: expected one of "
                                                r"'human', 'gpt', 'system', 'function_call', 'observation', got 'bot'"):
        load(write_jsonl(tmp_path / "r.jsonl", [row]))
