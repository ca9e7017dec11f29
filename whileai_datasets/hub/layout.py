"""The repo's files: Parquet shards per config and split, the card's ``configs`` and ``dataset_info``.

The layout is the one ``push_to_hub`` writes, for several configs: the default config under
``data/``, every other config under a folder of its name, a split's shards named
``{split}-{index:05d}-of-{count:05d}.parquet`` (written by ``hub.streaming``). Each shard carries
``datasets``' feature metadata (built-in types only), so ``load_dataset(repo, name)`` and a plain
``Dataset.from_parquet`` type the columns the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from datasets import Features
from datasets.info import DatasetInfo, DatasetInfosDict
from datasets.splits import SplitDict, SplitInfo
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, DatasetCardData

from whileai_datasets.hub.card_sections import SECTION_FOLDER
from whileai_datasets.hub.configs import Config


def _has_json(features: Features) -> bool:
    """Whether a ``Json`` feature appears anywhere in ``features`` (by its serialised type name)."""
    return '"_type": "Json"' in json.dumps(features.to_dict())


def operations(folder: Path, paths: Sequence[str], existing: Sequence[str], configs: Sequence[Config],
               card: str, extra: Mapping[str, bytes] | None = None) -> list[CommitOperationAdd | CommitOperationDelete]:
    """One commit's operations: every shard, the card and the card sections' files (``extra``) added, and the
    stale data files deleted.

    Stale: a Parquet file under a config folder this layout owns that this publish does not write,
    and ``dataset_infos.json`` (older ``datasets`` metadata that would contradict the card)."""
    ops: list[CommitOperationAdd | CommitOperationDelete] = [
        CommitOperationAdd(path_in_repo=path, path_or_fileobj=str(folder / path)) for path in paths]
    ops.append(CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=card.encode("utf-8")))
    ops += [CommitOperationAdd(path_in_repo=path, path_or_fileobj=data) for path, data in (extra or {}).items()]
    owned = {c.directory for c in configs} | {"data"}
    keep = set(paths) | set(extra or {})
    for path in existing:
        top = path.split("/", 1)[0]
        stale_shard = "/" in path and top in owned and path.endswith(".parquet") and path not in keep
        stale_section = top == SECTION_FOLDER and path not in keep  # an earlier card's plots
        if stale_shard or stale_section or path == "dataset_infos.json":
            ops.append(CommitOperationDelete(path_in_repo=path))
    return ops


def card_data(configs: Sequence[Config]) -> DatasetCardData:
    """``configs`` (data_files per split) and ``dataset_info`` (features, rows per split) for the card YAML.

    A config whose features hold ``Json`` gets no ``features`` in the YAML: datasets before 4.7
    (LLaMA-Factory's 4.0) fails on the YAML's ``Json`` while it lists the configs, so one such
    config would hide all of them. Its Parquet files still carry their own features (schema
    metadata), which ``load_dataset`` reads when the card names none."""
    data = DatasetCardData()
    infos = {}
    for config in configs:
        splits = SplitDict()
        for name, rows in config.rows.items():
            splits.add(SplitInfo(name=name, num_examples=rows))
        features = None if _has_json(config.features) else config.features
        infos[config.name] = DatasetInfo(features=features, splits=splits, config_name=config.name)
    DatasetInfosDict(infos).to_dataset_card_data(data)
    data["configs"] = [
        {"config_name": config.name, **({"default": True} if i == 0 else {}),
         "data_files": [{"split": split, "path": f"{config.directory}/{split}-*"} for split in config.rows]}
        for i, config in enumerate(configs)
    ]
    return data
