"""Each trainer, in its own venv with its own pinned release, trains exactly the turns our mask marks.

For axolotl 0.19.0, LLaMA-Factory 0.9.5 and ms-swift 4.6.0 (venvs.py): real whileai rollouts, with
three kinds of mask (publishing.py), are published with this package to the local hub
(tests/hub_server) with a tokenizer trained here on one of the trainer's chat templates; then, in
the trainer's venv (`python -I`, where `import whileai_datasets` fails), the named config is loaded
with plain `datasets` against the local hub and run through the trainer's own preprocessing:

* axolotl: the `messages` config through its `chat_template` prompt strategy with
  `message_field_training: weight`, `roles_to_train: []`, `train_on_eos: turn`;
* LLaMA-Factory: the `sharegpt` config, named in a dataset_info.json entry copied from the card,
  through its SFT data path (`get_dataset`: its hub loader on its datasets 4.0.0, its sharegpt
  converter, its `SupervisedDatasetProcessor` with `mask_history: true`), on rows that also hold
  the shapes it cannot train exactly (`publishing.with_shapes`), which publish must report;
* ms-swift: the `messages` config through its template's encode, which reads each message's `loss`.

The tokens the trainer supervises (labels != -100) are compared with what this package's own
`tokenize` marks on the canonical rows, and with the `labels` of the published `tokenized` config,
on three or more of each trainer's own templates.

TRL is checked in tests/hub/test_trainer_side.py. Unsloth is not run here: it needs a GPU at
import (it raises on a machine without one); its SFT path is TRL's SFTTrainer, so a user of
Unsloth reads the `default` or `tokenized` config and gets what the TRL test checks.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from tests.trainers import publish_client, publishing
from tests.trainers.conftest import run_trainer

pytestmark = pytest.mark.trainers

BLOCKED = "ModuleNotFoundError: No module named 'whileai_datasets'"


def _publish(alice: Any, repo_id: str, tmp_path: Path, load: Any, template: str, family: str,
             shapes: bool = False, beside_call: bool = True) -> tuple[Any, Any, dict[str, Any]]:
    """Publish the rows (with `publishing.with_shapes` if `shapes`, text beside a call if `beside_call`) with a
    tokenizer trained on `template`: the canonical rows, the tokenizer, publish's result."""
    canonical = publishing.canonical_rows(tmp_path, load)
    if shapes:
        canonical = canonical.map(publishing.with_shapes, with_indices=True, features=canonical.features,
                                  fn_kwargs={"beside_call": beside_call})
    tokenizer = publishing.tokenizer_for(canonical, template, family, tmp_path / "tokenizer")
    canonical.save_to_disk(str(tmp_path / "canonical"))
    result = alice.run(publish_client.publish_for_trainers, path=str(tmp_path / "canonical"), repo_id=repo_id,
                       token=alice.token, tokenizer_dir=str(tmp_path / "tokenizer"))
    return canonical, tokenizer, result


def _run_side(env: Any, alice: Any, side: str, repo_id: str, tmp_path: Path, **kwargs: Any) -> tuple[Any, Any]:
    """In the trainer's venv: SIDE's `tokenize` of the published repo, and the `tokenized` config's labels."""
    trained = run_trainer(env, alice, side, "tokenize", repo_id=repo_id, token=alice.token,
                          tokenizer_dir=str(tmp_path / "tokenizer"), **kwargs)
    return trained, run_trainer(env, alice, side, "published_labels", repo_id=repo_id, token=alice.token)


# --- axolotl -----------------------------------------------------------------------------------------
#: axolotl's own named templates that render tool calls (the rows call tools), and their token family;
#: `tokenizer_default+X` is axolotl's `chat_template: tokenizer_default` (the tokenizer's own template,
#: the usual setting for a model that ships one) on the model template X this package ships
AXOLOTL_TEMPLATES = {"qwen_25": "chatml", "llama4": "llama4", "qwen3": "chatml",
                     "tokenizer_default+llama3_1": "llama3"}
#: Measured differences, each an expected failure until axolotl or our mask changes.
AXOLOTL_DIFFERENCES = {
    "qwen3": "Qwen3's template writes an empty <think>\\n\\n</think>\\n\\n into each assistant turn after the "
             "last user message; our mask covers it as part of the turn, axolotl's turn diff leaves it untrained",
}


