"""JSONL lines assembled by one ``take`` over the texts they are made of.

A row's JSON text is a sequence of pieces: constant key texts, per-row value
texts, texts shared by many rows (a dictionary array's values: a source row's
members or lineage repeated by ``unroll``) and runs of message objects joined
with ", ". Concatenating them kernel by kernel copies every byte once per
kernel; here the pieces are laid side by side in one string array, numpy
computes which piece goes where, and one ``take`` writes every line's bytes
exactly once. A repeated message is never copied before that: its text is
referenced by index (``Run.index``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets.columnar._text import join, plain


@dataclass(frozen=True)
class Ref:
    """Per row, ``texts[index[row]]`` (an empty text where that is null)."""

    texts: pa.Array
    index: np.ndarray


@dataclass(frozen=True)
class Run:
    """Per row ``r``, the items ``offsets[r]:offsets[r + 1]`` joined with ", ";
    item ``k`` is ``texts[index[k]]`` (``texts[k]`` without an index; ``index``
    is indexed like the offsets, as a list array's values are)."""

    offsets: np.ndarray
    texts: pa.Array
    index: np.ndarray | None = None


Piece = str | pa.Array | Ref | Run
_SEP = ", "


def reference(array: pa.Array) -> Ref | pa.Array:
    """A dictionary array as a ``Ref`` to its values' texts (others as they are).

    Dictionary values must already be JSON texts (the caller encodes them)."""
    if not pa.types.is_dictionary(array.type):
        return array
    if array.indices.null_count:
        return plain(array.dictionary).take(array.indices)
    return Ref(plain(array.dictionary), np.asarray(array.indices.to_numpy(zero_copy_only=False), dtype=np.int64))


def materialize(piece: Piece) -> str | pa.Array:
    """``piece`` as a constant or a per-row text array (for kernels that need one)."""
    if isinstance(piece, Ref):
        return plain(piece.texts).take(pa.array(piece.index))
    if isinstance(piece, Run):
        start, end = int(piece.offsets[0]), int(piece.offsets[-1])
        texts = plain(piece.texts)
        items = texts.slice(start, end - start) if piece.index is None else texts.take(pa.array(piece.index[start:end]))
        offsets = piece.offsets - start
        lists = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), items)
        return pc.binary_join(lists, _SEP)
    return piece


def assemble(n_rows: int, pieces: list[Piece]) -> pa.Array:
    """Per row, the concatenation of ``pieces`` (a string array of ``n_rows``).

    A ``pa.Array`` piece is one text per row; a null there counts as empty
    (join a member's pieces first where a null must blank the whole member)."""
    pieces = _merged_constants(pieces)
    if not pieces:
        return pa.array([""] * n_rows, pa.string())
    sources: list[pa.Array] = []
    base = 0
    slots: list[tuple[np.ndarray | int, Run | None, int]] = []  # (piece index per row or constant, run, sep)
    for piece in pieces:
        if isinstance(piece, str):
            sources.append(pa.array([piece], pa.string()))
            slots.append((base, None, 0))
            base += 1
        elif isinstance(piece, Ref):
            sources.append(_texts(piece.texts))
            slots.append((base + piece.index, None, 0))
            base += len(piece.texts)
        elif isinstance(piece, Run):
            sources.append(_texts(piece.texts))
            sources.append(pa.array([_SEP], pa.string()))
            sep = base + len(piece.texts)
            slots.append((base, piece, sep))
            base = sep + 1
        else:
            sources.append(_texts(piece))
            slots.append((base + np.arange(n_rows, dtype=np.int64), None, 0))
            base += len(piece)
    if not n_rows:
        return pa.array([], pa.string())
    counts = np.ones((n_rows, len(slots)), dtype=np.int64)
    for p, (_, run, _) in enumerate(slots):
        if run is not None:
            counts[:, p] = np.maximum(2 * np.diff(run.offsets) - 1, 0)
    starts = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts.ravel(), out=starts[1:])
    order = np.empty(int(starts[-1]), dtype=np.int64)
    at = starts[:-1].reshape(n_rows, len(slots))
    for p, (where, run, sep) in enumerate(slots):
        if run is None:
            order[at[:, p]] = where
        else:
            _place_run(order, at[:, p], run, int(where), sep)
    taken = pa.concat_arrays(sources).take(pa.array(order))
    return _lines(taken, starts[: counts.size : len(slots)], n_rows)


def _merged_constants(pieces: list[Piece]) -> list[Piece]:
    merged: list[Piece] = []
    for piece in pieces:
        if isinstance(piece, str) and merged and isinstance(merged[-1], str):
            merged[-1] += piece
        elif not (isinstance(piece, str) and piece == ""):
            merged.append(piece)
    return merged


def _texts(array: pa.Array) -> pa.Array:
    array = plain(array)
    if not pa.types.is_string(array.type):
        array = array.cast(pa.string())
    return pc.fill_null(array, "") if array.null_count else array


def _place_run(order: np.ndarray, at: np.ndarray, run: Run, base: int, sep: int) -> None:
    """Item indices and separators of a run, from each row's slot ``at``."""
    offsets = run.offsets.astype(np.int64)
    sizes = np.diff(offsets)
    n_items = int(sizes.sum())
    if not n_items:
        return
    owner = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    local = np.arange(n_items, dtype=np.int64) - (offsets[:-1] - offsets[0])[owner]
    where = at[owner] + 2 * local
    start, end = int(offsets[0]), int(offsets[-1])
    items = np.arange(start, end, dtype=np.int64) if run.index is None else run.index[start:end]
    order[where] = base + items
    order[where[local < sizes[owner] - 1] + 1] = sep


def _lines(taken: pa.Array, row_starts: np.ndarray, n_rows: int) -> pa.Array:
    """The taken pieces regrouped into one string per row (no copy)."""
    offsets = np.frombuffer(taken.buffers()[1], dtype=np.int32, count=len(taken) + 1, offset=taken.offset * 4)
    bounds = np.append(offsets[row_starts], offsets[-1]).astype(np.int32)
    data = taken.buffers()[2] if taken.buffers()[2] is not None else pa.py_buffer(b"")
    return pa.StringArray.from_buffers(n_rows, pa.py_buffer(bounds), data)


def text_of(pieces: list[Any]) -> pa.Array:
    """The pieces of one member joined, null where any is null (materialized)."""
    return join(*[materialize(p) for p in pieces])
