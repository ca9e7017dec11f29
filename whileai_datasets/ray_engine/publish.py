"""`whileai_datasets.publish` on Ray Data: the workers build the shards, the driver commits.

Each Ray block of canonical rows goes through the same per-chunk config builders as a local publish
(`hub.configs.REGISTRY`, `hub.streaming`): the worker makes one Parquet shard per config and split of
its block and returns, per shard, its bytes (they reach the driver through Ray's object store, so the
nodes need no shared folder; with `staging=`, a folder every node mounts, the worker writes the shard
there instead), its rows and the card's counts, and the rows each trainer reads differently in the
block (`hub.trainer_gaps`). The driver writes the shards to its disk as they arrive, orders them by the
rows they hold (file order), names them as a local publish does, places each block's trainer gaps at its
first row in the split, writes the card and makes the one commit. So the repo has the local publish's
configs, directories, Parquet schemas and card YAML, and the same rows in the same order.
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

from whileai_datasets import _storage
from whileai_datasets._options import TrainingOptions
from whileai_datasets.builders import unread
from whileai_datasets.builders.inputs import load_tools
from whileai_datasets.columnar import _portable
from whileai_datasets.errors import OptionError, PublishError, WhileaiError, stacklevel_outside
from whileai_datasets.hub import configs as repo_configs
from whileai_datasets.hub import publishing, streaming, trainer_gaps
from whileai_datasets.hub.card import hash_sources
from whileai_datasets.hub.publishing import PublishResult
from whileai_datasets.hub.splits import HoldOut
from whileai_datasets.privacy import gate
from whileai_datasets.privacy.scanning import Findings
from whileai_datasets.ray_engine import block_counts, source_files
from whileai_datasets.ray_engine import output as ray_output
from whileai_datasets.ray_engine import source as ray_source
from whileai_datasets.ray_engine.engine import SOURCE_FILE, SOURCE_OFFSET, canonical_rows, where_read
from whileai_datasets.rows.canonical import Options
from whileai_datasets.transforms.anonymizing import Anonymize
from whileai_datasets.transforms.think import strip_think
from whileai_datasets.transforms.tool_output import truncate_tool_output

#: One row per shard a worker wrote (`config` set), and per block and split its training rows' count and
#: trainer gaps measured from the block's first row (`config` null, `gaps` set).
_INFO = pa.schema([("config", pa.string()), ("split", pa.string()), ("file", pa.int64()), ("offset", pa.int64()),
                   ("local", pa.string()), ("rows", pa.int64()), ("facts", pa.string()), ("gaps", pa.string()),
                   ("data", pa.binary()), ("privacy", pa.string())])


def publish_rollouts(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    repo_id: str,
    options: TrainingOptions | None = None,
    *,
    hold_out: HoldOut | None = None,
    private: bool = True,
    token: str | None = None,
    revision: str | None = None,
    commit_message: str | None = None,
    staging: str | os.PathLike[str] | None = None,
    range_bytes: int = ray_source.RANGE_BYTES,
    block_bytes: int = ray_source.BLOCK_BYTES,
    filesystem: Any = None,
    secrets: str = "refuse",
) -> PublishResult:
    """Publish whileai rollouts (any row shape) to `repo_id` on Ray: what `whileai-datasets push` publishes.

    ``whileai_datasets.publish_rollouts(..., engine="ray")`` calls this; call it yourself for the engine's
    own knobs (`staging`, `range_bytes`, `block_bytes`).

    Args:
        source: Files as `read_whileai` takes them.
        repo_id, private, token, revision, commit_message: As `whileai_datasets.publish`.
        options: What shapes the rows (``TrainingOptions.whileai_export()`` when None, the export's
            defaults): `system_prompt`, `tools` and `mask_mode` as the `whileai/export` builder's,
            `strip_think` and `max_tool_output_chars` as `export_dataset`'s; the repo's configs are its own
            wire shapes, so `unroll` and `weights` are refused.
        hold_out: Whole groups held out as `split_by` holds them (the same groups for the same seed);
            None: one split "train".
        staging: A folder every node mounts, where the workers write the shards; None (the default):
            the shards come back through Ray's object store, a block at a time, to a temporary folder of
            the driver's (no shared folder is needed).
        range_bytes, block_bytes: As `read_whileai`; a block's rows become one shard per config and split.
        filesystem: As `read_whileai`: opens URI sources (`s3://bucket/prefix/`).
        secrets: As `publish`: the workers scan each block (and with "redact" replace each secret); the driver
            refuses before it opens the repo, so a refused publish creates and sends nothing.
    Returns:
        `publish`'s result.
    Raises:
        OptionError: `options` sets `unroll` or `weights`, which a publish does not take.
        PublishError, ExportFormatError: as `publish` and `read_whileai`.
    """
    options = TrainingOptions.whileai_export() if options is None else options
    for name, value in (("unroll", options.unroll or None), ("weights", options.weights)):
        if value is not None:
            raise OptionError(f"{name}={value!r} does not apply to a publish: the repo's configs are its own shapes",
                              location=name, hint=f"Drop {name} from the options.")
    gate.check_policy(secrets)
    found_token = publishing.resolve_token(token)
    storage = _storage.Storage(filesystem)
    paths = tuple(source_files.expand_paths(source, filesystem=filesystem))
    tools = load_tools(list(options.tools) if options.tools else None)
    reading = Options(system_prompt=str(options.system_prompt or ""), tools=tools, mask_mode=options.mask_mode)
    collector = block_counts.collector_on_this_node()
    try:
        with ray_output.ordered(), block_counts.surfaced(collector):
            reporter = block_counts.Reporter(collector)
            rows = canonical_rows(paths, "default", reading, reporter, (range_bytes, block_bytes), storage,
                                  row_key=True)
            held, split_key, names = None, None, ("train", "holdout")
            if hold_out is not None:  # the groups are needed before the blocks are split: read the rows once
                rows = rows.materialize()
                held = hold_out.held(pa.array(rows.unique(hold_out.key)))
                split_key, names = hold_out.key, hold_out.names
            with tempfile.TemporaryDirectory(prefix="whileai-ray-publish-", dir=staging) as tmp:
                blocks = Blocks(paths, options.strip_think, options.max_tool_output_chars, split_key, held, names,
                                tmp if staging is not None else "", secrets)
                built, privacy = _build(rows, blocks, reporter, Path(tmp))
                gate.judge(privacy, secrets)  # before the repo is opened: a refused publish creates nothing
                api, repo_id, url, previous = publishing.open_repo(found_token, repo_id, private=private,
                                                                   revision=revision)
                unread.warn(block_counts.unread_keys(collector, paths, storage), where_read(source), kept=False,
                            stacklevel=stacklevel_outside())
                groups = _group_counts(rows, split_key, held, names) if split_key else None
                return publishing.commit_built(api, built, publishing.Publication(
                    repo_id=repo_id, url=url, private=private, revision=revision, previous=previous,
                    commit_message=commit_message, sources=hash_sources(paths, filesystem=filesystem),
                    split_key=split_key, split_groups=groups, privacy=gate.card_view(privacy, secrets)), Path(tmp))
    finally:
        ray.kill(collector)


def _group_counts(rows: Any, key: str, held: pa.Array, names: tuple[str, str]) -> dict[str, int]:
    every = len(pa.array(rows.unique(key)))
    return {names[0]: every - len(held), names[1]: len(held)}


@dataclass(frozen=True)
class Blocks:
    """One Ray block through every config: one info row per shard back, the shard's Parquet bytes in it (they
    reach the driver through Ray's object store), or with a `folder` (every node mounts it) the shard written
    there."""

    paths: tuple[str, ...]
    strip_think: bool
    max_tool_output_chars: int | None
    split_key: str | None
    held: Any
    names: tuple[str, str]
    folder: str = ""
    secrets: str = "refuse"

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
            found = Findings()
            found.add(part, split=split)
            if self.secrets == "redact" and found.secret_rows:
                part = Anonymize(personal=False, report_column=None).table(part)
            written = _write_block(plan, part, split, first, Path(self.folder) if self.folder else None)
            written[0]["privacy"] = found.to_json()  # the block's own row (its rows and trainer gaps)
            infos += written
        return pa.Table.from_pylist(infos, schema=_INFO)

    def _splits(self, rows: pa.Table) -> list[tuple[str, pa.Table]]:
        if self.split_key is None:
            return [("train", rows)]
        held = pc.is_in(rows.column(self.split_key), value_set=self.held)
        return [(self.names[0], rows.filter(pc.invert(held))), (self.names[1], rows.filter(held))]


def _write_block(plan: Sequence[tuple[repo_configs.ConfigSpec, repo_configs.Builder]], rows: pa.Table, split: str,
                 first: tuple[int, int], folder: Path | None) -> list[dict[str, Any]]:
    """Every config of one block's rows of a split, each written as one shard (under `folder`, or as the bytes
    of its info row); their info rows, and the block's own (its rows and trainer gaps)."""
    where = f"split {split!r}"
    canonical = repo_configs.canonical_chunk(rows, where)
    gaps = json.dumps(trainer_gaps.chunk_gaps(canonical, where))  # rows counted from the block's first
    infos: list[dict[str, Any]] = [{"config": None, "split": split, "file": first[0], "offset": first[1],
                                    "local": "", "rows": canonical.num_rows, "facts": "{}", "gaps": gaps}]
    for spec, builder in plan:
        table = builder.table(canonical, where)
        facts: Counter[str] = Counter(rows=table.num_rows)
        local, data = "", None
        if table.num_rows:
            if builder.facts is not None:
                facts.update(builder.facts(table, canonical))
            table = table.replace_schema_metadata(_portable.portable_features(table.schema).arrow_schema.metadata)
            if folder is None:
                buffer = pa.BufferOutputStream()
                pq.write_table(table, buffer)
                data = buffer.getvalue().to_pybytes()
            else:
                local = str(folder / _block_shard(spec.directory, split, first))
                os.makedirs(os.path.dirname(local), exist_ok=True)
                pq.write_table(table, local)
        infos.append({"config": spec.name, "split": split, "file": first[0], "offset": first[1], "local": local,
                      "rows": table.num_rows, "facts": json.dumps(dict(facts)), "gaps": None, "data": data})
    return infos


