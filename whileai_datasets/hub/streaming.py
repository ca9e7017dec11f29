"""Every config of a publish built, measured and written chunk by chunk, each shard handed on when full.

A chunk of source rows (`hub.reading`) goes through every config's builder (`hub.configs.REGISTRY`);
each config's split is a `ShardWriter` that appends the chunk to its open Parquet file and, once
the file holds `limit` bytes of Arrow data, closes it and hands it to `done` (the publisher uploads
it right away). The card's facts are summed chunk by chunk, and so are the rows each trainer
reads differently (`hub.trainer_gaps`, each with its first location in its split). So what a
publish holds at any time is one chunk and its configs, whatever the row count.

Shards are named ``{split}-{index:05d}.parquet`` while a split is written (the count is not known
yet) and get their final ``{split}-{index:05d}-of-{count:05d}.parquet`` names when it is done.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Dataset
from datasets.utils import tqdm as progress_bar

from whileai_datasets.columnar import _parts, _portable
from whileai_datasets.errors import NothingToTrainWarning, PublishError
from whileai_datasets.hub import configs as repo_configs
from whileai_datasets.hub import facts as config_facts
from whileai_datasets.hub import trainer_gaps
from whileai_datasets.hub.reading import CHUNK_ROWS, chunks


@dataclass(frozen=True)
class Shard:
    """One written Parquet file of a config's split: `local` under the publish folder, `path` in the repo."""

    local: Path
    path: str
    rows: int


#: Called with each shard as soon as it is closed (the publisher uploads it).
ShardDone = Callable[[Shard], None]


class ShardWriter:
    """One config's split as Parquet shards of about `limit` bytes of Arrow data each."""

    def __init__(self, folder: Path, directory: str, split: str, limit: int, done: ShardDone) -> None:
        self.folder, self.directory, self.split, self.limit, self.done = folder, directory, split, limit, done
        self.shards: list[Shard] = []
        self.rows = 0
        self._writer: pq.ParquetWriter | None = None
        self._open: tuple[Path, str] | None = None
        self._bytes = self._shard_rows = 0

    def write(self, table: pa.Table) -> None:
        """Append `table`, cut where a shard reaches `limit` (a shard holds at least one row)."""
        while table.num_rows:
            per_row = max(1.0, table.nbytes / table.num_rows)
            fits = max(1, min(table.num_rows, int((self.limit - self._bytes) / per_row + 0.5)))
            self._append(table.slice(0, fits))
            table = table.slice(fits)

    def _append(self, table: pa.Table) -> None:
        if self._writer is None:
            path = f"{self.directory}/{self.split}-{len(self.shards):05d}.parquet"
            local = self.folder / path
            local.parent.mkdir(parents=True, exist_ok=True)
            self._writer, self._open = pq.ParquetWriter(local, table.schema), (local, path)
        self._writer.write_table(table)
        self.rows += table.num_rows
        self._shard_rows += table.num_rows
        self._bytes += table.nbytes
        if self._bytes >= self.limit:
            self._close_shard()

    def close(self) -> list[Shard]:
        """Close the last shard; give every shard its final name (now that the count is known)."""
        if self._writer is not None:
            self._close_shard()
        count = len(self.shards)
        named = []
        for index, shard in enumerate(self.shards):
            path = f"{self.directory}/{self.split}-{index:05d}-of-{count:05d}.parquet"
            shard.local.rename(self.folder / path)
            named.append(Shard(self.folder / path, path, shard.rows))
        return named

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _close_shard(self) -> None:
        assert self._writer is not None and self._open is not None
        self._writer.close()
        shard = Shard(self._open[0], self._open[1], self._shard_rows)
        self._writer, self._open, self._bytes, self._shard_rows = None, None, 0, 0
        self.shards.append(shard)
        self.done(shard)
        pa.default_memory_pool().release_unused()  # a shard's worth of freed buffers back to the system


@dataclass
class _Made:
    """One config while it is built: its fixed schema, writers and facts per split."""

    spec: repo_configs.ConfigSpec
    builder: repo_configs.Builder
    schema: pa.Schema | None = None
    writers: dict[str, ShardWriter] = field(default_factory=dict)
    facts: dict[str, Counter[str]] = field(default_factory=dict)

    def add(self, table: pa.Table, source: pa.Table, split: str, where: str) -> None:
        table = self._conform(table, where)
        counts = self.facts[split]
        counts["rows"] += table.num_rows
        if self.builder.facts is not None and table.num_rows:
            counts.update(self.builder.facts(table, source))
        self.writers[split].write(table)

    def _conform(self, table: pa.Table, where: str) -> pa.Table:
        """Every shard of a config has one schema: the first chunk's (the card's features)."""
        if self.schema is None:
            if not table.num_rows:
                return table
            metadata = _portable.portable_features(table.schema).arrow_schema.metadata
            self.schema = table.schema.with_metadata(metadata)
        if table.schema.equals(self.schema, check_metadata=False):
            return table.replace_schema_metadata(self.schema.metadata)
        return conform(table, self.schema, f"{where}, config {self.spec.name!r}")


