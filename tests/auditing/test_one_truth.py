"""One truth: what the audit counts is what TRL's SFTTrainer trains, on files of each real shape and templates
of each behaviour.

For every file x template pair: ``audit(path)`` = ``audit(ds)`` = the tokens ``tokenize(on_bad_row="skip")``
marks = the labels SFTTrainer computes loss on (one trainer per template over every file's rows, compared row
by row), all at the same ``max_length``; and the audit completes and names every row it cannot train, by
cause, with counts that add up. The files are written here (a few rows each, one shape per file, every file
with a row whose answer starts with a newline, which templates that trim content trim); the tokenizer is
trained on them (tests/support/tiny_lm.py) and the model is a one-layer one built from a config.

Pairs that need work outside the audit are marked xfail(strict) with what they need.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.support.tiny_lm import tiny_causal_lm, train_tokenizer
from whileai_datasets import Audit, ChatTemplate, audit
from whileai_datasets.tokenize.notices import BadMaskRowsWarning
from whileai_datasets.tokenize.row_failures import CAUSES
from whileai_datasets.tokenize.token_masks import tokenize

pytestmark = [
    pytest.mark.slow,
    # trl 1.16's SFTConfig sets a deprecated transformers alias itself
    pytest.mark.filterwarnings("ignore:`gradient_checkpointing` is deprecated:FutureWarning"),
]

MAX_LENGTH = 384
SCHEMA = {"type": "function", "function": {"name": "lookup", "description": "Find an order.",
                                           "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}}
#: A Mistral-v3-like template (mistral-common's tool-call format): tool-call ids must be 9 characters.
MISTRAL_NINE = (
    "{{- bos_token }}{%- for m in messages %}"
    "{%- if m.role == 'user' or m.role == 'system' %}{{- '[INST] ' + m.content + '[/INST]' }}"
    "{%- elif m.role == 'assistant' and m.tool_calls %}{{- '[TOOL_CALLS] [' }}"
    "{%- for call in m.tool_calls %}{%- if call.id is not defined or call.id | length != 9 %}"
    "{{- raise_exception('Tool call IDs should be alphanumeric strings with length 9!') }}{%- endif %}"
    "{{- '{\"name\": \"' + call.function.name + '\", \"arguments\": ' + call.function.arguments | tojson"
    " + ', \"id\": \"' + call.id + '\"}' }}{%- if not loop.last %}{{- ', ' }}{%- endif %}{%- endfor %}"
    "{{- ']' + eos_token }}"
    "{%- elif m.role == 'assistant' %}{{- ' ' + m.content + eos_token }}"
    "{%- elif m.role == 'tool' %}{{- '[TOOL_RESULTS] {\"content\": ' + m.content | tojson + ', \"call_id\": \"'"
    " + m.tool_call_id + '\"}[/TOOL_RESULTS]' }}{%- endif %}{%- endfor %}"
)
#: Each behaviour: Gemma 3 requires alternating roles (and renders no tool call), Llama 3.1 takes one tool
#: call per turn (and trims content), the Mistral-like one needs 9-character ids, Qwen2.5 concatenates strings.
TEMPLATES = {"gemma3": lambda: ChatTemplate.shipped("gemma3").text,
             "llama3_1": lambda: ChatTemplate.shipped("llama3_1").text,
             "mistral_nine": lambda: MISTRAL_NINE, "qwen2_5": lambda: ChatTemplate.shipped("qwen2_5").text}


def _call(i: int, k: int = 0) -> dict[str, Any]:
    return {"id": f"call_{i:03d}{k}abcdefgh", "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"n": i + k})}}


def _talk(i: int, answer: str | list[dict[str, str]], question: Any = None) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You are a careful support agent."},
            {"role": "user", "content": question or f"where is order {i}?"},
            {"role": "assistant", "content": answer}]


def _tool_turns(i: int, calls: int) -> list[dict[str, Any]]:
    made = [_call(i, k) for k in range(calls)]
    return [{"role": "assistant", "content": "", "tool_calls": made},
            *({"role": "tool", "tool_call_id": c["id"], "content": f"order {i} ships on day {k}"}
              for k, c in enumerate(made))]


def _with_tools(i: int, calls: int) -> list[dict[str, Any]]:
    talk = _talk(i, f"order {i} ships soon")
    return talk[:2] + _tool_turns(i, calls) + talk[2:]


def _newline_row(i: int) -> dict[str, Any]:
    return {"messages": _talk(i, "\nIt ships tomorrow.")}  # a template that trims content trims this


def _sharegpt(i: int) -> dict[str, Any]:
    call = json.dumps({"name": "lookup", "arguments": {"n": i}})
    turns = [{"from": "human", "value": f"where is order {i}?"}]
    for k in range(3):
        turns += [{"from": "function_call", "value": call}, {"from": "observation", "value": f"step {k} done"}]
    return {"conversations": [*turns, {"from": "gpt", "value": f"order {i} ships soon"}], "tools": json.dumps([SCHEMA])}


SHAPES: dict[str, list[dict[str, Any]]] = {
    "own_tools": [{"messages": _with_tools(i, 1), "tools": [SCHEMA]} for i in range(5)]
    + [{"messages": _talk(9, "fine"), "tools": [SCHEMA]}, _newline_row(1)],
    "text_parts": [{"messages": _talk(i, [{"type": "text", "text": f"order {i} ships soon"}],
                                      [{"type": "text", "text": f"where is order {i}?"}])} for i in range(5)]
    + [{"messages": _talk(7, "plain text")}, _newline_row(2)],
    "parallel_calls": [{"messages": _with_tools(i, 2 if i % 2 else 1)} for i in range(6)] + [_newline_row(3)],
    "think": [{"messages": _talk(i, f"<think>order {i}: look it up first</think>order {i} ships soon")}
              for i in range(5)] + [_newline_row(4)],
    "conversations_tool_calls": [_sharegpt(i) for i in range(5)] + [{"conversations": [
        {"from": "human", "value": "hi"}, {"from": "gpt", "value": "\nhello"}]}],
}
#: The options every path is given: load_dataset and tokenize keep <think> blocks, so the audit is told to.
SAME = {"max_length": MAX_LENGTH, "strip_think": False}
#: Pairs where the audit's count differs from what trains today, and what they need (none: the export's
#: pipeline, which the audit runs, keeps each row's own tool schemas as load_dataset does).
DIFFERS: dict[tuple[str, str], str] = {}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("shapes")
    out = {}
    for shape, rows in SHAPES.items():
        out[shape] = root / f"{shape}.jsonl"
        out[shape].write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def loaded(files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import datasets

    cache = str(tmp_path_factory.mktemp("cache"))
    return {shape: datasets.load_dataset("whileai/export", data_files=str(path), split="train", cache_dir=cache)
            for shape, path in files.items()}


@pytest.fixture(scope="module")
def tokenizers() -> dict[str, Any]:
    texts = [json.dumps(r) for rows in SHAPES.values() for r in rows] * 3
    out = {}
    for name, text in TEMPLATES.items():
        tokenizer = train_tokenizer(texts, chat_template=text(), vocab_size=500, bos_token="<|endoftext|>")
        out[name] = tokenizer
    return out


@pytest.fixture(scope="module")
def measured(files: dict[str, Path], loaded: dict[str, Any], tokenizers: dict[str, Any],
             tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict[str, Any]]:
    """Per pair: both audits and the tokenized rows; per template, one SFTTrainer over every file's rows,
    whose labels are compared row by row with the masks (``trained``)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for name, tokenizer in tokenizers.items():
        rows = []
        for shape, path in files.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", BadMaskRowsWarning)
                tokenized = loaded[shape].map(tokenize(tokenizer, max_length=MAX_LENGTH, on_bad_row="skip"),
                                              batched=True, with_indices=True)
            out[shape, name] = {"path": audit(str(path), tokenizer=tokenizer, **SAME),
                                "ds": audit(loaded[shape], tokenizer=tokenizer, **SAME), "marked": 0,
                                "rows": tokenized.num_rows}
            if tokenized.num_rows:  # (a dataset whose every row was dropped has no token columns)
                out[shape, name]["marked"] = sum(map(sum, tokenized["assistant_masks"]))
                rows += [tuple(i for i, m in zip(ids, mask) if m)
                         for ids, mask in zip(tokenized["input_ids"], tokenized["assistant_masks"])]
                out[shape, name]["columns"] = tokenized.select_columns(
                    ["input_ids", "attention_mask", "assistant_masks"])
        labelled = _trainer_labels(tokenizer, out, name, tmp_path_factory.mktemp(name))
        for shape in files:
            out[shape, name]["trained"] = labelled == sorted(rows)
    return out


