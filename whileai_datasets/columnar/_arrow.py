"""Shared Arrow helpers for the transforms: columns, list offsets, struct
fields, and the guard for transforms that change the row count. Batches in and
out (and their features) live in ``_batches`` and are re-exported here."""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets.columnar import _batches
from whileai_datasets.columnar._batches import TYPED_COLUMNS as TYPED_COLUMNS  # re-exported for the transforms
from whileai_datasets.columnar._batches import as_table as as_table
from whileai_datasets.columnar._batches import is_one_example as is_one_example
from whileai_datasets.columnar._batches import like as like
from whileai_datasets.columnar._batches import storage_type as storage_type
from whileai_datasets.columnar._batches import table_features as table_features
from whileai_datasets.columnar._batches import typed_array as typed_array
from whileai_datasets.columnar._batches import with_features as with_features
from whileai_datasets.errors import SchemaError

# ---------------------------------------------------------------- lists

#: A message struct field holding the message's JSON object text, computed
#: once before ``unroll`` repeats the message (the JSONL writer uses it).
MEMO_FIELD = "__json"


def column(table: pa.Table, name: str) -> pa.Array:
    """One column as a single array (chunks combined; no copy when there is one)."""
    chunked = table.column(name)
    if chunked.num_chunks == 1:
        return chunked.chunk(0)
    if not chunked.num_chunks:  # pyarrow cannot combine no chunks of a type nesting an extension type (Json)
        return pa.nulls(0, chunked.type)
    return chunked.combine_chunks()


def message_column(table: pa.Table, name: str = "messages") -> pa.ListArray:
    """``name`` as a list-of-message-structs array, or a ``SchemaError``."""
    if name not in table.column_names:
        raise SchemaError(
            f"the batch has no {name!r} column (columns: {', '.join(table.column_names)})",
            location=f"column {name!r}",
            hint='Load the data with load_dataset("whileai/export", ...) so it has the canonical columns.',
        )
    array = column(table, name)
    if _batches.is_json_list(array.type):  # a wire shape's messages (one Json object each): read back to structs
        array = _batches.json_message_structs(array)
    arrow_type = array.type
    if not (pa.types.is_list(arrow_type) and pa.types.is_struct(arrow_type.value_type)):
        raise SchemaError(
            f"expected a list of message structs, got {arrow_type}",
            location=f"column {name!r}",
            hint='Load the data with load_dataset("whileai/export", ...) so messages are message structs.',
        )
    names = {f.name for f in arrow_type.value_type}
    if not {"role", "content"} <= names:
        raise SchemaError(
            f"message structs need 'role' and 'content' fields, got {sorted(names)}",
            location=f"column {name!r}",
            hint='Load the data with load_dataset("whileai/export", ...) so messages are message structs.',
        )
    return array


def lengths(lists: pa.Array) -> np.ndarray:
    """Per-row list lengths as int64, 0 for null lists."""
    return np.asarray(pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False), dtype=np.int64)


def offsets_of(lens: np.ndarray) -> np.ndarray:
    out = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=out[1:])
    return out


def flat(lists: pa.Array) -> pa.Array:
    """The values of a list array, honouring slice offsets and skipping null lists.

    A zero-copy slice of the child when null lists span no values (always so
    for arrays Arrow builds), else a ``take``; ``pc.list_flatten`` cannot
    build values holding extension types (``pa.json_()``)."""
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    offsets = np.asarray(lists.offsets)
    start, end = int(offsets[0]), int(offsets[-1])
    if lists.null_count:
        spans = np.diff(offsets)
        nulls = null_mask(lists)
        if spans[nulls].any():
            keep = spans * ~nulls
            begin = offsets[:-1][~nulls | (keep > 0)]
            size = keep[~nulls | (keep > 0)]
            index = np.repeat(begin - offsets_of(size)[:-1], size) + np.arange(int(size.sum()), dtype=np.int64)
            return lists.values.take(pa.array(index, pa.int64()))
    return lists.values.slice(start, end - start)


def null_mask(array: pa.Array) -> np.ndarray:
    return np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def relist(lists: pa.Array, values: pa.Array) -> pa.ListArray:
    """A list array with the row structure of ``lists`` over new flat ``values``."""
    mask = lists.is_null() if lists.null_count else None
    return build_list(offsets_of(lengths(lists)), values, mask=mask)


