"""Every string of a table, column by column, with the way back to its row and place; and the table
rebuilt with some of them replaced.

A leaf is one string array reached through structs and lists (``messages[].tool_calls[].function.arguments``),
Json values included (their text). Its values are found by flattening the lists, so the leaf holds every string
of that place in the whole chunk; a value's row and list indices are found from the lists' offsets, only for
the few values a scan names. Whatever produced the rows (the builder, a session reader, a wire shape), the
scan reads the strings they hold.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from whileai_datasets.columnar import _arrow


@dataclass(frozen=True)
class Leaf:
    """One string place of a column: its path (``[]`` for each list level) and every value in it."""

    path: tuple[str, ...]  # the column, then field names and "[]" per list level
    values: pa.Array  # string or large_string
    offsets: tuple[np.ndarray, ...]  # per list level, outermost first: each list's start among the next level

    def place(self, index: int) -> tuple[int, str]:
        """The row of value ``index`` and its field with list indices (``messages[3].content``)."""
        positions = []
        for offsets in reversed(self.offsets):
            owner = int(np.searchsorted(offsets, index, side="right")) - 1
            positions.append(index - int(offsets[owner]))
            index = owner
        positions.reverse()
        text, level = "", 0
        for part in self.path:
            if part == "[]":
                text += f"[{positions[level]}]"
                level += 1
            else:
                text += f".{part}" if text else part
        return index, text


def leaves(table: pa.Table) -> Iterator[Leaf]:
    """Every string leaf of every column of ``table``."""
    for name in table.column_names:
        yield from _walk(_arrow.column(table, name), (name,), ())


def _walk(array: pa.Array, path: tuple[str, ...], offsets: tuple[np.ndarray, ...]) -> Iterator[Leaf]:
    kind = array.type
    if isinstance(kind, pa.BaseExtensionType):
        yield from _walk(array.storage, path, offsets)
    elif pa.types.is_dictionary(kind):
        yield from _walk(_arrow.decoded(array), path, offsets)
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        yield Leaf(path, array, offsets)
    elif pa.types.is_struct(kind):
        for i, field in enumerate(kind):
            yield from _walk(array.field(i), (*path, field.name), offsets)
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        level = _arrow.offsets_of(_arrow.lengths(array))
        yield from _walk(_arrow.flat(array), (*path, "[]"), (*offsets, level))


def replaced(table: pa.Table, new: Mapping[tuple[str, ...], pa.Array]) -> pa.Table:
    """``table`` with the leaves at the paths of ``new`` given new values (each as long as the leaf);
    the columns no path names are the same arrays, untouched."""
    for name in table.column_names:
        mine = {path[1:]: values for path, values in new.items() if path[0] == name}
        if mine:
            table = _arrow.set_column(table, name, _rebuild(_arrow.column(table, name), mine))
    return table


def _rebuild(array: pa.Array, new: Mapping[tuple[str, ...], pa.Array]) -> pa.Array:
    kind = array.type
    if () in new:
        values = new[()]
        return values.cast(kind) if values.type != kind else values
    if isinstance(kind, pa.BaseExtensionType):
        return pa.ExtensionArray.from_storage(kind, _rebuild(array.storage, new))
    if pa.types.is_dictionary(kind):
        return _rebuild(_arrow.decoded(array), new)
    if pa.types.is_struct(kind):
        children = {}
        for field in kind:
            mine = {path[1:]: values for path, values in new.items() if path[0] == field.name}
            if mine:
                children[field.name] = _rebuild(array.field(field.name), mine)
        return _arrow.replace_fields(array, **children)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        inner = _rebuild(_arrow.flat(array), {path[1:]: values for path, values in new.items()})
        offsets = _arrow.offsets_of(_arrow.lengths(array))
        mask = array.is_null() if array.null_count else None
        builder = pa.LargeListArray if pa.types.is_large_list(kind) else pa.ListArray
        offset_type = pa.int64() if pa.types.is_large_list(kind) else pa.int32()
        return builder.from_arrays(pa.array(offsets, offset_type), inner, mask=mask)
    raise TypeError(f"no string leaf under {kind}")  # pragma: no cover - paths come from ``leaves``
