"""LLaMA-Factory's side, run in its venv: the `sharegpt` config through LLaMA-Factory's own SFT data path.

As a LLaMA-Factory user does it: the dataset_info.json entry is copied from the published card
(its `data/dataset_info.json` block) into a `data/` folder, and the training arguments name that
dataset with `mask_history: true`, as the card says. Then what `llamafactory-cli train` runs for
`stage: sft` before the model is built (`train/sft/workflow.py`): `get_train_args`,
`load_tokenizer`, `get_template_and_fix_tokenizer` and `get_dataset`, which loads the config
from the hub by name (`load_dataset(hf_hub_url, name=subset)`), aligns it with its sharegpt
converter and encodes it with its `SupervisedDatasetProcessor`. Which rows its converter skips
(strict alternation: it warns and leaves the row out) is read off the converter's own output.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from side_common import blocked_import, published_labels, supervised, versions  # noqa: F401 (runs here too)

#: The card's LLaMA-Factory settings: the JSON block after `data/dataset_info.json`, and the YAML line.
CARD_ENTRY = re.compile(r"`data/dataset_info\.json`:\s*```json\n(?P<entry>.*?)\n```", re.DOTALL)
CARD_MASK_HISTORY = "`mask_history: true`"


def card_settings(repo_id: str, token: str) -> dict[str, Any]:
    """The dataset_info.json entry and `mask_history` the repo's card tells LLaMA-Factory users to write."""
    from huggingface_hub import hf_hub_download

    card = Path(hf_hub_download(repo_id, "README.md", repo_type="dataset", token=token)).read_text(encoding="utf-8")
    found = CARD_ENTRY.search(card)
    if found is None:
        raise AssertionError(f"the card of {repo_id} has no data/dataset_info.json block")
    return {"dataset_info": json.loads(found.group("entry")), "mask_history": CARD_MASK_HISTORY in card}


def tokenize(repo_id: str, token: str, tokenizer_dir: str, template: str) -> dict[str, Any]:
    """The sharegpt config as LLaMA-Factory's SFT stage encodes it, with the card's settings."""
    from llamafactory.data import get_dataset, get_template_and_fix_tokenizer
    from llamafactory.data.loader import _get_merged_dataset
    from llamafactory.hparams import get_train_args
    from llamafactory.model import load_tokenizer

    blocked = blocked_import()
    settings = card_settings(repo_id, token)
    data = Path.cwd() / "data"
    data.mkdir(exist_ok=True)
    (data / "dataset_info.json").write_text(json.dumps(settings["dataset_info"], indent=2), encoding="utf-8")
    (name,) = settings["dataset_info"]
    model_args, data_args, training_args, _, _ = get_train_args({
        "model_name_or_path": tokenizer_dir, "stage": "sft", "do_train": True, "finetuning_type": "lora",
        "dataset": name, "dataset_dir": str(data), "template": template, "cutoff_len": 8192,
        "mask_history": settings["mask_history"], "overwrite_cache": True, "output_dir": str(Path.cwd() / "out"),
        "report_to": "none"})
    tokenizer_module = load_tokenizer(model_args)
    chat = get_template_and_fix_tokenizer(tokenizer_module["tokenizer"], data_args)
    module = get_dataset(chat, model_args, data_args, training_args, stage="sft", **tokenizer_module)
    aligned = _get_merged_dataset(data_args.dataset, model_args, data_args, training_args, "sft")
    return {"blocked": blocked, "versions": versions("llamafactory", "datasets", "transformers", "torch", "torchaudio"),
            "settings": settings, "skipped": [i for i, row in enumerate(aligned) if not row["_response"]],
            "rows": [supervised(r["input_ids"], r["labels"]) for r in module["train_dataset"]]}
