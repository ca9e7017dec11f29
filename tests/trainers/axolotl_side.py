"""axolotl's side, run in its venv: the `messages` config through axolotl's own chat_template strategy.

The dataset entry is what a user writes under `datasets:` in axolotl's YAML (validated by axolotl's
own `SFTDataset` schema); the strategy comes from `axolotl.prompt_strategies.load`, and the rows go
through `axolotl.datasets.TokenizedPromptDataset`, as axolotl's dataset preparation does.
"""

from __future__ import annotations

from typing import Any

from side_common import blocked_import, load_config, published_labels, supervised, versions  # noqa: F401 (runs here)


def template_text(name: str) -> str:
    """axolotl's own named chat template (`chat_template: NAME` in its YAML)."""
    from axolotl.utils.chat_templates import get_chat_template

    return str(get_chat_template(name))


def dataset_entry(repo_id: str, template: str) -> dict[str, Any]:
    """The `datasets:` entry the card tells axolotl users to write, for one chat template."""
    return {"path": repo_id, "name": "messages", "split": "train", "type": "chat_template",
            "chat_template": template, "field_messages": "messages", "message_field_training": "weight",
            "roles_to_train": [], "train_on_eos": "turn"}


def tokenize(repo_id: str, token: str, tokenizer_dir: str, template: str) -> dict[str, Any]:
    from axolotl.datasets import TokenizedPromptDataset
    from axolotl.prompt_strategies import load
    from axolotl.utils.dict import DictDefault
    from axolotl.utils.schemas.datasets import SFTDataset
    from transformers import AutoTokenizer

    blocked = blocked_import()
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    entry = SFTDataset(**dataset_entry(repo_id, template)).model_dump(exclude_none=True)
    cfg = DictDefault({"sequence_len": 8192, "train_on_inputs": False, "chat_template": template})
    strategy = load("chat_template", tokenizer, cfg, entry)
    rows = load_config(repo_id, "messages", token)
    tokenized = TokenizedPromptDataset(strategy, rows)
    return {"blocked": blocked, "versions": versions("axolotl", "datasets", "transformers"),
            "rows": [supervised(r["input_ids"], r["labels"]) for r in tokenized],
            "columns": rows.column_names}
