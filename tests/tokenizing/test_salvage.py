"""Salvage: a conversation with one assistant turn the template cannot take is not lost whole.

Llama 3.1 (as shipped) renders a tool call and drops the text beside it: without salvage the row is refused (the
turn would train without its text); with it, that turn is kept as context (loss 0, as the template renders it)
and the turns after it train. Gemma 3 refuses the tool role (its roles must alternate) and renders no tool call
at all: with salvage the row trains its longest prefix that ends with a loss-carrying assistant turn the
template takes. Each row is named with what salvage did. The audit reports what salvage would keep when it is
off and counts what it trains when it is on, and SFTTrainer's labels on the tokenized rows are those masks.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_jsonl
from tests.support.tiny_lm import LLAMA3_TOKENS, tiny_causal_lm, train_tokenizer
from whileai_datasets import ChatTemplate, audit
from whileai_datasets._options import TrainingOptions
from whileai_datasets.errors import OptionError
from whileai_datasets.tokenize.notices import BadMaskRowsWarning, SalvagedRowsWarning
from whileai_datasets.tokenize.token_masks import tokenize

pytestmark = [pytest.mark.filterwarnings("ignore:`gradient_checkpointing` is deprecated:FutureWarning")]

SCHEMA = {"type": "function", "function": {"name": "lookup", "description": "Find an order.",
                                           "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}}


def _call(i: int) -> dict[str, Any]:
    return {"id": f"call_{i}", "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"n": i})}}


def _row(i: int, *, beside: bool) -> dict[str, Any]:
    """A plain exchange, then a tool call (with text beside it when ``beside``), its result and an answer."""
    return {"tools": [SCHEMA], "messages": [
        {"role": "user", "content": f"hello, I have order {i}"},
        {"role": "assistant", "content": f"glad to help with order {i}"},
        {"role": "user", "content": f"where is order {i}?"},
        {"role": "assistant", "content": "let me look that up" if beside else "", "tool_calls": [_call(i)]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": f"order {i} ships on day {i + 1}"},
        {"role": "assistant", "content": f"order {i} ships on day {i + 1}"}]}


ROWS = [_row(i, beside=i % 2 == 0) for i in range(4)] + [
    {"messages": [{"role": "user", "content": "just a question"}, {"role": "assistant", "content": "just an answer"}]}]
#: per template: the rows it cannot take whole (read off the templates: Llama 3.1 drops the text beside a call,
#: Gemma 3 refuses the tool role)
CASES = {"llama3_1": [0, 2], "gemma3": [0, 1, 2, 3]}
CAUSES = {"llama3_1": "template-drops-content", "gemma3": "roles-must-alternate"}
#: what salvage does to each: Llama 3.1's call turn becomes context and the answer after it trains (2 of the 3
#: assistant turns); Gemma 3 trains the first exchange alone (the prefix before the call turn). Last: per marked
#: turn, whether it trains.
SALVAGED = {"llama3_1": (2, 1, (("partial_turns_as_context", 1),), (True, False, True)),
            "gemma3": (1, 2, (("prefix_salvaged", 2),), (True, False, False))}


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import datasets

    root = tmp_path_factory.mktemp("salvage")
    path = write_jsonl(root / "rows.jsonl", ROWS)
    ds = datasets.load_dataset("whileai/export", data_files=str(path), split="train", cache_dir=str(root / "cache"))
    ds = ds.add_column("row", list(range(ds.num_rows)))
    out = {}
    for name in CASES:
        tokens = {k: v for k, v in LLAMA3_TOKENS.items() if k != "additional"} if name == "llama3_1" else {}
        extra = LLAMA3_TOKENS["additional"] if name == "llama3_1" else None
        tokenizer = train_tokenizer([json.dumps(r) for r in ROWS] * 5, chat_template=ChatTemplate.shipped(name).text,
                                    vocab_size=400, additional=extra, **tokens)
        chat = ChatTemplate.from_tokenizer(tokenizer)
        transform = tokenize(tokenizer, chat, on_bad_row="skip", salvage=True)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            kept = ds.map(transform, batched=True, load_from_cache_file=False)
        assert any(issubclass(w.category, SalvagedRowsWarning) for w in said)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BadMaskRowsWarning)
            dropped = ds.map(tokenize(tokenizer, chat, on_bad_row="skip"), batched=True)
        out[name] = {"kept": kept, "dropped": dropped, "tokenizer": tokenizer, "named": transform.failures.salvaged,
                     "warned": " ".join(str(w.message) for w in said if w.category is SalvagedRowsWarning),
                     "on": audit(str(path), tokenizer=tokenizer, template=chat, salvage=True),
                     "off": audit(str(path), tokenizer=tokenizer, template=chat),
                     "labels": _trainer_labels(tokenizer, kept, root / name)}
    return out


def _trainer_labels(tokenizer: Any, tokenized: Any, where: Path) -> list[tuple[int, ...]]:
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(output_dir=str(where), max_steps=1, per_device_train_batch_size=8, report_to=[], use_cpu=True,
                     save_strategy="no", max_length=1024, seed=0, dataloader_drop_last=False)
    train = tokenized.select_columns(["input_ids", "attention_mask", "assistant_masks"])
    trainer = SFTTrainer(model=tiny_causal_lm(len(tokenizer)), args=args, train_dataset=train,
                         processing_class=tokenizer)
    return sorted(tuple(i for i, label in zip(ids, labels) if label != -100)
                  for batch in trainer.get_train_dataloader()
                  for ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist()))


@pytest.mark.parametrize("name", list(CASES))
def test_salvage_trains_the_turns_before_the_one_the_template_cannot_take(name: str, measured: dict[str, Any]) -> None:
    pair = measured[name]
    failing = CASES[name]
    assert sorted(set(range(len(ROWS))) - set(pair["dropped"]["row"])) == failing  # without salvage: lost whole
    assert pair["kept"]["row"] == list(range(len(ROWS)))
    tokenizer = pair["tokenizer"]
    for row, ids, mask in zip(pair["kept"]["row"], pair["kept"]["input_ids"], pair["kept"]["assistant_masks"]):
        trained = tokenizer.decode([i for i, m in zip(ids, mask) if m])
        if row in failing and name == "gemma3":  # its first exchange trains; nothing from the turn it cannot take on
            assert f"glad to help with order {row}" in trained and "ships on day" not in trained
            assert "ships on day" not in tokenizer.decode(ids)
        elif row in failing:  # the call turn is context, rendered as the template renders it; the answer trains
            assert f"glad to help with order {row}" in trained and f"order {row} ships on day" in trained
            assert "lookup" in tokenizer.decode(ids) and "lookup" not in trained
            assert "let me look that up" not in tokenizer.decode(ids)
    assert [(f.row, tuple(f.salvage)) for f in pair["named"]] == [(row, SALVAGED[name]) for row in failing]
    kept, cut, steps, _ = SALVAGED[name]
    said = ", ".join(f"{step.replace('_', '-')} {turns}" for step, turns in steps)
    for row in failing:  # each row named where it is tokenized, with what it keeps, why and how
        assert f"row {row} ({CAUSES[name]}): {kept} assistant turn(s) kept, {cut} cut ({said})" in pair["warned"]
    marked = sorted(tuple(i for i, m in zip(ids, mask) if m)
                    for ids, mask in zip(pair["kept"]["input_ids"], pair["kept"]["assistant_masks"]))
    assert pair["labels"] == marked  # SFTTrainer trains exactly the salvaged masks


@pytest.mark.parametrize("name", list(CASES))
def test_the_audit_counts_what_salvage_trains_and_says_what_it_would_keep(name: str, measured: dict[str, Any]) -> None:
    pair = measured[name]
    failing = CASES[name]
    on, off = pair["on"].to_dict()["findings"], pair["off"].to_dict()["findings"]
    assert pair["on"].supervised_tokens == sum(map(sum, pair["kept"]["assistant_masks"]))
    assert pair["off"].supervised_tokens == sum(map(sum, pair["dropped"]["assistant_masks"]))
    kept, cut, steps, _ = SALVAGED[name]
    assert [f["row"] for f in on["salvaged"]["first"]] == failing and on["salvaged"]["amount"] == cut * len(failing)
    for step, turns in steps:  # each step under its own name, with the turns it concerns
        assert [f["row"] for f in on[step]["first"]] == failing and on[step]["amount"] == turns * len(failing)
        assert off[step]["rows"] == 0
    assert on["bad_rows"]["rows"] == 0 and on["salvageable"]["rows"] == 0
    assert [f["row"] for f in off["salvageable"]["first"]] == failing
    assert off["salvageable"]["amount"] == kept * len(failing)
    assert [f["row"] for f in off["bad_rows"]["first"]] == failing and off["salvaged"]["rows"] == 0
    assert pair["on"].options["salvage"] is True and pair["off"].options["salvage"] is False


def test_salvage_is_a_flag_of_the_training_options() -> None:
    assert TrainingOptions().salvage is False and TrainingOptions(salvage=True).to_dict()["salvage"] is True
    with pytest.raises(OptionError, match="salvage"):
        TrainingOptions(salvage="yes")  # type: ignore[arg-type]


def _parallel_row(i: int) -> dict[str, Any]:
    """Two calls at once whose results come back in the other order, then an answer."""
    return {"tools": [SCHEMA], "messages": [
        {"role": "user", "content": f"compare orders {i} and {i + 10}"},
        {"role": "assistant", "content": "", "tool_calls": [_call(i), _call(i + 10)]},
        {"role": "tool", "tool_call_id": f"call_{i + 10}", "content": f"order {i + 10} ships on day {i + 3}"},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": f"order {i} ships on day {i + 2}"},
        {"role": "assistant", "content": f"order {i} ships first"}]}


#: Llama 3.1 refuses two calls in a turn; gpt-oss renders the first alone (and the row is refused: the turn
#: would train without its second call)
PARALLEL_CAUSES = {"llama3_1": "single_tool_call_only", "gptoss": "template_drops_tool_calls"}


@pytest.mark.parametrize("name", list(PARALLEL_CAUSES))
def test_salvage_serializes_parallel_calls_each_followed_by_its_own_result(name: str, tmp_path: Path) -> None:
    import datasets

    rows = [_parallel_row(i) for i in range(3)]
    path = write_jsonl(tmp_path / "rows.jsonl", rows)
    ds = datasets.load_dataset("whileai/export", data_files=str(path), split="train", cache_dir=str(tmp_path / "c"))
    tokens = LLAMA3_TOKENS if name == "llama3_1" else {}
    tokenizer = train_tokenizer([json.dumps(r) for r in rows] * 5, chat_template=ChatTemplate.shipped(name).text,
                                vocab_size=400, **tokens)
    chat = ChatTemplate.from_tokenizer(tokenizer)
    with pytest.warns(BadMaskRowsWarning, match=PARALLEL_CAUSES[name].replace("_", "-")):  # by default: lost whole
        assert ds.map(tokenize(tokenizer, chat, on_bad_row="skip"), batched=True).num_rows == 0
    transform = tokenize(tokenizer, chat, on_bad_row="skip", salvage=True)
    with pytest.warns(SalvagedRowsWarning, match=r"row 0 \(.*\): 2 assistant turn\(s\) kept, 0 cut "
                                                 r"\(parallel-calls-serialized 1\)"):
        kept = ds.map(transform, batched=True, load_from_cache_file=False)
    assert [tuple(f.salvage) for f in transform.failures.salvaged] == [(2, 0, (("parallel_calls_serialized", 1),), (True, True))] * 3
    for i, (ids, mask) in enumerate(zip(kept["input_ids"], kept["assistant_masks"])):
        text = tokenizer.decode(ids)
        # each call is followed by its own result, in the calls' order, and both calls train
        assert text.index(f"order {i} ships on day") < text.index(f"order {i + 10} ships on day")
        trained = tokenizer.decode([t for t, m in zip(ids, mask) if m])
        assert str(i + 10) in trained and "ships on day" not in trained and f"order {i} ships first" in trained
    found = audit(str(path), tokenizer=tokenizer, template=chat, salvage=True).to_dict()["findings"]
    assert found["parallel_calls_serialized"]["rows"] == 3 and found["parallel_calls_serialized"]["amount"] == 3
    assert found["salvaged"]["rows"] == 3 and found["bad_rows"]["rows"] == 0
    marked = sorted(tuple(t for t, m in zip(ids, mask) if m)
                    for ids, mask in zip(kept["input_ids"], kept["assistant_masks"]))
    assert _trainer_labels(tokenizer, kept, tmp_path / "trl") == marked  # SFTTrainer trains exactly these masks
