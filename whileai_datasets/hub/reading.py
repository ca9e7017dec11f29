"""A dataset's rows chunk by chunk, straight from its Arrow data.

`datasets` reads a `ds.select(...)` (what `split_by` returns) through its indices mapping one row
at a time: `ds.with_format("arrow")[:]` of a 90,000-row selection is 90,000 one-row slices glued
together, and holds the whole split. Here a chunk of the indices is looked up with one Arrow
`take` per record batch it touches, and only that chunk is ever held.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
from datasets import Dataset

#: Rows per chunk: a few MB of rollouts, the unit every config is built, measured and written in.
CHUNK_ROWS = 4096


def chunks(ds: Dataset, *, rows: int = CHUNK_ROWS, columns: Sequence[str] | None = None) -> Iterator[pa.Table]:
    """`ds`'s rows in order, `rows` at a time, as Arrow tables (only `columns`, when given)."""
    table = ds.data.table
    if columns is not None:
        table = table.select(list(columns))
    indices = ds._indices  # the mapping select/shuffle/filter leave; datasets has no public accessor
    if indices is None:
        for start in range(0, table.num_rows, rows):
            yield table.slice(start, rows).combine_chunks()
        return
    lookup = _Batches(table)
    mapping = indices.column(0)
    for start in range(0, len(mapping), rows):
        yield lookup.take(mapping.slice(start, rows).to_numpy().astype(np.int64))


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