@pytest.mark.parametrize("template", [pytest.param(name, marks=pytest.mark.xfail(reason=AXOLOTL_DIFFERENCES[name],
                                                                             strict=True, raises=AssertionError))
                                      if name in AXOLOTL_DIFFERENCES else name for name in sorted(AXOLOTL_TEMPLATES)])
def test_axolotl_chat_template_strategy_trains_exactly_the_weighted_turns(axolotl_env, alice, repo_id, tmp_path,
                                                                         load, template):
    setting, _, shipped = template.partition("+")
    text = (publishing.shipped_template(shipped) if shipped else
            run_trainer(axolotl_env, alice, "axolotl_side", "template_text", name=template))
    canonical, tokenizer, _ = _publish(alice, repo_id, tmp_path, load, text, AXOLOTL_TEMPLATES[template])
    trained, published = _run_side(axolotl_env, alice, "axolotl_side", repo_id, tmp_path, template=setting)

    ours = publishing.our_masks(canonical, tokenizer)
    assert trained["blocked"] == BLOCKED
    assert trained["versions"]["axolotl"] == "0.19.0"
    assert published == ours
    problems = publishing.differences(trained["rows"], ours, tokenizer)
    assert problems == [], "\n".join(problems[:12])


# --- ms-swift ----------------------------------------------------------------------------------------
#: ms-swift template -> (the model's own jinja template this package ships, token family, model type)
#: (ms-swift's `chatml` template kept none of these rows: its encode dropped all 24, which call tools)
SWIFT_TEMPLATES = {"qwen2_5": ("qwen2_5", "chatml", "qwen2"), "llama3": ("llama3_1", "llama3", "llama"),
                   "llama3_2": ("llama3_2", "llama3", "llama")}


@pytest.mark.parametrize("template", sorted(SWIFT_TEMPLATES))
def test_ms_swift_template_encode_trains_exactly_the_turns_with_loss(ms_swift_env, alice, repo_id, tmp_path, load,
                                                                      template):
    jinja, family, architecture = SWIFT_TEMPLATES[template]
    canonical, tokenizer, _ = _publish(alice, repo_id, tmp_path, load, publishing.shipped_template(jinja), family)
    publishing.save_model_config(architecture, tokenizer, tmp_path / "tokenizer")
    trained, published = _run_side(ms_swift_env, alice, "ms_swift_side", repo_id, tmp_path, template=template,
                                   model_type=architecture)

    ours = publishing.our_masks(canonical, tokenizer)
    assert trained["blocked"] == BLOCKED
    assert trained["versions"]["ms-swift"] == "4.6.0"
    assert published == ours
    # ms-swift trains the template's closing end-of-turn even when the last turn has loss false: on
    # those rows (every third row here) it trains exactly our mask plus that token and its newline
    gap = publishing.final_turn_unmarked(canonical)
    assert any(gap) and not all(gap)
    expected = [publishing.with_final_end_of_turn(row, tokenizer) if unmarked else row for row, unmarked in
                zip(ours, gap)]
    problems = publishing.differences(trained["rows"], expected, tokenizer)
    assert problems == [], "\n".join(problems[:12])


# --- LLaMA-Factory -------------------------------------------------------------------------------------
#: LLaMA-Factory template -> (the model's own jinja template this package ships, token family, how
#: LLaMA-Factory's own tool-call format starts in that template)
LLAMAFACTORY_TEMPLATES = {"qwen": ("qwen2_5", "chatml", "<tool_call>"), "llama3": ("llama3_1", "llama3", '{"name": '),
                          "qwen3": ("qwen3", "chatml", "<tool_call>")}
#: What LLaMA-Factory's reasoning templates put before each row's last turn when it has no thought
EMPTY_THOUGHT = "<think>\n\n</think>\n\n"


