"""On every session fixture, ``audit(path)``, ``audit(ds)`` and TRL's SFTTrainer labels after ``load_dataset`` +
``tokenize`` agree, with the Qwen3 and Llama 3.1 chat templates; with ``salvage=True`` every fixture trains more
than zero tokens (Llama 3.1 refuses five of them whole by default: text beside a call, two calls in one turn).

The tokenizers are trained on the fixtures (tests/support/tiny_lm.py); the model is a one-layer one built from a
config; SFTTrainer runs once per template over every fixture's tokenized rows, compared row by row.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.support.tiny_lm import LLAMA3_TOKENS, tiny_causal_lm, train_tokenizer
from whileai_datasets import ChatTemplate, audit
from whileai_datasets.tokenize.notices import SalvagedRowsWarning
from whileai_datasets.tokenize.row_failures import SALVAGES
from whileai_datasets.tokenize.token_masks import tokenize

pytestmark = [pytest.mark.filterwarnings("ignore:`gradient_checkpointing` is deprecated:FutureWarning")]

DATA = Path(__file__).resolve().parents[1] / "data" / "sessions"
#: Every fixture: a session file, or a folder of OpenHands conversations (one file per event)
FILES = sorted(p.name for p in DATA.iterdir())
MAX_LENGTH = 4096
TEMPLATES = {"qwen3": {}, "llama3_1": LLAMA3_TOKENS}
#: Files none of whose rows a template can train, and the cause the audit names: Llama 3.1 renders an assistant
#: turn's tool call and drops text said beside it (Copilot and Gemini CLI sessions say "I'll check ..." with a call)
NOTHING_TRAINS = {("copilot.jsonl", "llama3_1"): "template_drops_content",
                  ("gemini.jsonl", "llama3_1"): "template_drops_content",
                  # Llama 3.1 takes one call per turn, and each of these has a turn with two
                  ("cline.json", "llama3_1"): "single_tool_call_only",
                  ("droid.jsonl", "llama3_1"): "single_tool_call_only",
                  ("openhands.json", "llama3_1"): "single_tool_call_only",
                  # the OpenHands V1 folder: one row has a turn with two calls, the other says text beside each call
                  ("openhands_v1", "llama3_1"): "template_drops_content"}
#: load_dataset and tokenize keep reasoning as it is; the audit is told the same
SAME = {"max_length": MAX_LENGTH, "strip_think": False}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import datasets

    cache = str(tmp_path_factory.mktemp("cache"))
    return {name: datasets.load_dataset("whileai/export", data_files=_data_files(name), split="train",
                                        cache_dir=cache) for name in FILES}


def _data_files(name: str) -> str:
    """A fixture file, or every file under a fixture folder."""
    return str(DATA / name / "**") if (DATA / name).is_dir() else str(DATA / name)


def _text(name: str) -> str:
    return "\n".join(path.read_text() for path in sorted(DATA.glob(f"{name}/**/*.json"))) if (DATA / name).is_dir() \
        else (DATA / name).read_text()


@pytest.fixture(scope="module")
def measured(loaded: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, bool], Any]:
    """Per (file, template, salvage): both audits, what tokenize marks, the rows it names, and whether SFTTrainer's
    labels over every file's tokenized rows are those marks."""
    texts = [_text(name) for name in FILES] * 2
    out: dict[tuple[str, str, bool], Any] = {}
    for template, tokens in TEMPLATES.items():
        tokenizer = train_tokenizer(texts, chat_template=ChatTemplate.shipped(template).text, vocab_size=700,
                                    **tokens)
        chat = ChatTemplate.from_tokenizer(tokenizer)  # the tokenizer's own template, inspected once for every call
        for salvage in (False, True):
            marked_rows, columns = [], []
            for name in FILES:
                found, tokenized = _measure(loaded[name], DATA / name, tokenizer, chat, salvage)
                out[name, template, salvage] = found
                if tokenized is not None:
                    marked_rows += [tuple(i for i, m in zip(ids, mask) if m)
                                    for ids, mask in zip(tokenized["input_ids"], tokenized["assistant_masks"])]
                    columns.append(tokenized.select_columns(["input_ids", "attention_mask", "assistant_masks"]))
            if salvage and all(out[name, template, True]["marks"] == out[name, template, False]["marks"]
                               for name in FILES):  # salvage changed nothing: the same rows, the same labels
                labelled = out[FILES[0], template, False]["labelled"]
            else:
                labelled = _trainer_labels(tokenizer, columns, tmp_path_factory.mktemp(template))
            for name in FILES:
                out[name, template, salvage]["labelled"] = labelled
                out[name, template, salvage]["trained"] = labelled == sorted(marked_rows)
    return out