def _trainer_labels(tokenizer: Any, out: dict[Any, Any], name: str, where: Path) -> list[tuple[int, ...]]:
    """The token ids SFTTrainer computes loss on, per row, over every file's tokenized rows of ``name``."""
    import datasets
    from trl import SFTConfig, SFTTrainer

    train = datasets.concatenate_datasets([v["columns"] for (_, t), v in out.items() if t == name and "columns" in v])
    args = SFTConfig(output_dir=str(where), max_steps=1, per_device_train_batch_size=8, report_to=[],
                     use_cpu=True, save_strategy="no", max_length=MAX_LENGTH, seed=0, dataloader_drop_last=False)
    trainer = SFTTrainer(model=tiny_causal_lm(len(tokenizer)), args=args, train_dataset=train,
                         processing_class=tokenizer)
    labelled = []
    for batch in trainer.get_train_dataloader():
        for ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist()):
            labelled.append(tuple(i for i, label in zip(ids, labels) if label != -100))
    return sorted(labelled)


PAIRS = [pytest.param(shape, name, marks=pytest.mark.xfail(strict=True, reason=DIFFERS[shape, name])
                      if (shape, name) in DIFFERS else ()) for shape in SHAPES for name in TEMPLATES]


@pytest.mark.parametrize(("shape", "name"), PAIRS)
def test_the_audit_of_a_path_and_of_its_dataset_count_what_sft_trainer_trains(
        shape: str, name: str, measured: dict[tuple[str, str], dict[str, Any]]) -> None:
    pair = measured[shape, name]
    assert pair["trained"], "SFTTrainer's labels differ from the tokenized masks"
    assert pair["ds"].supervised_tokens == pair["marked"]
    assert pair["path"].supervised_tokens == pair["marked"]
    assert pair["path"].to_dict()["findings"]["bad_rows"]["rows"] == pair["ds"].count("bad_rows")


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", TEMPLATES)
def test_the_audit_completes_and_names_each_row_it_cannot_train_by_cause(
        shape: str, name: str, measured: dict[tuple[str, str], dict[str, Any]]) -> None:
    found: Audit = measured[shape, name]["ds"]
    causes = {cause: found.count(cause) for cause in CAUSES if found.count(cause)}
    assert sum(causes.values()) == found.count("bad_rows")
    assert found.training_rows - found.count("bad_rows") >= measured[shape, name]["rows"]
    for cause in causes:
        finding = found.to_dict()["findings"][cause]
        assert finding["first"] and finding["first_error"], cause
    text = found.format()
    assert all(f"{count:,} {cause.replace('_', '-')}" in text.splitlines()[0] for cause, count in causes.items())