def conform(table: pa.Table, schema: pa.Schema, where: str) -> pa.Table:
    """`table` with `schema` (columns it lacks as nulls), or a PublishError saying what differs."""
    extra = [name for name in table.column_names if name not in schema.names]
    if extra:
        raise PublishError(f"a later chunk has columns {extra} that the first chunk did not, so the shards "
                           "would disagree on their features", location=where,
                           hint="Give every row the same columns (cast the dataset to one set of features)")
    for name in schema.names:
        if name not in table.column_names:
            table = table.append_column(schema.field(name), pa.nulls(table.num_rows, schema.field(name).type))
    try:
        return table.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as err:
        raise PublishError(f"a later chunk's columns do not fit the first chunk's types ({err})", location=where,
                           hint="Cast the dataset to one set of features before publishing") from err


#: Per trainer, per shape: the rows it reads differently and the first one's location (`trainer_gaps`).
Gaps = dict[str, dict[str, dict[str, Any]]]


@dataclass
class Built:
    """What a publish made: every config (rows, facts, features), every shard, and the trainer gaps
    of the training rows."""

    configs: list[repo_configs.Config]
    shards: list[Shard]
    gaps: Gaps = field(default_factory=lambda: trainer_gaps.merge_gaps(()))

    @property
    def paths(self) -> list[str]:
        return [shard.path for shard in self.shards]


def survey(splits: Mapping[str, Dataset], extras: repo_configs.Extras) -> repo_configs.Extras:
    """Check every row before any request (messages, `loss_mask`), and decide what must be the same in
    every chunk: whether the default config has TRL's `images` column."""
    images = False
    for name, ds in splits.items():
        where, start, marked, unmarked, first = f"split {name!r}", 0, 0, 0, -1
        for chunk in chunks(ds, columns=("messages", "loss_mask")):
            canonical = repo_configs.canonical_chunk(chunk, where, start)
            row_marks = config_facts.row_marks(canonical)
            marked += int(row_marks.sum())
            unmarked += int((row_marks == 0).sum())
            if first < 0 and (row_marks == 0).any():
                first = start + int((row_marks == 0).argmax())
            start += chunk.num_rows
            images = images or _parts.images_column(canonical.column("messages").combine_chunks()) is not None
        if not marked:
            spec = repo_configs.REGISTRY[0]
            raise PublishError(f"the {spec.name!r} config would have no rows in split {name!r}: none of its "
                               f"{start} rows trains anything (no loss_mask entry marks a message)", location=where,
                               hint=f"{spec.empty_hint}; nothing was sent")
        if unmarked:
            warnings.warn(f"{unmarked} of {start} rows of {where} train nothing (no loss_mask entry marks a message; "
                          f"first: row {first}): the trainer-ready configs leave them out, the canonical config keeps "
                          "them. whileai_datasets.audit says why each one does.", NothingToTrainWarning, stacklevel=3)
    return repo_configs.Extras(**{**extras.__dict__, "images": images})


def build(plan: Sequence[tuple[repo_configs.ConfigSpec, repo_configs.Builder]], sources: Mapping[str, Mapping[str, Dataset]],
          folder: Path, limit: int, done: ShardDone) -> Built:
    """Build every planned config from `sources` (source name -> split -> rows) into shards under `folder`."""
    made = [_Made(spec, builder) for spec, builder in plan]
    total = sum(ds.num_rows for splits in sources.values() for ds in splits.values())
    bar = progress_bar(total=total, unit=" rows", desc="building the configs", delay=1.0)
    gaps = trainer_gaps.merge_gaps(())
    try:
        for source, splits in sources.items():
            users = [m for m in made if m.spec.source == source]
            for split, ds in splits.items():
                gaps = trainer_gaps.merge_gaps((gaps, _build_split(users, split, ds, folder, limit, done, bar)))
    except BaseException:
        for config in made:
            for writer in config.writers.values():
                writer.abort()
        raise
    finally:
        bar.close()
    return _finish(made, gaps)


def _build_split(users: list[_Made], split: str, ds: Dataset, folder: Path, limit: int, done: ShardDone,
                 bar: Any) -> Gaps:
    """Every config of `users` for one split, chunk by chunk; the trainer gaps of its training rows
    (counted per chunk, each first location in the split's row numbers)."""
    where = f"split {split!r}"
    for config in users:
        config.writers[split] = ShardWriter(folder, config.spec.directory, split, limit, done)
        config.facts[split] = Counter(rows=0)
    gaps = trainer_gaps.merge_gaps(())
    if not users:
        return gaps
    training = users[0].spec.source == "rows"
    start = 0
    for chunk in chunks(ds, rows=CHUNK_ROWS):
        source = repo_configs.canonical_chunk(chunk, where, start) if training else chunk
        for config in users:
            config.add(config.builder.table(source, where), source, split, where)
        if training:
            gaps = trainer_gaps.merge_gaps((gaps, trainer_gaps.chunk_gaps(source, where, offset=start)))
        start += chunk.num_rows
        bar.update(chunk.num_rows)
    return gaps


def _finish(made: list[_Made], gaps: Gaps) -> Built:
    configs, shards = [], []
    for config in made:
        if not config.writers:
            continue
        for writer in config.writers.values():
            shards += writer.close()
        schema = config.schema if config.schema is not None else pa.schema([])
        configs.append(repo_configs.Config(
            config.spec.name, {split: writer.rows for split, writer in config.writers.items()},
            _portable.portable_features(schema), config.spec.directory,
            {split: dict(counts) for split, counts in config.facts.items()}))
    return Built(configs, shards, gaps)