def _measure(ds: Any, path: Path, tokenizer: Any, chat: Any, salvage: bool) -> tuple[dict[str, Any], Any]:
    """One file's audits (of the path and of the loaded dataset) and tokenized rows (None where nothing trains)."""
    found: dict[str, Any] = {"path": audit(str(path), tokenizer=tokenizer, template=chat, salvage=salvage, **SAME),
                             "ds": audit(ds, tokenizer=tokenizer, template=chat, salvage=salvage, **SAME)}
    transform = tokenize(tokenizer, chat, max_length=MAX_LENGTH, on_bad_row="skip", salvage=salvage)
    with warnings.catch_warnings(record=True) as said:  # a row the template cannot take: named, not trained
        warnings.simplefilter("always")
        tokenized = ds.map(transform, batched=True, load_from_cache_file=False)
    found["named"] = [(f.row, f.salvage) for f in transform.failures.salvaged]
    found["warned"] = " ".join(str(w.message) for w in said if w.category is SalvagedRowsWarning)
    if not tokenized.num_rows:  # nothing trains: the columns tokenize adds are not there
        return {**found, "marked": 0, "marks": [], "rows": 0}, None
    found["marked"] = sum(map(sum, tokenized["assistant_masks"]))
    found["marks"] = list(zip(tokenized["input_ids"], tokenized["assistant_masks"]))
    found["rows"] = tokenized.num_rows
    return found, tokenized


def _trainer_labels(tokenizer: Any, columns: list[Any], where: Path) -> list[tuple[int, ...]]:
    import datasets
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(output_dir=str(where), max_steps=1, per_device_train_batch_size=8, report_to=[],
                     use_cpu=True, save_strategy="no", max_length=MAX_LENGTH, seed=0, dataloader_drop_last=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        trainer = SFTTrainer(model=tiny_causal_lm(len(tokenizer)), args=args,
                             train_dataset=datasets.concatenate_datasets(columns), processing_class=tokenizer)
    labelled = []
    for batch in trainer.get_train_dataloader():
        for ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist()):
            labelled.append(tuple(i for i, label in zip(ids, labels) if label != -100))
    return sorted(labelled)


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("name", FILES)
def test_audit_of_the_path_and_of_the_dataset_count_what_sft_trainer_trains(
        name: str, template: str, measured: dict[tuple[str, str, bool], Any]) -> None:
    pair = measured[name, template, False]
    assert pair["trained"], "SFTTrainer's labels differ from the tokenized masks"
    cause = NOTHING_TRAINS.get((name, template))
    assert (pair["marked"] == 0 and pair["ds"].count(cause) > 0) if cause else pair["marked"] > 0
    assert pair["ds"].supervised_tokens == pair["marked"]
    assert pair["path"].supervised_tokens == pair["marked"]
    assert pair["path"].count("bad_rows") == pair["ds"].count("bad_rows")
    assert pair["ds"].training_rows - pair["ds"].count("bad_rows") == pair["rows"]
    assert pair["named"] == [] and pair["ds"].count("salvaged") == 0  # salvage is off by default


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("name", FILES)
def test_with_salvage_every_session_trains_and_the_audits_count_what_sft_trainer_trains(
        name: str, template: str, measured: dict[tuple[str, str, bool], Any]) -> None:
    pair, off = measured[name, template, True], measured[name, template, False]
    assert pair["trained"], "SFTTrainer's labels differ from the tokenized masks"
    assert pair["marked"] > 0 and pair["marked"] >= off["marked"]
    assert pair["ds"].supervised_tokens == pair["path"].supervised_tokens == pair["marked"]
    for finding in ("bad_rows", "salvaged", *SALVAGES):
        assert pair["path"].findings[finding].rows == pair["ds"].findings[finding].rows, finding
        assert pair["path"].findings[finding].amount == pair["ds"].findings[finding].amount, finding
    assert pair["ds"].training_rows - pair["ds"].count("bad_rows") == pair["rows"]
    # each row salvage trains is named where it is tokenized and counted by the audit, step by step
    assert pair["ds"].count("salvaged") == len(pair["named"]) == off["ds"].count("salvageable")
    for row, salvage in pair["named"]:
        assert f"row {row} (" in pair["warned"] and salvage.describe() in pair["warned"]
    for step in SALVAGES:
        assert pair["ds"].count(step) == sum(step in dict(s.steps) for _, s in pair["named"])
        assert pair["ds"].findings[step].amount == sum(dict(s.steps).get(step, 0) for _, s in pair["named"])
    assert pair["ds"].count("salvaged") == off["ds"].count("bad_rows") - pair["ds"].count("bad_rows")
