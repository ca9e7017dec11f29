"""The Hub route (issue 46): a published repo, loaded by name where this package is not installed and trained with
TRL 1.16's default ``SFTTrainer``, trains what the audit and the card say, or the card and the audit say "not
exact" with TRL's figure.

Rows with ``<think>`` blocks, ``reasoning_content`` with tool calls, text-only content parts and plain multi-turn
talk are loaded with ``load_dataset("whileai/export")``, audited with a tokenizer trained here for each template
(Qwen3 as trl ships it, Qwen2.5, Llama 3.1, gpt-oss, Gemma 3) and published with that tokenizer to the local hub
(one publishing process for every repo). One process where ``import whileai_datasets`` fails then loads every
repo by name and builds ``SFTTrainer(args=SFTConfig(output_dir=...))`` on its default and its tokenized config:
the labels other than -100 of its prepared rows are counted there and compared here with ``audit(ds)``'s
supervised count and the card's figure. Functions without a ``test_`` prefix run in those client processes
(conftest: ``Identity.run``); this module imports nothing from whileai_datasets at its top level.
"""

from __future__ import annotations

import json
import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.hub.conftest import BLOCKED_IMPORT, blocked_import

pytestmark = pytest.mark.slow

CLIENT_TIMEOUT = 900.0
SCHEMA = [{"type": "function", "function": {"name": "lookup", "description": "Find an order.",
                                            "parameters": {"type": "object",
                                                           "properties": {"n": {"type": "integer"}}}}}]
#: Templates whose default config TRL trains exactly as marked. Qwen3 writes a <think> block into the last turn and
#: drops earlier reasoning: its rows are shaped (measured per row) until they train the mask. gpt-oss ends the last
#: turn with <|return|> where the conversation has <|end|>, and renders an earlier tool call's turn differently.
EXACT = {"qwen3", "qwen2_5", "llama3_1", "gemma3"}


# --- rows --------------------------------------------------------------------------------------------------
def _call(i: int) -> dict[str, Any]:
    return {"id": f"call_{i}", "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"n": i})}}


def _rows(tools: bool, images: bool = False) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"messages": [  # an image in the prompt: TRL's vision format
        {"role": "user", "content": [{"type": "image", "image": f"https://images.example.com/{i}.png"},
                                     {"type": "text", "text": f"what is in picture {i}?"}]},
        {"role": "assistant", "content": f"a cat number {i}"}]} for i in range(2 if images else 0)]
    for i in range(3):
        rows.append({"messages": [  # <think> in the content of two turns: the earlier one before a later question
            {"role": "system", "content": "Be brief."}, {"role": "user", "content": f"order {i}?"},
            {"role": "assistant", "content": f"<think>look up {i}</think>order {i} ships"},
            {"role": "user", "content": f"and order {i + 10}?"},
            {"role": "assistant", "content": f"<think>again {i}</think>order {i + 10} waits"}]})
        rows.append({"messages": [  # plain multi-turn talk
            {"role": "user", "content": f"hello {i}"}, {"role": "assistant", "content": f"hi there {i}"},
            {"role": "user", "content": f"bye {i}"}, {"role": "assistant", "content": f"goodbye {i}"}]})
        rows.append({"messages": [  # text-only content parts
            {"role": "user", "content": [{"type": "text", "text": f"parts ask {i}"}]},
            {"role": "assistant", "content": [{"type": "text", "text": f"parts answer {i}"}]}]})
        rows.append({"messages": [  # reasoning_content, no tool
            {"role": "user", "content": f"why {i}?"},
            {"role": "assistant", "content": f"because {i}", "reasoning_content": f"thinking about {i}"}]})
        if tools:
            rows.append({"messages": [  # reasoning_content beside a tool call, a tool result, an answer
                {"role": "system", "content": "Use the tools."}, {"role": "user", "content": f"find {i}"},
                {"role": "assistant", "content": "", "reasoning_content": f"need lookup {i}", "tool_calls": [_call(i)]},
                {"role": "tool", "tool_call_id": f"call_{i}", "content": f"found {i}"},
                {"role": "assistant", "content": f"it is {i}", "reasoning_content": f"got it {i}"}],
                "tools": SCHEMA})
    return rows


