"""The publishing machine's side of the trainer tests, and the comparison of what a trainer trains with our mask.

Rows are real whileai rollouts (the seeded demo agent, run offline), loaded with this package and
given three kinds of loss mask: every assistant turn, the final turn only, and every turn but the
final one (a marked turn followed by unmarked ones). They are published with a tokenizer trained
here, so the repo's `tokenized` config holds our mask for that tokenizer and template.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.tiny_lm import DEEPSEEK_V3_TOKENS, LLAMA3_TOKENS, LLAMA4_TOKENS, MISTRAL_TOKENS, train_tokenizer

#: The special tokens of each template family (`tests.support.tiny_lm`): the tokenizer must know a template's markers.
FAMILIES: dict[str, dict[str, Any]] = {"chatml": {}, "llama3": LLAMA3_TOKENS, "llama4": LLAMA4_TOKENS,
                                        "deepseek_v3": DEEPSEEK_V3_TOKENS, "mistral": MISTRAL_TOKENS}


def remask(row: dict[str, Any], index: int) -> dict[str, Any]:
    """Row `index`'s loss mask: every assistant turn, the final one only, or all but the final one, in turn."""
    assistant = [i for i, m in enumerate(row["messages"]) if m["role"] == "assistant"]
    kind = index % 3 if len(assistant) > 1 else 0
    marked = {0: assistant, 1: assistant[-1:], 2: assistant[:-1]}[kind]
    return {"loss_mask": [int(i in marked) for i in range(len(row["messages"]))]}


def canonical_rows(tmp_path: Path, load: Any, *, seed: int = 7) -> Any:
    """whileai's seeded agent's rollouts as canonical rows, with the three kinds of mask."""
    from tests.conftest import SYSTEM_PROMPT, TOOLS, seeded_rows, write_jsonl

    rows = seeded_rows(seed=seed, mode="rl", repeats=1, budget=24)
    canonical = load(write_jsonl(tmp_path / "rows.jsonl", rows), system_prompt=SYSTEM_PROMPT, tools=TOOLS)
    return canonical.map(remask, with_indices=True)


#: Text written beside a tool call, and a second assistant turn right after another (see `with_shapes`).
BESIDE_CALL = "Let me look that up first."
SECOND_TURN = "Is there anything else I can do?"


def with_shapes(row: dict[str, Any], index: int, beside_call: bool = True) -> dict[str, Any]:
    """Row `index` with, on every third row from the first, text beside its first tool call (when its
    first assistant turn with calls has none), and on every third row from the third a marked second
    assistant turn right after its last message (when that is an assistant turn): two shapes some
    trainers cannot train exactly (`hub/trainer_gaps.py`). With `remask`'s kinds, the text is on a
    marked turn (every turn marked) and in the history of later ones; the second turn follows an
    unmarked one (all but the final turn marked). ``beside_call=False`` leaves the text beside a call out
    (for a template that does not render it: `tokenize` refuses such a turn)."""
    messages, mask = [dict(m) for m in row["messages"]], list(row["loss_mask"])
    calling = [i for i, m in enumerate(messages) if m["role"] == "assistant" and m.get("tool_calls")]
    if beside_call and index % 3 == 0 and calling and not messages[calling[0]].get("content"):
        messages[calling[0]]["content"] = BESIDE_CALL
    if index % 3 == 2 and messages[-1]["role"] == "assistant":
        messages.append({**messages[-1], "content": SECOND_TURN, "tool_calls": None})
        mask.append(1)
    return {"messages": messages, "loss_mask": mask}


def tokenizer_for(canonical: Any, template: str, family: str, folder: Path) -> Any:
    """A tokenizer trained on the rows, with `family`'s special tokens and `template` as its chat template."""
    texts = [json.dumps(row, default=str) for row in canonical.to_list()]
    tokenizer = train_tokenizer(texts, chat_template=template, **FAMILIES[family])
    tokenizer.save_pretrained(str(folder))
    return tokenizer


def our_masks(canonical: Any, tokenizer: Any) -> list[dict[str, list[int]]]:
    """This package's own `tokenize` on the canonical rows: each row's ids and mask."""
    from whileai_datasets import transforms as wai_transforms

    tokenized = canonical.map(wai_transforms.tokenize(tokenizer), batched=True, remove_columns=canonical.column_names)
    return [{"input_ids": ids, "trained": [int(m) for m in mask]}
            for ids, mask in zip(tokenized["input_ids"], tokenized["assistant_masks"])]


def runs(row: dict[str, list[int]], tokenizer: Any) -> list[str]:
    """The decoded text of each run of consecutive trained tokens of a row (as the TRL check reads them)."""
    from tests.hub.test_trainer_side import _runs

    return _runs(row["input_ids"], [bool(flag) for flag in row["trained"]], tokenizer)


