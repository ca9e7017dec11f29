"""One renderer input: content parts of every layout reach a template in one form on every path.

For rows whose content is given as parts (text under ``text`` or under ``value``, LLaMA-Factory's layout; an
image part beside text, as the file wrote it or as the export's OpenAI rows write it) x real templates
(Qwen2.5, Qwen3, gpt-oss and Gemma 3 as shipped, and TRL's GLM-4 MoE, which writes nothing for an image):
``audit(path)``, ``audit(ds)``, show-mask (``row_examples``, what the command prints), ``tokenize`` after
``load_dataset`` and ``tokenize`` after ``load_dataset`` of the export's own file agree on the supervised
count and on which rows the template cannot take, and TRL's SFTTrainer labels are the tokenized masks.
An image part a template writes nothing for is a named finding, its rows counted.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.support.tiny_lm import tiny_causal_lm, train_tokenizer, trl_template
from whileai_datasets import ChatTemplate, audit, export_dataset
from whileai_datasets._options import TrainingOptions
from whileai_datasets.auditing.examples import row_examples
from whileai_datasets.errors import TemplateError
from whileai_datasets.tokenize.notices import BadMaskRowsWarning
from whileai_datasets.tokenize.token_masks import tokenize

pytestmark = [pytest.mark.filterwarnings("ignore:`gradient_checkpointing` is deprecated:FutureWarning")]

TEMPLATES = {"qwen2_5": lambda: ChatTemplate.shipped("qwen2_5").text, "qwen3": lambda: ChatTemplate.shipped("qwen3").text,
             "gptoss": lambda: ChatTemplate.shipped("gptoss").text, "gemma3": lambda: ChatTemplate.shipped("gemma3").text,
             "glm4moe": lambda: trl_template("glm4moe")}
#: What each template does with a text part beside an image part, read off its source by hand: Gemma 3 marks
#: the image; GLM-4 MoE writes the text and nothing for the image; Qwen3 writes nothing for a list that is
#: not all text; Qwen2.5 and gpt-oss concatenate strings and fail on it.
IMAGES = {"gemma3": "rendered", "glm4moe": "text_only", "qwen3": "dropped", "qwen2_5": None, "gptoss": None}


def _parts(key: str, text: str, image: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [{"type": "text", key: text}, *([image] if image else [])]


def _rows(key: str, image: Any = None) -> list[dict[str, Any]]:
    return [{"messages": [{"role": "system", "content": "You answer about orders."},
                          {"role": "user", "content": _parts(key, f"where is order {i}?", image and image(i))},
                          {"role": "assistant", "content": _parts(key, f"order {i} ships on day {i + 2}")}]}
            for i in range(3)] + [{"messages": [{"role": "user", "content": "plain question"},
                                                {"role": "assistant", "content": "plain answer"}]}]


SHAPES = {
    "text": _rows("text"),
    "value": _rows("value"),  # LLaMA-Factory's v1 layout
    "value_image": _rows("value", lambda i: {"type": "image", "image": f"photos/order-{i}.png"}),
    "openai_image": _rows("text", lambda i: {"type": "image_url", "image_url": {"url": f"https://x.test/{i}.png"}}),
}


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict[str, Any]]:
    import datasets

    root = tmp_path_factory.mktemp("parts")
    cache = str(root / "cache")
    files = {}
    for shape, rows in SHAPES.items():
        files[shape] = root / f"{shape}.jsonl"
        files[shape].write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        export_dataset(str(files[shape]), str(root / f"{shape}.openai.jsonl"), format="openai", strip_think=False)
    load = {name: datasets.load_dataset("whileai/export", data_files=str(path), split="train", cache_dir=cache)
            for name, path in [*files.items(), *((f"{s}.openai", root / f"{s}.openai.jsonl") for s in files)]}
    texts = [json.dumps(r) for rows in SHAPES.values() for r in rows] * 3
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for name, template in TEMPLATES.items():
        tokenizer = train_tokenizer(texts, chat_template=template(), vocab_size=400, bos_token="<|endoftext|>")
        chat = ChatTemplate.from_tokenizer(tokenizer)  # the tokenizer's own, its probes run once for every path
        columns = []
        for shape, path in files.items():
            pair: dict[str, Any] = {"path": audit(str(path), tokenizer=tokenizer, template=chat, strip_think=False),
                                    "ds": audit(load[shape], tokenizer=tokenizer, template=chat, strip_think=False),
                                    "shown": _shown(path, tokenizer, chat)}
            for kind, ds in (("loaded", load[shape]), ("exported", load[f"{shape}.openai"])):
                tokenized = _tokenized(ds, tokenizer, chat)
                pair[kind] = (sum(map(sum, tokenized["assistant_masks"])) if tokenized.num_rows else 0,
                              sorted(set(range(ds.num_rows)) - set(tokenized["row"] if tokenized.num_rows else [])))
                if kind == "loaded" and tokenized.num_rows:
                    columns.append(tokenized.select_columns(["input_ids", "attention_mask", "assistant_masks"]))
            out[shape, name] = pair
        trained = _trainer_labels(tokenizer, columns, root / name)
        marked = sorted(tuple(i for i, m in zip(ids, mask) if m) for c in columns
                        for ids, mask in zip(c["input_ids"], c["assistant_masks"]))
        for shape in files:
            out[shape, name]["trained"] = trained == marked
    return out


def _tokenized(ds: Any, tokenizer: Any, chat: ChatTemplate) -> Any:
    numbered = ds.add_column("row", list(range(ds.num_rows)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BadMaskRowsWarning)
        return numbered.map(tokenize(tokenizer, chat, on_bad_row="skip", keep_unsupervised=True), batched=True)


def _shown(path: Path, tokenizer: Any, chat: ChatTemplate) -> tuple[int, list[int]]:
    """What show-mask shows (``row_examples``, the rows it prints): the supervised tokens of the rows it
    renders, and the rows it cannot (each asked for alone once a run of them fails)."""
    rows = range(len(SHAPES[path.stem]))

    def shown(wanted: range | list[int]) -> int:
        return sum(example.view.supervised for example in row_examples(
            str(path), {row: "row" for row in wanted}, tokenizer=tokenizer, template=chat,
            options=TrainingOptions(strip_think=False)))

    try:
        return shown(rows), []
    except TemplateError:
        pass
    supervised, refused = 0, []
    for row in rows:
        try:
            supervised += shown([row])
        except TemplateError:
            refused.append(row)
    return supervised, refused


def _trainer_labels(tokenizer: Any, columns: list[Any], where: Path) -> list[tuple[int, ...]]:
    import datasets
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(output_dir=str(where), max_steps=1, per_device_train_batch_size=16, report_to=[],
                     use_cpu=True, save_strategy="no", max_length=1024, seed=0, dataloader_drop_last=False)
    trainer = SFTTrainer(model=tiny_causal_lm(len(tokenizer)), args=args,
                         train_dataset=datasets.concatenate_datasets(columns), processing_class=tokenizer)
    return sorted(tuple(i for i, label in zip(ids, labels) if label != -100)
                  for batch in trainer.get_train_dataloader()
                  for ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist()))


PAIRS = [(shape, name) for shape in SHAPES for name in TEMPLATES]


@pytest.mark.parametrize(("shape", "name"), PAIRS)
def test_every_path_counts_and_drops_the_same_rows_of_content_parts(
        shape: str, name: str, measured: dict[tuple[str, str], dict[str, Any]]) -> None:
    pair = measured[shape, name]
    supervised, dropped = pair["loaded"]
    bad = pair["path"].to_dict()["findings"]["bad_rows"]
    assert pair["trained"], "SFTTrainer's labels differ from the tokenized masks"
    assert pair["path"].supervised_tokens == pair["ds"].supervised_tokens == supervised
    assert pair["shown"] == (supervised, dropped)
    assert pair["exported"] == pair["loaded"]  # the export's OpenAI rows, loaded and tokenized, train the same
    assert [f["row"] for f in bad["first"]] == dropped and pair["ds"].count("bad_rows") == len(dropped)
    assert supervised > 0  # the row of plain strings trains on every template


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_text_parts_train_their_text_on_every_template_whatever_key_holds_it(
        name: str, measured: dict[tuple[str, str], dict[str, Any]]) -> None:
    text, value = measured["text", name], measured["value", name]
    assert value["loaded"] == text["loaded"] and value["loaded"][1] == []
    assert text["loaded"][0] > measured["text", name]["path"].supervised_tokens / 2 > 0


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_an_image_part_a_template_writes_nothing_for_is_named_with_its_rows(
        name: str, measured: dict[tuple[str, str], dict[str, Any]]) -> None:
    for shape in ("value_image", "openai_image"):
        found = measured[shape, name]["path"]
        assert found.template is not None and found.template["image_parts"] == IMAGES[name]
        findings = found.to_dict()["findings"]
        named = {"text_only": "template_drops_images", "dropped": "template_drops_content_parts"}.get(IMAGES[name])
        for finding in ("template_drops_images", "template_drops_content_parts"):
            rows = [f["row"] for f in findings[finding]["first"]]
            assert rows == ([0, 1, 2] if finding == named else []), (shape, finding)
        if IMAGES[name] is None:  # the template fails on the list: the rows are dropped by cause, not trained
            assert measured[shape, name]["loaded"][1] == [0, 1, 2]