def test_the_audit_with_its_defaults_counts_what_load_and_tokenize_train_with_theirs(
        files: dict[str, Path], tokenizers: dict[str, Any], measured: dict[tuple[str, str], dict[str, Any]]) -> None:
    found = audit(str(files["think"]), tokenizer=tokenizers["qwen2_5"], max_length=MAX_LENGTH)
    assert found.supervised_tokens == measured["think", "qwen2_5"]["marked"]


@pytest.mark.parametrize(("shape", "name"), [
    ("parallel_calls", "mistral_nine"),  # tool-call ids rewritten into the 9-character form
    ("own_tools", "mistral_nine"),
    ("think", "llama3_1"),  # content a template trims is not a refusal
    ("text_parts", "gemma3"),
    ("text_parts", "qwen2_5"),  # text-only parts joined into one string (``chat_template.masks.text_parts``)
    ("text_parts", "mistral_nine"),
])
def test_rows_that_differ_from_a_template_only_in_representation_train(
        shape: str, name: str, measured: dict[tuple[str, str], dict[str, Any]]) -> None:
    found: Audit = measured[shape, name]["ds"]
    assert found.count("bad_rows") == 0, {c: found.count(c) for c in CAUSES if found.count(c)}


@pytest.mark.parametrize("name", ["qwen2_5", "mistral_nine"])
def test_text_parts_joined_for_a_template_that_concatenates_train_the_tokens_of_the_same_text_as_a_string(
        name: str, files: dict[str, Path], tokenizers: dict[str, Any], measured: dict[tuple[str, str], dict[str, Any]],
        tmp_path: Path) -> None:
    import datasets

    from whileai_datasets.tokenize.views import table_views

    as_strings = tmp_path / "strings.jsonl"  # the same rows, each content part list written as its text
    rows = [{"messages": [{**m, "content": "".join(p["text"] for p in m["content"])} if isinstance(m["content"], list)
                          else m for m in row["messages"]]} for row in SHAPES["text_parts"]]
    as_strings.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    plain = datasets.load_dataset("whileai/export", data_files=str(as_strings), split="train",
                                  cache_dir=str(tmp_path / "cache"))
    transform = tokenize(tokenizers[name], max_length=MAX_LENGTH)
    strings = plain.map(transform, batched=True)
    parts = measured["text_parts", name]["columns"]
    assert parts["input_ids"] == strings["input_ids"]
    assert parts["assistant_masks"] == strings["assistant_masks"]
    found = measured["text_parts", name]["path"]
    assert found.count("text_parts_joined") == 5  # the five rows given as parts, named as an adaptation
    assert "adaptations" in found.format() and "text-parts-joined             5 rows" in found.format()
    assert measured["text_parts", name]["ds"].count("text_parts_joined") == 5
    assert found.count("template_drops_content_parts") == 0
    loaded = datasets.load_dataset("whileai/export", data_files=str(files["text_parts"]), split="train",
                                   cache_dir=str(tmp_path / "cache"))
    view, = table_views(transform, loaded.data.table.slice(0, 1))  # what show-mask prints of the row
    assert "order 0 ships soon" in "".join(text for text, trained in view.runs if trained)
    assert view.supervised == sum(strings["assistant_masks"][0])


