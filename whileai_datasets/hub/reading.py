"""A dataset's rows chunk by chunk, straight from its Arrow data.

`datasets` reads a `ds.select(...)` (what `split_by` returns) through its indices mapping one row
at a time: `ds.with_format("arrow")[:]` of a 90,000-row selection is 90,000 one-row slices glued
together, and holds the whole split. Here a chunk of the indices is looked up with one Arrow
`take` per record batch it touches, and only that chunk is ever held.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from datasets import Dataset
from datasets.table import ConcatenationTable, MemoryMappedTable

#: Rows per chunk: a few MB of rollouts, the unit every config is built, measured and written in.
CHUNK_ROWS = 4096


def chunks(ds: Dataset, *, rows: int = CHUNK_ROWS, columns: Sequence[str] | None = None) -> Iterator[pa.Table]:
    """`ds`'s rows in order, `rows` at a time, as Arrow tables (only `columns`, when given).

    Rows in datasets' cache files are read from the files batch by batch (so the pages read are
    the page cache's, not this process's memory), unless an unordered selection (a shuffle) needs
    them in another order: then they are looked up in the memory-mapped table."""
    table = ds.data.table
    if columns is not None:
        table = table.select(list(columns))
    indices = ds._indices  # the mapping select/shuffle/filter leave; datasets has no public accessor
    wanted = None if indices is None else indices.column(0).to_numpy().astype(np.int64)
    files = _cache_files(ds.data, table.schema)
    if files is not None and (wanted is None or bool(np.all(np.diff(wanted) > 0))):
        yield from _rechunk(_read_files(files, table.schema, wanted), rows)
        return
    if indices is None:
        for start in range(0, table.num_rows, rows):
            yield table.slice(start, rows).combine_chunks()
        return
    lookup = _Batches(table)
    mapping = indices.column(0)
    for start in range(0, len(mapping), rows):
        yield lookup.take(mapping.slice(start, rows).to_numpy().astype(np.int64))


def _cache_files(data: Any, schema: pa.Schema) -> list[str] | None:
    """The Arrow files `data` is, in row order, when it is exactly their rows (else None)."""
    leaves = [data] if isinstance(data, MemoryMappedTable) else None
    if isinstance(data, ConcatenationTable) and all(len(row) == 1 for row in data.blocks):
        leaves = [row[0] for row in data.blocks]
    if not leaves or not all(isinstance(leaf, MemoryMappedTable) for leaf in leaves):
        return None
    for leaf in leaves:  # only changes of the schema's metadata: the columns are the file's
        if any(op != "replace_schema_metadata" for op, _, _ in leaf.replays or ()):
            return None
        if not all(leaf.table.schema.field(f.name).type == f.type for f in schema if f.name in leaf.table.column_names):
            return None
    return [leaf.path for leaf in leaves]


def _read_files(paths: list[str], schema: pa.Schema, wanted: np.ndarray | None) -> Iterator[pa.Table]:
    """The rows of the files (only those at `wanted`, ascending, when given), a record batch at a time."""
    start = 0
    for path in paths:
        with pa.OSFile(path) as handle:
            reader = pa.ipc.open_stream(handle)
            for batch in reader:
                part = pa.Table.from_batches([batch]).select(schema.names)
                if wanted is not None:
                    lo, hi = np.searchsorted(wanted, [start, start + batch.num_rows])
                    part = part.take(pa.array(wanted[lo:hi] - start, pa.int64())) if hi > lo else part.slice(0, 0)
                start += batch.num_rows
                if part.num_rows:
                    yield part.cast(schema)


def _rechunk(parts: Iterator[pa.Table], rows: int) -> Iterator[pa.Table]:
    """Tables of `rows` rows (the last one shorter) from tables of any size."""
    held: list[pa.Table] = []
    count = 0
    for part in parts:
        held.append(part)
        count += part.num_rows
        while count >= rows:
            table = pa.concat_tables(held)
            yield table.slice(0, rows).combine_chunks()
            rest = table.slice(rows)
            held, count = ([rest] if rest.num_rows else []), rest.num_rows
    if count:
        yield pa.concat_tables(held).combine_chunks()


def read_all(ds: Dataset) -> pa.Table:
    """Every row of `ds` as one table (for small data: the publisher itself reads chunk by chunk)."""
    parts = list(chunks(ds))
    return pa.concat_tables(parts) if parts else ds.data.table.slice(0, 0)


class _Batches:
    """Row lookups on a table's record batches, without concatenating them."""

    def __init__(self, table: pa.Table) -> None:
        self.schema = table.schema
        self.batches = table.to_batches()
        self.starts = np.cumsum([0] + [b.num_rows for b in self.batches])

    def take(self, rows: np.ndarray) -> pa.Table:
        """The rows at `rows` (positions in the table), in that order."""
        owner = np.searchsorted(self.starts, rows, side="right") - 1
        order = np.argsort(owner, kind="stable")
        ordered_owner = owner[order]
        cuts = np.flatnonzero(np.diff(ordered_owner)) + 1
        pieces = []
        for group in np.split(np.arange(len(rows)), cuts) if len(rows) else []:
            batch = int(ordered_owner[group[0]])
            local = rows[order[group]] - self.starts[batch]
            pieces.append(self.batches[batch].take(pa.array(local, pa.int64())))
        out = pa.Table.from_batches(pieces, schema=self.schema).combine_chunks()
        if len(rows) and np.any(np.diff(order) < 0):  # rows were not in table order: put them back
            out = out.take(pa.array(np.argsort(order, kind="stable"), pa.int64()))
        return out
