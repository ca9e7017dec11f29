"""Training flags the rows carry themselves (``weight`` 0/1, ``loss`` true/false per message, a row's own
``loss_mask``) are the mask on every path, or refused by name; never replaced by the mask mode's.

Fixtures (tests/data): ``openai_weight_rows.jsonl`` (OpenAI fine-tuning rows, ``weight`` on assistant
messages), ``swift_loss_rows.jsonl`` (ms-swift / xtuner ``loss`` flags, one ``null``),
``own_loss_mask_rows.jsonl`` (rows with their own ``loss_mask``, as a ``mask_mode="final"`` export writes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import read_jsonl, write_jsonl
from tests.support.tiny_lm import train_tokenizer, trl_template
from whileai_datasets import ExportFormatError, NothingToTrainWarning, audit, export_dataset, mask_report
from whileai_datasets.tokenize import tokenize

DATA = Path(__file__).parent.parent / "data"
WEIGHTS = DATA / "openai_weight_rows.jsonl"
LOSS = DATA / "swift_loss_rows.jsonl"
OWN_MASK = DATA / "own_loss_mask_rows.jsonl"


def _row(*messages: dict[str, Any], **keys: Any) -> dict[str, Any]:
    return {"messages": list(messages), **keys}


def _user(text: str = "hi", **keys: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **keys}


def _assistant(text: str = "hello", **keys: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **keys}


@pytest.mark.parametrize(
    ("path", "masks"),
    [
        (WEIGHTS, [[0, 0, 0, 0, 1], [0, 0, 0, 0, 1], [0, 1]]),
        (LOSS, [[0, 0, 0, 0, 1], [0, 0, 0, 1]]),  # loss null: no flag, the mode trains it
        (OWN_MASK, [[0, 0, 0, 0, 1], [0, 1]]),
    ],
)
def test_flags_in_the_file_are_the_loaded_mask(load: Any, path: Path, masks: list[list[int]]) -> None:
    assert load(path)["loss_mask"] == masks


def test_a_flag_only_turns_a_turn_off_so_final_mode_on_a_masked_last_turn_trains_nothing(
        tmp_path: Path, load: Any) -> None:
    rows = [_row(_user(), _assistant("a"), _user(), _assistant("b", loss=False))]
    with pytest.warns(NothingToTrainWarning, match=r"1 of 1 rows .* train nothing"):
        ds = load(write_jsonl(tmp_path / "r.jsonl", rows), mask_mode="final")
    assert ds["loss_mask"] == [[0, 0, 0, 0]]


def test_together_files_weight_every_message_and_read_back_to_the_same_mask(tmp_path: Path, load: Any) -> None:
    export_dataset(str(WEIGHTS), str(tmp_path / "together.jsonl"), weights="all")
    written = read_jsonl(tmp_path / "together.jsonl")
    assert [m["weight"] for m in written[0]["messages"]] == [0, 0, 0, 0, 1]  # user messages weigh 0 too
    assert load(tmp_path / "together.jsonl")["loss_mask"] == load(WEIGHTS)["loss_mask"]


@pytest.mark.parametrize("fmt", ["openai", "fireworks"])
def test_the_export_writes_the_flags_as_the_mask(tmp_path: Path, fmt: str) -> None:
    report = export_dataset(str(WEIGHTS), str(tmp_path / "out.jsonl"), format=fmt,
                            **({"weights": "assistant"} if fmt == "openai" else {}))
    written = read_jsonl(tmp_path / "out.jsonl")
    assert [[m.get("weight") for m in row["messages"] if m["role"] == "assistant"] for row in written] == [
        [0, 1], [0, 1], [1]]
    assert (report["trained_messages"], report["masked_messages"]) == (3, 9)


def test_an_unrolled_export_ends_samples_only_at_trained_turns(tmp_path: Path) -> None:
    report = export_dataset(str(LOSS), str(tmp_path / "out.jsonl"), unroll=True, mask_mode="final")
    written = read_jsonl(tmp_path / "out.jsonl")
    assert [row["messages"][-1]["content"] for row in written] == ["To get to the other side.", "Sorry, it is 4."]
    assert [row["loss_mask"] for row in written] == [[0, 0, 0, 0, 1], [0, 0, 0, 1]]
    assert report["n"] == 2


def test_tokenize_and_the_audit_supervise_only_the_flagged_turns(load: Any) -> None:
    tok = train_tokenizer([WEIGHTS.read_text()] * 5, chat_template=trl_template("qwen2_5"), vocab_size=500)
    ds = load(WEIGHTS)
    tokens = ds.map(tokenize(tok), batched=True, remove_columns=ds.column_names)
    first = tokens[0]
    trained = tok.decode([t for t, m in zip(first["input_ids"], first["assistant_masks"]) if m])
    assert "as if everyone" in trained and trained.count("<|im_end|>") == 1  # the weight-0 "Paris" turn: not trained
    found = audit(str(WEIGHTS), tokenizer=tok)
    assert found.supervised_tokens == mask_report(tokens)["supervised_tokens"]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (_row(_user(weight=1), _assistant()),
         r"messages\[0\]\.weight: expected 0 on a 'user' message, got weight 1 asking "
         r"to train it: only assistant turns carry loss here .* make it an assistant turn"),
        (_row(_user(), _assistant(loss=True), loss_mask=[1, 1]),
         r"loss_mask\[0\]: expected 0 on a 'user' message, got the row's loss_mask entry \(1\)"),
        (_row(_user(), _assistant(weight=0.5)),
         r"messages\[1\]\.weight: expected a training flag, 0 or 1 \(true or false\), got 0\.5\. .*no fractional"),
        (_row(_user(), _assistant(loss="no")), r"messages\[1\]\.loss: expected a training flag, .* got 'no'"),
        (_row(_user(), _assistant(weight=0, loss=True)),
         r"messages\[1\]\.loss: conflicting training flags: loss is true but weight 0 says do not train"),
        (_row(_user(), _assistant(weight=1), loss_mask=[0, 0]),
         r"messages\[1\]\.weight: conflicting training flags: weight is 1 but the row's loss_mask entry \(0\)"),
        (_row(_user(), _assistant(), loss_mask=[0, 1, 0]),
         r"loss_mask: expected one entry per message of messages \(2\), got 3"),
        (_row(_user(), _assistant(), loss_mask="01"), r"loss_mask: expected a list of 0/1, one per message, got str"),
        ({"prompt": "hi", "final_text": "hello", "loss_mask": [0, 1]},
         r"loss_mask: expected a loss_mask only beside a message list, got one on a row whose conversation is "
         r"rebuilt from its rollout"),
    ],
)
def test_flags_that_cannot_be_honoured_are_refused_by_name(tmp_path: Path, load: Any, row: dict[str, Any],
                                                           message: str) -> None:
    with pytest.raises(ExportFormatError, match=r"^rows row 0, " + message):
        export_dataset([row], str(tmp_path / "rows.jsonl"))
    with pytest.raises(ExportFormatError, match=r"r\.jsonl line 1 \(row 0\), " + message):
        load(write_jsonl(tmp_path / "r.jsonl", [row]))


def test_a_system_prompt_option_and_a_rows_own_system_shift_nothing(tmp_path: Path, load: Any) -> None:
    rows = [{"conversations": [_user(), _assistant("a", weight=0), _user(), _assistant("b")], "system": "Rules."}]
    ds = load(write_jsonl(tmp_path / "r.jsonl", rows), system_prompt="Global.")
    assert [m["role"] for m in ds[0]["messages"]] == ["system", "system", "user", "assistant", "user", "assistant"]
    assert ds["loss_mask"] == [[0, 0, 0, 0, 0, 1]]