def differences(theirs: Sequence[dict[str, list[int]]], ours: Sequence[dict[str, list[int]]],
                tokenizer: Any) -> list[str]:
    """Where a trainer's supervised tokens are not exactly our mask's, row by row (empty when they are).

    Allowed, and only this: our mask also covers the whitespace a template writes right after a
    turn's end-of-turn token (ChatML's newline after `<|im_end|>`), which axolotl's
    `train_on_eos: turn` leaves out. Everything else counts: a token we mark that the trainer does
    not train, one it trains that we do not mark, a marked turn it drops. Rows with the same ids
    are compared token by token; rows the trainer renders differently, by each trained run's text.
    """
    if len(theirs) != len(ours):
        return [f"the trainer kept {len(theirs)} rows, our mask has {len(ours)}"]
    problems: list[str] = []
    for index, (their, our) in enumerate(zip(theirs, ours)):
        if their["input_ids"] == our["input_ids"]:
            problems += [f"row {index}: {p}" for p in _token_differences(their, our, tokenizer)]
            continue
        their_runs, our_runs = runs(their, tokenizer), runs(our, tokenizer)
        if len(their_runs) != len(our_runs) or not all(map(_same_run, their_runs, our_runs)):
            problems.append(f"row {index} (rendered differently): trained {their_runs}, our mask {our_runs}")
    return problems


def _token_differences(their: dict[str, list[int]], our: dict[str, list[int]], tokenizer: Any) -> list[str]:
    ids, theirs, ours = our["input_ids"], their["trained"], our["trained"]
    problems = []
    for at, (trained, marked) in enumerate(zip(theirs, ours)):
        if trained and not marked:
            problems.append(f"token {at} {tokenizer.decode(ids[at:at + 1])!r} trained, not in our mask")
        elif marked and not trained:
            separator = tokenizer.decode(ids[at:at + 1]).strip() == "" and at and theirs[at - 1] and ours[at - 1]
            if not separator:
                problems.append(f"token {at} {tokenizer.decode(ids[at:at + 1])!r} in our mask, not trained "
                                f"(context {tokenizer.decode(ids[max(0, at - 8):at + 2])!r})")
    return problems


def _same_run(theirs: str, ours: str) -> bool:
    return ours.startswith(theirs) and ours[len(theirs):].strip() == ""


def save_model_config(architecture: str, tokenizer: Any, folder: Path) -> None:
    """A tiny model config beside the tokenizer (no weights): ms-swift reads a model folder's config.json."""
    from transformers import LlamaConfig, Qwen2Config

    config = {"qwen2": Qwen2Config, "llama": LlamaConfig}[architecture](
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=8192, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    config.save_pretrained(str(folder))


def shipped_template(name: str) -> str:
    """A chat template this package ships (templates/NAME.jinja: the model's own template)."""
    from importlib.resources import files

    return (files("whileai_datasets.templates") / f"{name}.jinja").read_text(encoding="utf-8")


def final_turn_unmarked(canonical: Any) -> list[bool]:
    """Per row: whether its last assistant turn carries no loss."""
    rows = []
    for messages, mask in zip(canonical["messages"], canonical["loss_mask"]):
        last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
        rows.append(not mask[last])
    return rows


def with_final_end_of_turn(row: dict[str, list[int]], tokenizer: Any) -> dict[str, list[int]]:
    """`row` with its closing end-of-turn token (the last eos) and the whitespace after it marked too."""
    ids = row["input_ids"]
    last = max(i for i, token in enumerate(ids) if token == tokenizer.eos_token_id)
    assert tokenizer.decode(ids[last + 1:]).strip() == "", f"text after the last end-of-turn: {ids[last + 1:]}"
    return {"input_ids": ids, "trained": [1 if i >= last else m for i, m in enumerate(row["trained"])]}


def marked_turns(ours: Sequence[dict[str, list[int]]], canonical: Any, tokenizer: Any) -> list[dict[str, Any]]:
    """Each marked turn, in the order of the `sharegpt` rows (one per marked turn): its canonical row,
    its message index, whether it is the row's last message, and the text our mask trains of it."""
    turns = []
    for row, (mine, mask, messages) in enumerate(zip(ours, canonical["loss_mask"], canonical["messages"])):
        marked = [i for i, flag in enumerate(mask) if flag]
        texts = runs(mine, tokenizer)
        assert len(texts) == len(marked), f"row {row}: {len(marked)} marked turns, our mask has runs {texts}"
        turns += [{"row": row, "message": i, "last": i == len(messages) - 1, "text": text}
                  for i, text in zip(marked, texts)]
    return turns