def test_tool_call_ids_rewritten_for_a_template_that_requires_nine_characters_are_named(
        measured: dict[tuple[str, str], dict[str, Any]]) -> None:
    for shape, with_calls in (("parallel_calls", 6), ("own_tools", 5)):
        for source in ("path", "ds"):
            found: Audit = measured[shape, "mistral_nine"][source]
            assert found.count("tool_call_ids_rewritten") == with_calls  # every row with a call: ids of 16
            assert found.to_dict()["adaptations"] == ["tool_call_ids_rewritten"]
        assert measured[shape, "qwen2_5"]["ds"].count("tool_call_ids_rewritten") == 0  # ids as given


def test_a_template_that_renders_no_tool_call_is_named(files: dict[str, Path], tokenizers: dict[str, Any]) -> None:
    # a turn whose tool calls the template does not render would train its end marker alone: the row is
    # refused under its own cause, never counted as trained right
    no_calls = (Path(__file__).parent.parent / "chat_template" / "templates" / "chatml_no_tools.jinja").read_text()
    found = audit(str(files["conversations_tool_calls"]), tokenizer=tokenizers["qwen2_5"], template=no_calls, **SAME)
    findings = found.to_dict()["findings"]
    assert findings["template_drops_tool_calls"]["rows"] == 5 == found.count("bad_rows")
    assert "lookup" in findings["template_drops_tool_calls"]["first_error"]
    assert "5 template-drops-tool-calls" in found.format().splitlines()[0]


def test_a_trainer_with_a_shorter_max_length_is_caught_with_what_it_cuts(
        measured: dict[tuple[str, str], dict[str, Any]], tokenizers: dict[str, Any], tmp_path: Path) -> None:
    import datasets
    from trl import SFTConfig, SFTTrainer

    from whileai_datasets import TrainerCutWarning, check_max_length

    train = datasets.concatenate_datasets([measured[shape, "qwen2_5"]["columns"] for shape in SHAPES])
    assert check_max_length(train, MAX_LENGTH)["rows_cut"] == 0
    args = SFTConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=8, report_to=[],
                     use_cpu=True, save_strategy="no", max_length=64, seed=0)
    with pytest.warns(TrainerCutWarning, match=r"the trainer's max_length=64 cuts \d+ of 33 tokenized rows .* "
                                               r"pass SFTConfig\(max_length=\d+\) \(the longest row\) or None"):
        found = check_max_length(train, args)
    trainer = SFTTrainer(model=tiny_causal_lm(len(tokenizers["qwen2_5"])), args=args, train_dataset=train,
                         processing_class=tokenizers["qwen2_5"])
    labelled = sum(int((batch["labels"] != -100).sum()) for batch in trainer.get_train_dataloader())
    assert found["supervised_tokens_cut"] > 0
    assert labelled == found["supervised_tokens"] - found["supervised_tokens_cut"]  # what TRL really trains