def _templates() -> dict[str, tuple[str, dict[str, Any], bool, bool]]:
    """name -> (template text, tokenizer's special tokens, whether the rows hold tool turns, and images)."""
    from tests.support.tiny_lm import LLAMA3_TOKENS, trl_template
    from whileai_datasets import ChatTemplate

    # Gemma 3 requires alternating user/assistant roles and renders no tool call: its rows hold no tool turn
    qwen2_5 = ChatTemplate.shipped("qwen2_5").text
    return {"qwen3": (trl_template("qwen3"), {}, True, False), "qwen2_5": (qwen2_5, {}, True, False),
            "llama3_1": (ChatTemplate.shipped("llama3_1").text, LLAMA3_TOKENS, True, False),
            "gptoss": (ChatTemplate.shipped("gptoss").text, {}, True, False),
            "gemma3": (ChatTemplate.shipped("gemma3").text, {}, False, False), "vision": (qwen2_5, {}, False, True)}


# --- client side -------------------------------------------------------------------------------------------
def publish_each(cases: list[dict[str, Any]], token: str) -> list[dict[str, Any]]:
    """Each case's saved rows published with its tokenizer: publish's result, or the error it raised."""
    from datasets import load_from_disk
    from transformers import AutoTokenizer

    from whileai_datasets.hub import publish

    out = []
    for case in cases:
        tokenizer = AutoTokenizer.from_pretrained(case["tokenizer"]) if case.get("tokenizer") else None
        try:
            result = publish(load_from_disk(case["rows"]), case["repo_id"], token=token, tokenizer=tokenizer)
            out.append({"trainers": result["trainers"], "configs": result["configs"]})
        except Exception as err:  # noqa: BLE001  (the refusal a case expects)
            out.append({"error": f"{type(err).__name__}: {err}"})
    return out


def train_each(cases: list[dict[str, Any]], token: str, out: str) -> list[dict[str, Any]]:
    """Per case: the card, and per config what SFTTrainer with a default SFTConfig labels (or what it raised)."""
    from datasets import load_dataset
    from huggingface_hub import DatasetCard, hf_hub_download
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from tests.support.tiny_lm import tiny_causal_lm

    blocked = blocked_import()
    results = []
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*is deprecated", category=FutureWarning)
        for case in cases:
            tokenizer = AutoTokenizer.from_pretrained(case["tokenizer"])
            card = DatasetCard.load(hf_hub_download(case["repo_id"], "README.md", repo_type="dataset", token=token))
            found: dict[str, Any] = {"blocked": blocked, "card": str(card.text)}
            for config in case["configs"]:
                train = load_dataset(case["repo_id"], None if config == "default" else config, split="train",
                                     token=token)
                try:
                    trainer = SFTTrainer(model=tiny_causal_lm(len(tokenizer)), processing_class=tokenizer,
                                         args=SFTConfig(output_dir=str(Path(out) / case["name"] / config),
                                                        report_to=[], use_cpu=True),
                                         train_dataset=train)
                except Exception as err:  # noqa: BLE001  (TRL refusing or failing on the rows is what is measured)
                    found[config] = {"error": f"{type(err).__name__}: {err}"}
                    continue
                labels = trainer.train_dataset["labels"]
                found[config] = {"labelled": sum(sum(1 for x in row if x != -100) for row in labels)}
            results.append(found)
    return results


# --- the test machine ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def published(hub: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    import datasets
    from transformers import AutoTokenizer

    import whileai_datasets  # noqa: F401  (registers whileai/export)
    from tests.hub.conftest import TOKENS, Identity
    from tests.support.tiny_lm import train_tokenizer
    from whileai_datasets import audit

    root = tmp_path_factory.mktemp("hub-route")
    alice = Identity("alice", TOKENS["alice"], root / "alice", hub, timeout=CLIENT_TIMEOUT)
    cases: dict[str, dict[str, Any]] = {}
    for name, (template, special, tools, images) in _templates().items():
        rows = _rows(tools, images)
        source = root / f"{name}.jsonl"
        source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        ds = datasets.load_dataset("whileai/export", data_files=str(source), split="train",
                                   cache_dir=str(root / "cache"))
        tokenizer = train_tokenizer([json.dumps(r) for r in rows], chat_template=template, **special)
        tokenizer.save_pretrained(str(root / name / "tokenizer"))
        ds.save_to_disk(str(root / name / "rows"))
        cases[name] = {"name": name, "repo_id": f"alice/hub-route-{name}-{uuid.uuid4().hex[:8]}",
                       "rows": str(root / name / "rows"), "tokenizer": str(root / name / "tokenizer"),
                       "configs": ["default", "tokenized"], "audit": audit(ds, tokenizer=tokenizer, trl_default=True)}
    talk = {"messages": [{"role": "assistant", "content": "I open the talk."}, {"role": "user", "content": "ok"},
                         {"role": "assistant", "content": "fine"}]}
    (root / "opening.jsonl").write_text(json.dumps(talk) + "\n", encoding="utf-8")
    opening = datasets.load_dataset("whileai/export", data_files=str(root / "opening.jsonl"), split="train",
                                    cache_dir=str(root / "cache"))
    opening.save_to_disk(str(root / "opening"))
    cases["opening"] = {"name": "opening", "repo_id": f"alice/hub-route-opening-{uuid.uuid4().hex[:8]}",
                        "rows": str(root / "opening"), "configs": [], "audit": audit(opening),
                        "audit_tokenized": audit(opening, tokenizer=AutoTokenizer.from_pretrained(
                            cases["qwen2_5"]["tokenizer"]), trl_default=True)}
    listed = [{k: v for k, v in case.items() if not k.startswith("audit")} for case in cases.values()]
    for case, outcome in zip(cases.values(), alice.run(publish_each, cases=listed, token=alice.token)):
        case["published"] = outcome
    trained = [c for c in listed if "error" not in cases[c["name"]]["published"] and c["configs"]]
    trainer_machine = alice.on_a_training_machine()
    trainer_machine.timeout = CLIENT_TIMEOUT
    for case, outcome in zip(trained, trainer_machine.run(train_each, cases=trained, token=alice.token,
                                                          out=str(root / "sft"))):
        cases[case["name"]]["trained"] = outcome
    return cases


