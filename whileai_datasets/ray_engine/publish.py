"""`whileai_datasets.publish` on Ray Data: the workers build and write the shards, the driver commits.

Each Ray block of canonical rows goes through the same per-chunk config builders as a local publish
(`hub.configs.REGISTRY`, `hub.streaming`): the worker writes one Parquet shard per config and split
of its block to a staging directory and returns the shard's name, rows and the card's counts, and
the rows each trainer reads differently in the block (`hub.trainer_gaps`). The driver orders the
shards by the rows they hold (file order), names them as a local publish does, places each block's
trainer gaps at its first row in the split, writes the card and makes the one commit. So the repo has the local publish's configs, directories,
Parquet schemas and card YAML, and the same rows in the same order. The staging directory must be
one every node and the driver see (the same assumption as the export's inputs).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import ray

from whileai_datasets._options import TrainingOptions
from whileai_datasets._typing import MaskMode
from whileai_datasets.columnar import _portable
from whileai_datasets.errors import PublishError, WhileaiError
from whileai_datasets.hub import configs as repo_configs
from whileai_datasets.hub import publishing, splits, streaming, trainer_gaps
from whileai_datasets.hub.card import hash_sources
from whileai_datasets.hub.publishing import PublishResult
from whileai_datasets.ray_engine import block_counts
from whileai_datasets.ray_engine import output as ray_output
from whileai_datasets.ray_engine import source as ray_source
from whileai_datasets.ray_engine import source_files
from whileai_datasets.ray_engine.engine import SOURCE_FILE, SOURCE_OFFSET, read_whileai
from whileai_datasets.transforms.think import strip_think
from whileai_datasets.transforms.tool_output import truncate_tool_output

#: One row per shard a worker wrote (`config` set), and per block and split its training rows' count and
#: trainer gaps measured from the block's first row (`config` null, `gaps` set).
_INFO = pa.schema([("config", pa.string()), ("split", pa.string()), ("file", pa.int64()), ("offset", pa.int64()),
                   ("local", pa.string()), ("rows", pa.int64()), ("facts", pa.string()), ("gaps", pa.string())])


def publish_rollouts(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    repo_id: str,
    *,
    system_prompt: str | None = None,
    tools: Any = None,
    mask_mode: MaskMode = "assistant",
    strip_think: bool = True,
    max_tool_output_chars: int | None = None,
    split_key: str | None = None,
    test_size: float = 0.1,
    seed: int = 0,
    names: tuple[str, str] = ("train", "holdout"),
    private: bool = True,
    token: str | None = None,
    revision: str | None = None,
    commit_message: str | None = None,
    staging: str | os.PathLike[str] | None = None,
    range_bytes: int = ray_source.RANGE_BYTES,
    block_bytes: int = ray_source.BLOCK_BYTES,
    filesystem: Any = None,
) -> PublishResult:
    """Publish whileai rollouts (any row shape) to `repo_id` on Ray: what `whileai-datasets push` publishes.

    Args:
        source: Files as `read_whileai` takes them.
        repo_id, private, token, revision, commit_message: As `whileai_datasets.publish`.
        system_prompt, tools, mask_mode: As the `whileai/export` builder's.
        strip_think, max_tool_output_chars: As `export_dataset`'s.
        split_key, test_size, seed, names: Hold out whole groups as `split_by` does (the same groups for
            the same seed); without `split_key`, one split "train".
        staging: Where the workers write the shards (a directory every node mounts); a temporary
            directory otherwise (right for a local Ray runtime).
        range_bytes, block_bytes: As `read_whileai`; a block's rows become one shard per config and split.
        filesystem: As `read_whileai`: opens URI sources (`s3://bucket/prefix/`).
    Returns:
        `publish`'s result.
    Raises:
        OptionError: `mask_mode`, `strip_think` or `max_tool_output_chars` has a value it cannot take.
        PublishError, ExportFormatError: as `publish` and `read_whileai`.
    """
    options = TrainingOptions.whileai_export(system_prompt=system_prompt, mask_mode=mask_mode, strip_think=strip_think,
                                             max_tool_output_chars=max_tool_output_chars)
    found_token = publishing.resolve_token(token)
    rows = read_whileai(source, system_prompt=system_prompt, tools=tools, mask_mode=options.mask_mode, row_key=True,
                        range_bytes=range_bytes, block_bytes=block_bytes, filesystem=filesystem)
    held = None
    if split_key:  # the groups are needed before the blocks are split: read the rows once, keep them
        rows = rows.materialize()
        held = _held_groups(rows, split_key, test_size, seed)
    api, repo_id, url, previous = publishing.open_repo(found_token, repo_id, private=private, revision=revision)
    paths = tuple(source_files.expand_paths(source, filesystem=filesystem))
    with tempfile.TemporaryDirectory(prefix="whileai-ray-publish-", dir=staging) as tmp:
        blocks = Blocks(paths, options.strip_think, options.max_tool_output_chars, split_key, held, names, tmp)
        built = _build(rows, blocks, Path(tmp))
        groups = _group_counts(rows, split_key, held, names) if split_key else None
        return publishing.commit_built(api, built, publishing.Publication(
            repo_id=repo_id, url=url, private=private, revision=revision, previous=previous,
            commit_message=commit_message, sources=hash_sources(paths, filesystem=filesystem), split_key=split_key,
            split_groups=groups), Path(tmp))


def _held_groups(rows: Any, key: str, test_size: float, seed: int) -> pa.Array:
    keys = pa.array(rows.unique(key))
    return splits.held_out(keys, key, test_size=test_size, seed=seed)


def _group_counts(rows: Any, key: str, held: pa.Array, names: tuple[str, str]) -> dict[str, int]:
    every = len(pa.array(rows.unique(key)))
    return {names[0]: every - len(held), names[1]: len(held)}


@dataclass(frozen=True)
class Blocks:
    """One Ray block through every config: shards written under `folder`, one info row per shard back."""

    paths: tuple[str, ...]
    strip_think: bool
    max_tool_output_chars: int | None
    split_key: str | None
    held: Any
    names: tuple[str, str]
    folder: str = ""

    def __call__(self, table: pa.Table) -> pa.Table:
        if not table.num_rows:  # Ray hands on empty blocks without their columns
            return _INFO.empty_table()
        first = (self.paths.index(table.column(SOURCE_FILE)[0].as_py()), int(table.column(SOURCE_OFFSET)[0].as_py()))
        rows = table.drop_columns([SOURCE_FILE, SOURCE_OFFSET])
        if self.strip_think:
            rows = strip_think(rows)
        if self.max_tool_output_chars is not None:
            rows = truncate_tool_output(self.max_tool_output_chars)(rows)
        plan = repo_configs.planned(repo_configs.Extras(split_key=self.split_key))
        infos = []
        for split, part in self._splits(rows):
            infos += _write_block(plan, part, split, first, Path(self.folder))
        return pa.Table.from_pylist(infos, schema=_INFO)

    def _splits(self, rows: pa.Table) -> list[tuple[str, pa.Table]]:
        if self.split_key is None:
            return [("train", rows)]
        held = pc.is_in(rows.column(self.split_key), value_set=self.held)
        return [(self.names[0], rows.filter(pc.invert(held))), (self.names[1], rows.filter(held))]


def _write_block(plan: Sequence[tuple[repo_configs.ConfigSpec, repo_configs.Builder]], rows: pa.Table, split: str,
                 first: tuple[int, int], folder: Path) -> list[dict[str, Any]]:
    """Every config of one block's rows of a split, each written as one shard; their info rows, and the
    block's own (its rows and trainer gaps)."""
    where = f"split {split!r}"
    canonical = repo_configs.canonical_chunk(rows, where)
    gaps = json.dumps(trainer_gaps.chunk_gaps(canonical, where))  # rows counted from the block's first
    infos: list[dict[str, Any]] = [{"config": None, "split": split, "file": first[0], "offset": first[1],
                                    "local": "", "rows": canonical.num_rows, "facts": "{}", "gaps": gaps}]
    for spec, builder in plan:
        table = builder.table(canonical, where)
        facts: Counter[str] = Counter(rows=table.num_rows)
        local = ""
        if table.num_rows:
            if builder.facts is not None:
                facts.update(builder.facts(table, canonical))
            table = table.replace_schema_metadata(_portable.portable_features(table.schema).arrow_schema.metadata)
            local = str(folder / spec.directory / f"{split}-block-{first[0]:05d}-{first[1]:015d}.parquet")
            os.makedirs(os.path.dirname(local), exist_ok=True)
            pq.write_table(table, local)
        infos.append({"config": spec.name, "split": split, "file": first[0], "offset": first[1], "local": local,
                      "rows": table.num_rows, "facts": json.dumps(dict(facts)), "gaps": None})
    return infos


