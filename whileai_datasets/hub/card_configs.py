"""What the card says about each config: what it holds, what a trainer trains on it (measured on the
published rows), and the lines that load it into TRL on a machine with only datasets and TRL."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from whileai_datasets.hub import facts as config_facts
from whileai_datasets.hub.configs import CANONICAL, DEFAULT, PREFERENCE, TOKENIZED, Config
from whileai_datasets.hub.trainer_formats import MESSAGES, SHAREGPT

#: How the default config trains (also in README's publishing section); whether it is exact is measured.
COMPLETION_ROUTE = (
    "TRL tokenizes `prompt` with the generation prompt and `prompt + completion` without it, and labels only "
    "the tokens after their common prefix: the marked turn as the chat template renders it when it ends the "
    "conversation, once per turn, every earlier turn as context."
)
NOT_MEASURED = (
    "not measured: publish was given no tokenizer. This is exact only on a chat template that renders a "
    "conversation's beginning as a prefix of the whole and a turn the same whether it is last or not; a template "
    "that writes a <think> block into the last turn or drops earlier turns' reasoning (Qwen3's) trains more or "
    "other tokens than the mask marks. Publish with tokenizer= to measure it and to get the `tokenized` config"
)


#: Where the default config is not exact: the config to train on (the audit says it in the same words).
TOKENIZED_INSTEAD = "train on the `tokenized` config instead: its `labels` are the mask"


def default_verdict(configs: Sequence[Config]) -> tuple[bool | None, str]:
    """Whether TRL's default `SFTTrainer` trains the default config exactly as marked, and the words for it
    (the audit says the same, ``hub.facts.trl_verdict``); None: not measured (no tokenizer)."""
    by_name = {c.name: c for c in configs}
    default, tokenized = by_name.get(DEFAULT), by_name.get(TOKENIZED)
    summed: dict[str, int] = {}
    for split in (default.facts.values() if default is not None else ()):
        for key, value in split.items():
            summed[key] = summed.get(key, 0) + int(value)
    if "marked_tokens" not in summed and not summed.get("vision_rows"):
        parts = summed.get("parts_rows", 0)
        return None, NOT_MEASURED + (f". {parts} rows hand the template content as a list of parts, which a template "
                                     "that concatenates strings (Qwen2.5's, gpt-oss's) fails on" if parts else "")
    return config_facts.trl_verdict(summed, instead_of_default(tokenized))


def instead_of_default(tokenized: Config | None) -> str:
    """Which config to train on where the default one is not exact."""
    if tokenized is None:
        return "publish with tokenizer= for a `tokenized` config, whose labels are the mask"
    labels, marked = _total(tokenized.facts, "trl_labels"), _total(tokenized.facts, "marked_tokens")
    text = TOKENIZED_INSTEAD
    if labels is not None and marked is not None and labels != marked:
        text += (f" ({marked} tokens; SFTConfig's default max_length {config_facts.TRL_MAX_LENGTH} keeps {labels} "
                 "of them: pass max_length=None)")
    return text


def _total(facts: Mapping[str, Mapping[str, Any]], key: str) -> int | None:
    """`key` summed over the splits; None when a split did not measure it."""
    total = 0
    for split in facts.values():
        value = split.get(key)
        if value is None:
            return None
        total += int(value)
    return total if facts else None


def _summed(facts: Mapping[str, Mapping[str, Any]], key: str) -> int:
    """`key` summed over the splits, 0 where a split has none."""
    return sum(int(split.get(key, 0)) for split in facts.values())


def salvage_text(rows: int, cut: int) -> str:
    """What a publish with ``salvage=True`` kept of the conversations the chat template cannot take whole."""
    if not rows:
        return ""
    return (f" Salvaged (`salvage=True`): {rows} conversations the chat template cannot take whole train what it "
            "takes of them (parallel calls one per turn, a turn it renders only partly kept as context, else the "
            f"turns before the one it cannot take); their {cut} loss-carrying turns kept as context or cut do not "
            "train (the audit with salvage=True names each row under salvaged, and each step).")


def _share(part: int, whole: int) -> str:
    return f"{part} of {whole}" + (f" ({100 * part / whole:.1f}%)" if whole else "")


def _name(obj: Any, fallback: str) -> str:
    name = getattr(obj, "name_or_path", None) or getattr(obj, "name", None)
    return f"`{name}`" if name else fallback


def _load_call(repo_id: str, config: str, split: str) -> str:
    name = "" if config == DEFAULT else f', "{config}"'
    return f'load_dataset("{repo_id}"{name}, split="{split}")'


def _code(repo_id: str, config: Config, private: bool) -> str:
    split = next(iter(config.rows))
    login = ["# a private repo: run `hf auth login` (or set HF_TOKEN) with read access first"] if private else []
    load = _load_call(repo_id, config.name, split)
    if config.name == CANONICAL:  # for analysis: no trainer lines (TRL would train every token)
        return "\n".join(["from datasets import load_dataset", "", *login, f"rows = {load}",
                          'marked = sum(sum(mask) for mask in rows["loss_mask"])'])
    if config.name in (MESSAGES, SHAREGPT):  # read by other trainers: their settings are under "Which trainer"
        return "\n".join(["from datasets import load_dataset", "", *login, f"rows = {load}"])
    if config.name == PREFERENCE:
        body = ["from datasets import load_dataset", "from trl import DPOConfig, DPOTrainer", "", *login,
                f"pairs = {load}",
                ('trainer = DPOTrainer(model="Qwen/Qwen2.5-0.5B-Instruct", args=DPOConfig(output_dir="dpo"), '
                 "train_dataset=pairs)")]
    else:
        body = ["from datasets import load_dataset", "from trl import SFTConfig, SFTTrainer", "", *login,
                f"train = {load}",
                ('trainer = SFTTrainer(model="Qwen/Qwen2.5-0.5B-Instruct", args=SFTConfig(output_dir="sft"), '
                 "train_dataset=train)")]
        if config.name == TOKENIZED:
            body[-1] += "  # the model must use the tokenizer these ids come from"
    return "\n".join([*body, "trainer.train()"])


def _default_text(config: Config, canonical: Config | None, tokenizer: Any, template: Any,
                  verdict: tuple[bool | None, str]) -> tuple[str, str]:
    rows = _total(config.facts, "rows") or 0
    marked = _total(canonical.facts, "marked_turns") if canonical else None
    holds = ("Conversational prompt/completion rows: `prompt` is every message before a loss-carrying "
             "assistant turn, `completion` is that turn alone (tool-call arguments as JSON values, as chat "
             f"templates expect). One row per loss-carrying turn: {rows} rows")
    if canonical is not None:
        holds += f" from {_total(canonical.facts, 'rows')} conversations"
    holds += "."
    trains = ("TRL's `SFTTrainer` with default settings trains the completion of each row and nothing else "
              f"({rows if marked is None else marked} loss-carrying assistant turns, one row each). {COMPLETION_ROUTE} ")
    supervised, tokens = _total(config.facts, "supervised_tokens"), _total(config.facts, "tokens")
    if verdict[0] is not None and supervised is not None and tokens is not None:
        trains += (f"Measured by running TRL's tokenization with the tokenizer {_name(tokenizer, 'given to publish')} "
                   f"and {_name(template, 'its chat template')}: the labels cover {_share(supervised, tokens)} "
                   "tokens. ")
    shaped, left_out = _total(config.facts, "shaped_rows"), _total(config.facts, "rows_left_out")
    if verdict[0] is not None:
        holds += (" Each row is in the form whose labels under TRL's tokenization are the mask's tokens of its turn, "
                  "measured at publish: as exported or, where the chat template renders a turn differently at the "
                  "end of a conversation, without the reasoning it leaves out of that turn inside the conversation "
                  "and/or with `chat_template_kwargs` (`{\"enable_thinking\": false}`, which TRL hands the template)"
                  f": {shaped or 0} rows carry such kwargs. The forms are measured for {_name(template, 'the chat template')}"
                  " of the tokenizer given to publish; the `canonical` config keeps every row as exported.")
    salvaged, cut = _summed(config.facts, "salvaged_rows"), _summed(config.facts, "salvaged_turns_cut")
    if left_out and left_out > cut:
        holds += (f" {left_out - cut} loss-carrying turns are left out: the chat template cannot render or mask their "
                  "conversation (the audit's bad-rows finding names each, with the template's own message).")
    holds += salvage_text(salvaged, cut)
    exact, said = verdict
    return holds, trains + ("**Exact**" if exact else "**Not exact**" if exact is False else "**Not measured**") \
        + said[said.index(":"):] + "."


def _canonical_text(config: Config) -> tuple[str, str]:
    marked, messages = _total(config.facts, "marked_turns") or 0, _total(config.facts, "messages") or 0
    unmarked = _total(config.facts, "rows_without_marked_turn") or 0
    holds = ("The rows as exported: `messages` (each message a JSON object with exactly its own keys; "
             "tool-call arguments as JSON text, as whileai writes them), `loss_mask` (one 0/1 per message) and "
             f"the carried keys. `loss_mask` marks {_share(marked, messages)} messages"
             + (f"; {unmarked} rows mark none and are not in the default config." if unmarked else "."))
    trains = ("For analysis. A trainer reads no `loss_mask`: `SFTTrainer` with default settings trains every "
              "token of these `messages`. Train on the default config instead.")
    return holds, trains


def _preference_text(config: Config) -> tuple[str, str]:
    pairs = sum(config.rows.values())
    holds = (f"TRL's preference rows: `prompt` (the messages both sides share), `chosen` and `rejected` (one "
             f"assistant turn each). {pairs} pairs.")
    trains = ("TRL's `DPOTrainer` with default settings compares the chosen and the rejected turn on their own "
              "tokens; the prompt is context and carries no loss.")
    return holds, trains


def _tokenized_text(config: Config, tokenizer: Any, template: Any, default: Config) -> tuple[str, str]:
    marked, tokens = _total(config.facts, "marked_tokens") or 0, _total(config.facts, "tokens") or 0
    who = _name(tokenizer, "given to publish")
    holds = (f"`input_ids`, `attention_mask`, `assistant_masks` and `labels` (-100 where `assistant_masks` is 0) "
             f"for the tokenizer {who} and "
             f"{_name(template, 'its chat template')}, made by this package's token mask from `loss_mask`: "
             f"{_share(marked, tokens)} tokens are marked.")
    labels = _total(config.facts, "trl_labels")
    trains = ("`SFTTrainer` with default settings trains the tokens whose `labels` are not -100 (the `assistant_masks` "
              "tokens)")
    if labels is not None and labels != marked:
        trains += (f": **not exact** with its default max_length {config_facts.TRL_MAX_LENGTH}, which keeps {labels} "
                   f"of the {marked} ({labels - marked:+d} tokens); pass `SFTConfig(max_length=None)`")
    else:
        trains += f": **exact**, the {marked} tokens the mask marks"
    trains += "."
    left_out = _total(config.facts, "rows_left_out")
    if left_out:
        trains += (f" {left_out} rows with a loss-carrying turn are left out: the chat template cannot render or mask "
                   "them (the audit's bad-rows finding names each, with the template's own message).")
    trains += salvage_text(_summed(default.facts, "salvaged_rows"), _summed(default.facts, "salvaged_turns_cut"))
    supervised, default_tokens = _total(default.facts, "supervised_tokens"), _total(default.facts, "tokens")
    if supervised is not None and default_tokens is not None:
        verdict = "the same count" if supervised == marked else f"a difference of {supervised - marked:+d}"
        trains += (f" On the default config TRL labels {supervised} tokens against {marked} marked here: {verdict}. "
                   f"A pass over these rows processes {tokens} tokens; over the default config, whose rows repeat the "
                   f"earlier turns of their conversation, {default_tokens}.")
    return holds, trains + " Only valid with this tokenizer."


def _messages_text(config: Config, canonical: Config | None) -> tuple[str, str]:
    rows, weighted = _total(config.facts, "rows") or 0, _total(config.facts, "weighted_messages") or 0
    messages = _total(config.facts, "messages") or 0
    unmarked = _total(canonical.facts, "rows_without_marked_turn") if canonical else None
    holds = ("Whole conversations in OpenAI chat shape (tool-call arguments as JSON values) with `tools`; every "
             "message carries `weight` (1 on a loss-carrying turn, 0 elsewhere) and `loss` (the same as a bool). "
             f"{rows} conversations, {_share(weighted, messages)} messages with weight 1"
             + (f"; the {unmarked} rows that mark no turn are left out." if unmarked else "."))
    trains = ("For trainers that read a per-message flag: axolotl (`message_field_training: weight`), ms-swift "
              "(`loss`), and the OpenAI, Together and Fireworks formats (`weight`); see \"Which trainer\". A "
              "trainer that ignores the flags (`SFTTrainer` on `messages`) trains every token.")
    return holds, trains


def _sharegpt_text(config: Config) -> tuple[str, str]:
    rows = _total(config.facts, "rows") or 0
    holds = ("LLaMA-Factory's sharegpt rows: `conversations` of `{from, value}` (human, gpt, function_call, "
             "observation), `system` and `tools` (JSON text). One row per loss-carrying turn, ending at that turn: "
             f"{rows} rows. Plain strings only, so it loads on datasets 4.0 (LLaMA-Factory's pin).")
    trains = ("LLaMA-Factory with `mask_history: true` trains the last turn of each row, so each marked turn "
              "once; without it, every assistant turn of the history too.")
    return holds, trains


def config_views(configs: Sequence[Config], *, repo_id: str, private: bool, tokenizer: Any = None,
                 template: Any = None) -> list[dict[str, Any]]:
    """Per config: name, rows per split, what it holds, what a trainer trains, and the TRL lines."""
    by_name = {c.name: c for c in configs}
    views = []
    for config in configs:
        if config.name == DEFAULT:
            holds, trains = _default_text(config, by_name.get(CANONICAL), tokenizer, template,
                                          default_verdict(configs))
        elif config.name == CANONICAL:
            holds, trains = _canonical_text(config)
        elif config.name == PREFERENCE:
            holds, trains = _preference_text(config)
        elif config.name == MESSAGES:
            holds, trains = _messages_text(config, by_name.get(CANONICAL))
        elif config.name == SHAREGPT:
            holds, trains = _sharegpt_text(config)
        else:
            holds, trains = _tokenized_text(config, tokenizer, template, by_name[DEFAULT])
        views.append({"name": config.name, "holds": holds, "trains": trains,
                      "splits": ", ".join(f"{name} {rows}" for name, rows in config.rows.items()),
                      "code": _code(repo_id, config, private),
                      "features": "\n".join(f"{k}: {v!r}" for k, v in config.features.items())})
    return views