@pytest.mark.parametrize("name", ["qwen3", "qwen2_5", "llama3_1", "gptoss", "gemma3"])
def test_trl_default_trains_what_the_audit_and_the_card_say_or_both_say_not_exact(published, name):
    case = published[name]
    assert "error" not in case["published"], case["published"]
    trained, found = case["trained"], case["audit"]
    assert trained["blocked"] == BLOCKED_IMPORT
    supervised, card = found.supervised_tokens, " ".join(trained["card"].split())
    entry = found.trainers["trl-default"]
    said = case["published"]["trainers"]["trl-default"]  # what publish returns: the card's words, the audit's
    assert (said["exact"], said["how"]) == (entry["exact"], entry["how"])
    # the tokenized config: TRL trains exactly the audit's count, and the card says so
    assert trained["tokenized"] == {"labelled": supervised}
    assert f"**exact**, the {supervised} tokens the mask marks" in card
    default = trained["default"]
    if "error" in default:  # TRL cannot train the default config: both say "not exact" and why
        assert entry["exact"] is False and "under TRL's tokenization" in entry["how"]
        assert "**Not exact**: the chat template raises on" in card
        return
    labelled = default["labelled"]
    assert entry["trains_tokens"] == labelled  # the audit's figure is what TRL labels
    if labelled == supervised:
        assert entry["exact"] is True
        assert f"**Exact**: TRL labels {labelled} tokens, the {supervised} the mask marks" in card
    else:
        assert entry["exact"] is False
        said = f"TRL labels {labelled} tokens where the mask marks {supervised} ({labelled - supervised:+d} tokens)"
        assert said in entry["how"] and f"**Not exact**: {said}" in card
        assert "train on the `tokenized` config instead" in card
    assert "**Exact**" not in card or labelled == supervised
    assert (labelled == supervised) == (name in EXACT)


def test_the_audit_reports_first_in_publish_s_words_the_rows_publish_refuses(published):
    from whileai_datasets.hub.configs import OPENS_WITH_MARKED_TURN

    case = published["opening"]
    finding = case["audit"].findings["opens_with_marked_turn"]
    assert (finding.rows, finding.first) == (1, [0])
    assert OPENS_WITH_MARKED_TURN in finding.description
    assert case["published"]["error"].startswith(f"PublishError: split 'train', row 0, messages[0]: "
                                                 f"{OPENS_WITH_MARKED_TURN}")
    assert "opens-with-marked-turn" in case["audit"].format()
    # with a tokenizer, TRL's route on the published default config is not called exact while publish refuses
    entry = case["audit_tokenized"].trainers["trl-default"]
    assert entry["exact"] is False and entry["how"].startswith(f"publish refuses these rows (1): {OPENS_WITH_MARKED_TURN}")


def test_a_vision_dataset_is_not_called_exact_where_trl_cannot_train_it_with_a_text_model(published):
    case = published["vision"]
    trained, entry = case["trained"], case["audit"].trainers["trl-default"]
    card = " ".join(trained["card"].split())
    assert "vision-related" in trained["default"]["error"]  # TRL takes the images column for a vision dataset
    assert "**Not exact**: the rows carry an `images` column" in card and "**Exact**" not in card
    assert entry["exact"] is False and "`images` column" in entry["how"]
    supervised = case["audit"].supervised_tokens
    assert trained["tokenized"] == {"labelled": supervised}  # the config it names instead trains the audit's count
    assert "left out: the chat template cannot render or mask" in card  # qwen2_5 fails on the image parts