def _llamafactory_trains(template: str, turn: dict[str, Any], message: dict[str, Any]) -> str:
    """The text LLaMA-Factory trains of a marked turn it keeps: our mask's text, but for what was measured.

    * Text beside a tool call: LLaMA-Factory writes it directly before its own call format, where Qwen2.5's
      and Qwen3's templates put a newline between. (Llama 3.1's template leaves such text out, so `tokenize`
      refuses the turn: those rows are published without it.)
    * `qwen3` (a reasoning template) with `mask_history` trains an empty thought at the start of each
      row's last turn; Qwen3's own template writes it only on the conversation's last message, so
      every marked turn but a conversation's last one gets it in addition.
    """
    text, content = turn["text"], message["content"]
    if message.get("tool_calls") and content:
        text = text.replace(content + "\n", content, 1)
    if template == "qwen3" and not turn["last"]:
        text = EMPTY_THOUGHT + text
    return text


def _doubled(messages: list[dict[str, Any]], upto: int) -> bool:
    """Whether messages[:upto + 1] hold two assistant turns in a row (LLaMA-Factory's converter skips the row)."""
    roles = [m["role"] for m in messages[:upto + 1]]
    return any(a == b == "assistant" for a, b in itertools.pairwise(roles))


@pytest.mark.parametrize("template", sorted(LLAMAFACTORY_TEMPLATES))
def test_llamafactory_supervised_processor_trains_exactly_each_marked_turn(llamafactory_env, alice, repo_id, tmp_path,
                                                                           load, template):
    jinja, family, call_format = LLAMAFACTORY_TEMPLATES[template]
    # Llama 3.1's template drops text written beside a tool call, and tokenize refuses a turn it would train
    # without it (template-drops-content): that shape goes only to the templates that render it
    canonical, tokenizer, result = _publish(alice, repo_id, tmp_path, load, publishing.shipped_template(jinja), family,
                                            shapes=True, beside_call=template != "llama3")
    trained, published = _run_side(llamafactory_env, alice, "llamafactory_side", repo_id, tmp_path, template=template)

    ours = publishing.our_masks(canonical, tokenizer)
    assert trained["blocked"] == BLOCKED
    assert {k: trained["versions"][k] for k in ("llamafactory", "datasets")} == {"llamafactory": "0.9.5",
                                                                                 "datasets": "4.0.0"}
    assert trained["settings"]["mask_history"] is True
    assert published == ours
    report = result["trainers"]["llama-factory"]
    turns = publishing.marked_turns(ours, canonical, tokenizer)  # one per sharegpt row, in its order
    messages = [canonical["messages"][turn["row"]] for turn in turns]
    assert report["rows"] == len(turns)

    # its converter skips exactly the rows with two assistant turns in a row, as publish reports
    skipped = [i for i, turn in enumerate(turns) if _doubled(messages[i], turn["message"])]
    assert skipped and trained["skipped"] == skipped
    doubled = report["inexact"]["consecutive_assistant_turns"]
    assert doubled["rows"] == len(skipped)
    assert doubled["first"].startswith(f"split 'train', row {turns[skipped[0]]['row']},")
    kept = [i for i in range(len(turns)) if i not in skipped]
    assert len(trained["rows"]) == len(kept)

    # it writes text beside a call directly before its call format in exactly the rows publish reports
    # (with_shapes puts the two shapes on different rows, so none of these was skipped)
    beside = [i for i, row in zip(kept, trained["rows"])
              if publishing.BESIDE_CALL + call_format in tokenizer.decode(row["input_ids"])]
    if template == "llama3":  # published without such text (see above): nothing to report
        assert not beside and "text_beside_tool_call" not in report["inexact"]
    else:
        reported = report["inexact"]["text_beside_tool_call"]
        assert beside and reported["rows"] == len(beside)
        assert reported["first"].startswith(f"split 'train', row {turns[beside[0]]['row']},")

    # and trains each kept row's last turn: exactly our mask's text of it, but for the measured differences
    problems = []
    for i, their in zip(kept, trained["rows"]):
        turn = turns[i]
        expected = _llamafactory_trains(template, turn, messages[i][turn["message"]])
        if publishing.runs(their, tokenizer) != [expected]:
            problems.append(f"row {turn['row']} message {turn['message']}: trained {publishing.runs(their, tokenizer)},"
                            f" expected {expected!r} (our mask: {turn['text']!r})")
    assert problems == [], "\n".join(problems[:12])
    differs = any(_llamafactory_trains(template, turns[i], messages[i][turns[i]["message"]]) != turns[i]["text"]
                  for i in kept)
    # the rows hold the measured differences (text beside calls), where it was published
    assert differs == (template != "llama3")
