"""What the card says per trainer: the config it loads, what it trains there (measured on the
published rows), and the rows it cannot train exactly. The settings themselves (axolotl's YAML,
LLaMA-Factory's dataset_info.json entry, ms-swift's arguments, TRL's lines) are text in
templates/dataset_card.md; this module only computes the figures they cite."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from whileai_datasets.hub.card_configs import default_verdict
from whileai_datasets.hub.configs import CANONICAL, DEFAULT, TOKENIZED, Config
from whileai_datasets.hub.trainer_formats import MESSAGES, SHAREGPT
from whileai_datasets.hub.trainer_gaps import AXOLOTL, LLAMA_FACTORY, MS_SWIFT

#: Shapes LLaMA-Factory's converter skips the whole row for (the rest it renders its own way).
SKIPPED_BY_LF = ("consecutive_assistant_turns", "broken_alternation")
#: (key the template switches on, display name, config it loads, trainer_report key or None).
TRAINERS = (
    ("trl", "TRL", DEFAULT, None),
    ("unsloth", "Unsloth", DEFAULT, None),
    ("axolotl", "axolotl", MESSAGES, AXOLOTL),
    ("llama-factory", "LLaMA-Factory", SHAREGPT, LLAMA_FACTORY),
    ("ms-swift", "ms-swift", MESSAGES, MS_SWIFT),
    ("openai", "OpenAI / Together / Fireworks", MESSAGES, None),
)


def _total(config: Config | None, key: str) -> int:
    if config is None:
        return 0
    return sum(int(facts.get(key, 0)) for facts in config.facts.values())


def _rows(config: Config | None) -> int:
    return 0 if config is None else sum(config.rows.values())


def trainer_views(configs: Sequence[Config], trainers: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per trainer: key, name, config, what it trains here, and the shapes it reads differently."""
    by_name = {c.name: c for c in configs}
    marked = _total(by_name.get(CANONICAL), "marked_turns")
    weighted = _total(by_name.get(MESSAGES), "weighted_messages")
    conversations = _rows(by_name.get(MESSAGES))
    views = []
    for key, name, config, report_key in TRAINERS:
        if config not in by_name:
            continue
        report = trainers.get(report_key, {}) if report_key else {}
        inexact = [{"effect": hit["effect"], "rows": hit["rows"], "first": hit["first"]}
                   for hit in report.get("inexact", {}).values()]
        trains = _trains(key, marked, weighted, conversations, _rows(by_name.get(SHAREGPT)), by_name.get(TOKENIZED))
        if key in ("trl", "unsloth"):
            trains += f" On `default` this is {default_verdict(configs)[1]}."
        if key == "llama-factory":
            skipped = sum(int(report.get("inexact", {}).get(shape, {}).get("rows", 0)) for shape in SKIPPED_BY_LF)
            if skipped:
                trains += f" It skips {skipped} of these rows (below), so it trains {marked - skipped} of them."
        if inexact:
            trains += " Exact except on the rows below."
        views.append({"key": key, "name": name, "config": config, "trains": trains,
                      "unit": report.get("unit", "rows"), "inexact": inexact})
    return views


def _trains(key: str, marked: int, weighted: int, conversations: int, sharegpt: int,
            tokenized: Config | None) -> str:
    if key in ("trl", "unsloth"):
        text = (f"each row's `completion` with default settings (one row per marked turn, {marked} in all), "
                "as the chat template renders that turn when it ends the conversation")
        if key == "unsloth":
            text += "; load with Unsloth's model, train with TRL's `SFTTrainer` as is (no `train_on_responses_only`)"
        if tokenized is not None:
            text += (f". On `tokenized`, the {_total(tokenized, 'trl_labels')} tokens whose `labels` are not "
                     f"-100 within its default max_length (the mask marks {_total(tokenized, 'marked_tokens')})")
        return text + "."
    if key == "llama-factory":
        return (f"with `mask_history: true`, the last turn of each of the {sharegpt} rows (one per marked turn, "
                f"{marked} in all), its history as context.")
    return (f"the {weighted} messages with weight 1 (`loss` true) in {conversations} conversations: the "
            f"{marked} marked turns.")
