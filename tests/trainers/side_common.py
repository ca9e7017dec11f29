"""What every trainer-side process does besides the trainer's own preprocessing (standard library + datasets).

Loaded in a trainer's venv by `child.py`; imports nothing from this repository's package or tests.
"""

from __future__ import annotations

from typing import Any


def blocked_import() -> str:
    """What `import whileai_datasets` raises in this venv (it must raise: the trainer machine has no package)."""
    try:
        import whileai_datasets  # noqa: F401
    except ImportError as err:
        return f"{type(err).__name__}: {err}"
    raise AssertionError("whileai_datasets imported in a trainer's venv")


def load_config(repo_id: str, config: str, token: str) -> Any:
    """The named config's train split, with plain `datasets` against HF_ENDPOINT (the local hub)."""
    import datasets

    datasets.config.USE_PARQUET_EXPORT = False  # no lookup at datasets-server.<host>: stay on 127.0.0.1
    return datasets.load_dataset(repo_id, config, split="train", token=token)


def versions(*names: str) -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in names}


def supervised(input_ids: list[int], labels: list[int]) -> dict[str, list[int]]:
    """A row as the tests compare it: its token ids and which of them carry loss (labels != -100)."""
    return {"input_ids": list(input_ids), "trained": [int(label != -100) for label in labels]}


def published_labels(repo_id: str, token: str) -> list[dict[str, list[int]]]:
    """The `tokenized` config as this venv loads it: ids and trained flags (`labels` once published, else the mask)."""
    rows = load_config(repo_id, "tokenized", token)
    if "labels" in rows.column_names:
        return [supervised(r["input_ids"], r["labels"]) for r in rows]
    return [{"input_ids": r["input_ids"], "trained": r["assistant_masks"]} for r in rows]
