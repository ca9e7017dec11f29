"""The publishing machine, in a client process (tests/hub/conftest.py `Identity.run`): publish with this package."""

from __future__ import annotations

from typing import Any


def publish_for_trainers(path: str, repo_id: str, token: str, tokenizer_dir: str) -> dict[str, Any]:
    """Publish the saved canonical rows with a tokenizer: every config, `messages`, `sharegpt` and `tokenized`."""
    from datasets import load_from_disk
    from transformers import AutoTokenizer

    from whileai_datasets.hub import publish

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    return dict(publish(load_from_disk(path), repo_id, token=token, tokenizer=tokenizer))
