"""whileai's own columns, kept only where whileai's rows are.

Every config declares whileai's carried columns (``reward``, ``scenario_id``, ``lineage``, ... and, for
``preference``, the pair facts ``tie``, ``margin``, ...), so a file of another tool's rows would load with
dozens of columns that are null on every row: noise in ``ds[0]``, in a card's schema and in a trainer's
column list. A prepared split in which not one row holds a value in any of them (no whileai row is in
it: each of whileai's rows carries some) drops them all when it is loaded; nothing is lost, since each was
null on every row. A split with any whileai row keeps every one, so whileai's exports keep the schema
they always had, and a column any row holds a value in is always kept.

Decided per prepared split from its own columns (the Arrow null counts, no pass over the rows), so the
``datasets`` cache, ``num_proc`` and every later load agree. ``streaming=True`` yields the declared schema:
a stream cannot look at its rows before it yields the first.
"""

from __future__ import annotations

from typing import Any

from whileai_datasets.rows import schema

#: per config, whileai's own columns (``prompt`` is not one: TRL and prompt/response rows have it too)
OWN_COLUMNS: dict[str, tuple[str, ...]] = {
    "default": tuple(name for name in (*schema.CARRY_KEYS, *schema.SOURCE_KEYS) if name != "prompt"),
    "preference": schema.PAIR_KEYS,
}


def without_empty_own_columns(ds: Any, config: str) -> Any:
    """``ds`` without whileai's own columns when every one of them is null on every row."""
    names = [name for name in OWN_COLUMNS.get(config, ()) if name in ds.column_names]
    table = ds.data
    if not names or any(table.column(name).null_count < table.num_rows for name in names):
        return ds
    return ds.remove_columns(names)