def _build(rows: Any, blocks: Blocks, folder: Path) -> streaming.Built:
    """Run `blocks` on every Ray block and gather what the workers wrote into the local publish's layout."""
    collector = block_counts.collector_on_this_node()
    try:
        with ray_output.ordered(), block_counts.surfaced(collector):
            infos = rows.map_batches(_Reporting(blocks, block_counts.Reporter(collector)), batch_format="pyarrow",
                                     batch_size=None).take_all()
    finally:
        ray.kill(collector)
    return _gather(infos, blocks.split_key is None, blocks.names, folder)


@dataclass(frozen=True)
class _Reporting:
    """`blocks`, with our own errors sent to the driver (Ray would wrap them in its own)."""

    blocks: Blocks
    reporter: Any

    def __call__(self, table: pa.Table) -> pa.Table:
        try:
            return self.blocks(table)
        except WhileaiError as err:
            self.reporter(err)
            raise


def _gather(infos: list[dict[str, Any]], one_split: bool, names: tuple[str, str], folder: Path) -> streaming.Built:
    split_names = ["train"] if one_split else list(names)
    plan = repo_configs.planned(repo_configs.Extras())
    configs, shards = [], []
    for spec, _ in plan:
        mine = sorted((i for i in infos if i["config"] == spec.name), key=lambda i: (i["file"], i["offset"]))
        rows: dict[str, int] = {}
        facts: dict[str, Counter[str]] = {}
        schema = None
        for split in split_names:
            written = [i for i in mine if i["split"] == split and i["rows"]]
            facts[split] = Counter(rows=0)
            for info in mine:
                if info["split"] == split:
                    facts[split].update(json.loads(info["facts"]))
            rows[split] = facts[split]["rows"]
            for index, info in enumerate(written):
                path = f"{spec.directory}/{split}-{index:05d}-of-{len(written):05d}.parquet"
                (folder / path).parent.mkdir(parents=True, exist_ok=True)
                os.replace(info["local"], folder / path)
                schema = _same_schema(schema, folder / path, spec.name)
                shards.append(streaming.Shard(folder / path, path, info["rows"]))
        features = _portable.portable_features(schema if schema is not None else pa.schema([]))
        configs.append(repo_configs.Config(spec.name, rows, features, spec.directory,
                                           {split: dict(counts) for split, counts in facts.items()}))
    return streaming.Built(configs, shards, _gaps(infos, split_names))


def _gaps(infos: list[dict[str, Any]], split_names: list[str]) -> streaming.Gaps:
    """The blocks' trainer gaps added up, each block's locations moved to its first row in its split
    (the rows of the blocks before it, in file order), as a local publish counts them."""
    gaps = trainer_gaps.merge_gaps(())
    for split in split_names:
        blocks = sorted((i for i in infos if i["config"] is None and i["split"] == split),
                        key=lambda i: (i["file"], i["offset"]))
        start = 0
        for block in blocks:
            gaps = trainer_gaps.merge_gaps((gaps, trainer_gaps.shift_rows(json.loads(block["gaps"]), start)))
            start += block["rows"]
    return gaps


def _same_schema(schema: pa.Schema | None, path: Path, config: str) -> pa.Schema:
    """Every shard of a config must have one schema (the card has one set of features per config)."""
    found = pq.read_schema(path)
    if schema is not None and not found.equals(schema, check_metadata=False):
        raise PublishError(f"the Ray blocks built {config!r} shards with different columns ({schema} against "
                           f"{found})", location=str(path), hint="Give every row the same columns, or publish "
                           "with --engine local, which fixes the columns from the whole dataset")
    return found
