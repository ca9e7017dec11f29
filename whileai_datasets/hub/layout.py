"""The repo's files: Parquet shards per config and split, the card's ``configs`` and ``dataset_info``.

The layout is the one ``push_to_hub`` writes, for several configs: the default config under
``data/``, every other config under a folder of its name, a split's shards named
``{split}-{index:05d}-of-{count:05d}.parquet``. Each shard carries ``datasets``' feature
metadata (built-in types only), so ``load_dataset(repo, name)`` and a plain
``Dataset.from_parquet`` type the columns the same way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Features
from datasets import config as datasets_config
from datasets.info import DatasetInfo, DatasetInfosDict
from datasets.splits import SplitDict, SplitInfo
from datasets.utils.py_utils import convert_file_size_to_int
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, DatasetCardData

from whileai_datasets.hub.configs import Config


def write_shards(configs: Sequence[Config], folder: Path, max_shard_size: int | str | None) -> list[str]:
    """Write every config's splits as Parquet shards under `folder`; returns their repo paths."""
    limit = convert_file_size_to_int(max_shard_size or datasets_config.MAX_SHARD_SIZE)
    written = []
    for config in configs:
        for split, table in config.splits.items():
            count = max(1, math.ceil(table.nbytes / limit)) if table.num_rows else 1
            per_shard = math.ceil(table.num_rows / count) if table.num_rows else 0
            for index in range(count):
                path = f"{config.directory}/{split}-{index:05d}-of-{count:05d}.parquet"
                target = folder / path
                target.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(_with_metadata(table.slice(index * per_shard, per_shard), config), target)
                written.append(path)
    return written


def _has_json(features: Features) -> bool:
    """Whether a ``Json`` feature appears anywhere in ``features`` (by its serialised type name)."""
    return '"_type": "Json"' in json.dumps(features.to_dict())


def _with_metadata(table: pa.Table, config: Config) -> pa.Table:
    return table.replace_schema_metadata(config.features.arrow_schema.metadata)


def operations(folder: Path, paths: Sequence[str], existing: Sequence[str], configs: Sequence[Config],
               card: str) -> list[CommitOperationAdd | CommitOperationDelete]:
    """One commit's operations: every shard and the card added, and the stale data files deleted.

    Stale: a Parquet file under a config folder this layout owns that this publish does not write,
    and ``dataset_infos.json`` (older ``datasets`` metadata that would contradict the card)."""
    ops: list[CommitOperationAdd | CommitOperationDelete] = [
        CommitOperationAdd(path_in_repo=path, path_or_fileobj=str(folder / path)) for path in paths]
    ops.append(CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=card.encode("utf-8")))
    owned = {c.directory for c in configs} | {"data"}
    keep = set(paths)
    for path in existing:
        top = path.split("/", 1)[0]
        stale_shard = "/" in path and top in owned and path.endswith(".parquet") and path not in keep
        if stale_shard or path == "dataset_infos.json":
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
        for name, table in config.splits.items():
            splits.add(SplitInfo(name=name, num_examples=table.num_rows))
        features = None if _has_json(config.features) else config.features
        infos[config.name] = DatasetInfo(features=features, splits=splits, config_name=config.name)
    DatasetInfosDict(infos).to_dataset_card_data(data)
    data["configs"] = [
        {"config_name": config.name, **({"default": True} if i == 0 else {}),
         "data_files": [{"split": split, "path": f"{config.directory}/{split}-*"} for split in config.splits]}
        for i, config in enumerate(configs)
    ]
    return data
