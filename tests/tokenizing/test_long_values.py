"""A huge untrained value: the audit and show-mask read it only as far as ``max_length`` reaches, and still
count exactly what ``tokenize`` trains (``tokenize.long_values``)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_jsonl
from tests.support.tiny_lm import train_tokenizer
from whileai_datasets import ChatTemplate, audit
from whileai_datasets.tokenize import long_values
from whileai_datasets.tokenize.token_masks import tokenize
from whileai_datasets.tokenize.views import table_views

MAX_LENGTH = 96
#: A cap small enough that a test-sized value passes it (the module's own floor is 100,000 characters).
REACH_FLOOR = 2_000
LOG = "".join(f"{i:05d} worker-{i % 7} status={'ok' if i % 5 else 'fail'}\n" for i in range(2_500))


def _row(i: int, output: str) -> dict[str, Any]:
    call = {"id": f"call_{i}", "type": "function", "function": {"name": "read_log", "arguments": "{}"}}
    return {"messages": [{"role": "user", "content": f"what failed in run {i}?"},
                         {"role": "assistant", "content": f"reading log {i}", "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": f"call_{i}", "content": output},
                         {"role": "assistant", "content": f"worker {i} failed"}]}


@pytest.fixture(scope="module")
def setting(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import datasets

    rows = [_row(0, "all fine"), _row(1, LOG), _row(2, "status=ok")]
    root = tmp_path_factory.mktemp("long")
    path = write_jsonl(root / "rows.jsonl", rows)
    tok = train_tokenizer([json.dumps(r) for r in rows[::2]] * 20 + [LOG[:4000]],
                          chat_template=ChatTemplate.shipped("qwen2_5").text, vocab_size=400)
    ds = datasets.load_dataset("whileai/export", data_files=str(path), split="train", cache_dir=str(root / "cache"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the rows past max_length are said elsewhere
        trained = ds.map(tokenize(tok, max_length=MAX_LENGTH), batched=True)
    return {"path": path, "tok": tok, "ds": ds, "trained": trained}


def test_the_audit_reads_a_huge_untrained_value_only_as_far_as_max_length_reaches_and_counts_what_trains(
        setting: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(long_values, "MIN_REACH", REACH_FLOOR)
    reach = long_values.reach_chars(setting["tok"], MAX_LENGTH)
    assert reach is not None and reach < len(LOG)
    trained = setting["trained"]
    for source in (str(setting["path"]), setting["ds"]):
        found = audit(source, tokenizer=setting["tok"], max_length=MAX_LENGTH)
        assert found.supervised_tokens == sum(map(sum, trained["assistant_masks"]))  # what trains: exact
        unread = found.to_dict()["findings"]["read_to_max_length"]
        assert (unread["rows"], unread["amount"], [f["row"] for f in unread["first"]]) == (1, len(LOG) - reach, [1])
        # the tokens the audit encoded: the huge row's only as far as the reach, so fewer than tokenize's
        whole = sum(trained["num_tokens"]) + sum(trained["tokens_truncated"])
        assert found.tokens_before_cut < whole - (len(LOG) - reach) // 8
        assert "max_tool_output_chars" in found.format()


def test_show_mask_reads_a_huge_untrained_value_only_as_far_as_max_length_reaches(
        setting: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(long_values, "MIN_REACH", REACH_FLOOR)
    reach = long_values.reach_chars(setting["tok"], MAX_LENGTH)
    view, = table_views(tokenize(setting["tok"], max_length=MAX_LENGTH), setting["ds"].data.table.slice(1, 1),
                        MAX_LENGTH)
    row = setting["trained"][1]
    assert (view.tokens, view.supervised) == (MAX_LENGTH, sum(row["assistant_masks"]))
    assert view.unread == len(LOG) - reach
    assert sum(len(text) for text, _ in view.runs) < reach + 1_000  # the text it rendered and encoded
    assert "max_tool_output_chars" in view.summary()


def test_without_max_length_nothing_is_left_unread(setting: dict[str, Any]) -> None:
    assert long_values.reach_chars(setting["tok"], None) is None
    found = audit(setting["ds"], tokenizer=setting["tok"])
    assert found.count("read_to_max_length") == 0
    assert found.tokens_before_cut == sum(setting["ds"].map(tokenize(setting["tok"]), batched=True)["num_tokens"])


def test_a_trained_huge_value_is_read_whole(tmp_path: Path, setting: dict[str, Any],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(long_values, "MIN_REACH", REACH_FLOOR)
    row = {"messages": [{"role": "user", "content": "print the log"}, {"role": "assistant", "content": LOG}]}
    found = audit(str(write_jsonl(tmp_path / "trained.jsonl", [row])), tokenizer=setting["tok"],
                  max_length=MAX_LENGTH)
    assert found.count("read_to_max_length") == 0 and found.supervised_tokens > 0
