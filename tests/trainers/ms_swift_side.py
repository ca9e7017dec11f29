"""ms-swift's side, run in its venv: the `messages` config through ms-swift's own dataset loader and template.

`swift.dataset.load_dataset("hf::REPO:messages")` is what `--dataset hf::REPO:messages --use_hf true`
runs (its row preprocessor keeps each message's `loss`), and `EncodePreprocessor(template)` is the
encode `swift sft` applies, with the template in train mode and the default `loss_scale`, under which
a message's `loss` decides whether its tokens are trained.
"""

from __future__ import annotations

from typing import Any

from side_common import blocked_import, published_labels, supervised, versions  # noqa: F401 (runs here too)


def tokenize(repo_id: str, token: str, tokenizer_dir: str, template: str, model_type: str) -> dict[str, Any]:
    from swift.dataset import EncodePreprocessor, load_dataset
    from swift.model import get_processor
    from swift.template import get_template

    blocked = blocked_import()
    processor = get_processor(tokenizer_dir, model_type=model_type, use_hf=True, download_model=False)
    encoder = get_template(processor, template_type=template, max_length=8192)
    encoder.set_mode("train")
    train, _ = load_dataset(f"hf::{repo_id}:messages", use_hf=True, hub_token=token, strict=True)
    encoded = EncodePreprocessor(encoder)(train, load_from_cache_file=False)
    return {"blocked": blocked, "versions": versions("ms-swift", "datasets", "transformers"),
            "rows": [supervised(r["input_ids"], r["labels"]) for r in encoded]}