def _block_shard(directory: str, split: str, first: tuple[int, int]) -> str:
    """Where a block's shard of a config and split waits for the commit (its name orders it in the file)."""
    return f"{directory}/{split}-block-{first[0]:05d}-{first[1]:015d}.parquet"


def _build(rows: Any, blocks: Blocks, reporter: block_counts.Reporter, folder: Path
           ) -> tuple[streaming.Built, Findings]:
    """Run `blocks` on every Ray block and gather what the workers wrote into the local publish's layout: the
    shards that came back as bytes are written under `folder` as they arrive, a block at a time; and what the
    blocks' secrets scan found, its rows numbered in each split."""
    infos = []
    for batch in rows.map_batches(_Reporting(blocks, reporter), batch_format="pyarrow",
                                  batch_size=None).iter_batches(batch_format="pyarrow", batch_size=None):
        for info in batch.to_pylist():
            data = info.pop("data")
            if data is not None:
                local = folder / ".blocks" / _block_shard(info["config"], info["split"], (info["file"], info["offset"]))
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_bytes(data)
                info["local"] = str(local)
            infos.append(info)
    split_names = ["train"] if blocks.split_key is None else list(blocks.names)
    return _gather(infos, blocks.split_key is None, blocks.names, folder), _privacy(infos, split_names)


def _privacy(infos: list[dict[str, Any]], split_names: list[str]) -> Findings:
    """The blocks' scans added up, each block's rows moved to its first row in its split (file order)."""
    found = Findings()
    for split in split_names:
        start = 0
        for block in sorted((i for i in infos if i["config"] is None and i["split"] == split),
                            key=lambda i: (i["file"], i["offset"])):
            found.merge(Findings.from_json(block["privacy"]), start)
            start += block["rows"]
    return found


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
