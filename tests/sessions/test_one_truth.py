"""On every session fixture, ``audit(path)``, ``audit(ds)`` and TRL's SFTTrainer labels after ``load_dataset`` +
``tokenize`` agree, with the Qwen3 and Llama 3.1 chat templates, and train more than zero tokens.

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
from whileai_datasets.tokenize.notices import BadMaskRowsWarning
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
def measured(loaded: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    texts = [_text(name) for name in FILES] * 2
    out: dict[tuple[str, str], Any] = {}
    for template, tokens in TEMPLATES.items():
        tokenizer = train_tokenizer(texts, chat_template=ChatTemplate.shipped(template).text, vocab_size=700,
                                    **tokens)
        marked_rows, columns = [], []
        for name in FILES:
            if (name, template) in NOTHING_TRAINS:
                out[name, template] = {"path": audit(str(DATA / name), tokenizer=tokenizer, **SAME),
                                       "ds": audit(loaded[name], tokenizer=tokenizer, **SAME), "marked": 0,
                                       "rows": 0}
                continue
            with warnings.catch_warnings():  # Llama 3.1 takes one call per turn: a row with two is named, not trained
                warnings.simplefilter("ignore", BadMaskRowsWarning)
                tokenized = loaded[name].map(tokenize(tokenizer, max_length=MAX_LENGTH, on_bad_row="skip"),
                                             batched=True)
            marked_rows += [tuple(i for i, m in zip(ids, mask) if m)
                            for ids, mask in zip(tokenized["input_ids"], tokenized["assistant_masks"])]
            columns.append(tokenized.select_columns(["input_ids", "attention_mask", "assistant_masks"]))
            out[name, template] = {
                "path": audit(str(DATA / name), tokenizer=tokenizer, **SAME),
                "ds": audit(loaded[name], tokenizer=tokenizer, **SAME),
                "marked": sum(map(sum, tokenized["assistant_masks"])), "rows": tokenized.num_rows,
            }
        labelled = _trainer_labels(tokenizer, columns, tmp_path_factory.mktemp(template))
        for name in FILES:
            out[name, template]["trained"] = labelled == sorted(marked_rows)
    return out


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
        name: str, template: str, measured: dict[tuple[str, str], Any]) -> None:
    pair = measured[name, template]
    assert pair["trained"], "SFTTrainer's labels differ from the tokenized masks"
    cause = NOTHING_TRAINS.get((name, template))
    assert (pair["marked"] == 0 and pair["ds"].count(cause) > 0) if cause else pair["marked"] > 0
    assert pair["ds"].supervised_tokens == pair["marked"]
    assert pair["path"].supervised_tokens == pair["marked"]
    assert pair["path"].count("bad_rows") == pair["ds"].count("bad_rows")
    assert pair["ds"].training_rows - pair["ds"].count("bad_rows") == pair["rows"]