def build_list(offsets: np.ndarray, values: pa.Array, mask: pa.Array | None = None) -> pa.ListArray:
    """A list array from int offsets and flat values."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32), pa.int32()), values, mask=mask)


def list_slices(values: pa.Array, begin: np.ndarray, size: np.ndarray) -> pa.ListArray:
    """A list per row: ``values[begin : begin + size]``."""
    offsets = offsets_of(size)
    take = np.repeat(begin - offsets[:-1], size) + np.arange(int(offsets[-1]), dtype=np.int64)
    return build_list(offsets, values.take(pa.array(take, pa.int64())))


def parents(lists: pa.Array) -> np.ndarray:
    """Row index of every flattened value."""
    return np.repeat(np.arange(len(lists), dtype=np.int64), lengths(lists))


def if_else(cond: Any, left: Any, right: Any) -> pa.Array | pa.ChunkedArray:
    """``pc.if_else`` with a null scalar side passed as a null array.

    pyarrow 21 to 23 build broken strings when one side is a null scalar and the
    other a string or binary array that does not start at offset 0 (a slice, a
    struct field of a slice: what ``datasets`` hands every batch after the
    first): offsets out of bounds, or other rows' bytes (apache/arrow#49410,
    fixed in 24). The array-array path is right on every release."""
    sides = (cond, left, right)
    length = next((len(side) for side in sides if isinstance(side, (pa.Array, pa.ChunkedArray))), None)
    if length is not None:
        left, right = (pa.nulls(length, side.type) if _is_null_scalar(side) else side for side in (left, right))
    return pc.if_else(cond, left, right)


def _is_null_scalar(value: Any) -> bool:
    return isinstance(value, pa.Scalar) and not value.is_valid


def replace_fields(struct: pa.Array, **children: pa.Array | None) -> pa.StructArray:
    """``struct`` with some fields replaced; a ``None`` child nulls that field."""
    if isinstance(struct, pa.ChunkedArray):
        struct = struct.combine_chunks()
    arrays = []
    fields = []
    for i, fld in enumerate(struct.type):
        if fld.name == MEMO_FIELD and children:
            continue  # the memoized JSON of the old values no longer holds
        if fld.name in children:
            child = children[fld.name]
            child = pa.nulls(len(struct), fld.type) if child is None else child
            if isinstance(child, pa.ChunkedArray):
                child = child.combine_chunks()
        else:
            child = struct.field(i)  # honours the struct's slice offset
        arrays.append(child)
        fields.append(pa.field(fld.name, child.type))
    mask = struct.is_null() if struct.null_count else None
    return pa.StructArray.from_arrays(arrays, fields=fields, mask=mask)


def set_column(table: pa.Table, name: str, array: pa.Array | pa.ChunkedArray) -> pa.Table:
    """``table`` with column ``name`` replaced, or appended when absent."""
    if name in table.column_names:
        return table.set_column(table.column_names.index(name), name, array)
    return table.append_column(name, array)


def constant_column(value: str | None, n_rows: int, arrow_type: pa.DataType) -> pa.Array:
    """``value`` on ``n_rows`` rows as a one-entry dictionary array: ``take``
    (``unroll``) copies only the indices, and writers splice the one value."""
    if value is None:
        return pa.nulls(n_rows, arrow_type)
    dictionary = pa.array([value], pa.string()).cast(arrow_type)
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n_rows, np.int8), pa.int8()), dictionary)


def constant(array: pa.Array) -> pa.Array | None:
    """The one value of a one-entry dictionary array with no nulls, else None."""
    if not pa.types.is_dictionary(array.type) or array.null_count or len(array.dictionary) != 1 or not len(array):
        return None
    return array.dictionary


def decoded(array: pa.Array) -> pa.Array:
    """A dictionary array as plain values (other arrays as they are)."""
    if pa.types.is_dictionary(array.type):
        return array.dictionary.take(array.indices)
    return array


def drop(table: pa.Table, *names: str) -> pa.Table:
    columns = set(table.column_names)
    present = [n for n in names if n in columns]
    return table.drop_columns(present) if present else table


def optional(table: pa.Table, name: str, arrow_type: pa.DataType) -> pa.Array:
    """Column ``name``, or nulls of ``arrow_type`` when the table has none."""
    if name in table.column_names:
        return column(table, name)
    return pa.nulls(table.num_rows, arrow_type)


def first_true_per_row(flags: np.ndarray, parent: np.ndarray, n_rows: int, *, last: bool = False) -> np.ndarray:
    """Per row, the flat index of its first (or last) True flag, -1 when none."""
    out = np.full(n_rows, -1, dtype=np.int64)
    hits = np.flatnonzero(flags)
    if not len(hits):
        return out
    rows = parent[hits]
    if last:
        keep = np.append(rows[1:] != rows[:-1], True)
    else:
        keep = np.insert(rows[1:] != rows[:-1], 0, True)
    out[rows[keep]] = hits[keep]
    return out


def to_numpy_bool(array: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(array, False).to_numpy(zero_copy_only=False), dtype=bool)


# ---------------------------------------------------------------- guard


def require_batched(batch: Any, transform: str) -> None:
    """Raise when ``datasets`` calls a row-count-changing transform one example at a time."""
    if is_one_example(batch) or _called_unbatched():
        raise SchemaError(
            f"{transform} changes the number of rows, so it needs whole batches, but it was called with one example",
            location=f"Dataset.map({transform})",
            hint=f"Pass batched=True: ds.map({transform}, batched=True).",
        )


def _called_unbatched(max_depth: int = 12) -> bool:
    """``datasets`` formats a single example as a one-row table under
    ``with_format("arrow")``, so the data cannot tell: ask the caller's frame."""
    frame: types.FrameType | None
    try:
        frame = sys._getframe(2)
    except ValueError:  # pragma: no cover - shallow stack
        return False
    for _ in range(max_depth):
        if frame is None:
            return False
        module = frame.f_globals.get("__name__", "")
        if module.startswith("datasets."):
            local = frame.f_locals
            if frame.f_code.co_name == "_map_single" and local.get("batched") is False:
                return True
            owner = local.get("self")
            if type(owner).__name__ == "MappedExamplesIterable" and getattr(owner, "batched", None) is False:
                return True
        frame = frame.f_back
    return False
