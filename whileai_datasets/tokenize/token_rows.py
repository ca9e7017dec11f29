"""A batch's rows for ``tokenize``: its columns checked, decoded chunk by chunk into what the template reads, and
split at their turns where a row is too long (``truncation="split_turns"``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from whileai_datasets.errors import SchemaError
from whileai_datasets.rows.features import messages_from_arrow
from whileai_datasets.tokenize.template_input import template_messages_in_place

#: Rows rendered before their texts go to the encoding thread (``Tokenize.rows``).
RENDER_CHUNK = 128
#: The first chunks of a batch are smaller: the encoding thread waits for the first one to be rendered, so
#: it starts sooner (alternating in one process, 8 pairs of 4,000 unique rows: 1.08-1.13x the wall time of
#: 128-row chunks throughout; smaller last chunks, for the rendering thread's wait at the end, gained nothing).
FIRST_CHUNKS = (16, 32, 64)


def chunk_bounds(rows: int) -> list[tuple[int, int]]:
    """(start, end) of each chunk of a batch of ``rows``: ``FIRST_CHUNKS``, then ``RENDER_CHUNK`` rows each."""
    sizes = iter(FIRST_CHUNKS)
    bounds, start = [], 0
    while start < rows:
        end = min(rows, start + next(sizes, RENDER_CHUNK))
        bounds.append((start, end))
        start = end
    return bounds


Decoded = tuple[list[list[dict[str, Any]]], list[Any], list[list[int]]]  # messages, tools, loss masks


def check_columns(batch: Any, column: str) -> None:
    names = batch.column_names if isinstance(batch, pa.Table) else sorted(batch)
    if column not in names or "loss_mask" not in names:
        raise SchemaError(
            f"the batch has no {column!r} and 'loss_mask' columns (it has {names})",
            hint="Tokenize canonical rows (load_dataset('whileai/export', ...)), before any wire shape.",
        )


def decode_table(batch: pa.Table, column: str, decoded: dict[str, Any], form: Any = None,
                 rows: Sequence[int] | None = None, start: int = 0) -> Decoded:
    """(messages, tools, loss masks) of Arrow rows; ``decoded`` holds each distinct tools text decoded once
    (rows share their tool schemas, and so their prepared copies: ``render.batch_inputs``). With ``form``
    (an ``InputForm``), the messages come as the template is handed them (``template_input``). Errors name
    a row by its number in ``rows`` (the dataset's, from ``ds.map(..., with_indices=True)``), else by
    ``start`` plus its place in ``batch``."""
    def where(row: int) -> str:
        return f"row {rows[row]}" if rows is not None else f"row {start + row} of the batch"

    messages = messages_from_arrow(batch.column(column))
    if batch.column(column).null_count:
        raise SchemaError(f"{where(messages.index(None))} has no {column!r} (null)",  # type: ignore[arg-type]
                          hint=f"Drop the rows without a conversation first: ds.filter(lambda row: row[{column!r}] "
                               "is not None).")
    if form is not None:  # as the template sees them (``render.batch_inputs(messages_prepared=True)``)
        for row in messages:
            template_messages_in_place(row, form)
    tools_column = batch.column("tools").to_pylist() if "tools" in batch.column_names else [None] * batch.num_rows
    tools = [(decoded[t] if t in decoded else decoded.setdefault(t, _tools(t, where(row))))
             if isinstance(t, str) else t for row, t in enumerate(tools_column)]
    return messages, tools, batch.column("loss_mask").to_pylist()


def _tools(text: str, where: str) -> Any:
    """A row's ``tools`` text decoded, or an error naming the row and the place the JSON breaks."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise SchemaError(f"{where}: its 'tools' is not JSON ({err.msg} at character {err.pos})",
                          hint="Rows loaded with load_dataset('whileai/export', ...) carry their tool schemas as "
                               "JSON text; fix or drop this row's 'tools' before tokenizing.") from None


def batch_chunks(batch: Any, column: str, form: Any, indices: Sequence[int] | None = None) -> Iterator[Decoded]:
    """The batch decoded a chunk at a time (``chunk_bounds``), whichever kind it is (an Arrow batch is decoded
    chunk by chunk, so the encoding thread already works while later chunks are decoded, and its messages
    come shaped in ``form``, the template's input: nobody else holds them)."""
    if isinstance(batch, pa.Table):
        decoded: dict[str, Any] = {}
        for start, end in chunk_bounds(batch.num_rows):
            rows = indices[start:end] if indices is not None else None
            yield decode_table(batch.slice(start, end - start), column, decoded, form, rows, start)
        return
    n = len(batch[column])
    yield from list_chunks(list(batch[column]), list(batch.get("tools") or [None] * n), list(batch["loss_mask"]))


def list_chunks(messages: list[Any], tools: list[Any], masks: list[Any]) -> Iterator[Decoded]:
    for start, end in chunk_bounds(len(messages)):
        yield messages[start:end], tools[start:end], masks[start:end]


#: (first message, end) of each piece of a row split at its turns, after the leading messages every piece repeats
Pieces = tuple[int, list[tuple[int, int]]]


def turn_pieces(messages: Sequence[Mapping[str, Any]], fits: Callable[[int, int, int], bool]) -> Pieces:
    """Where a row too long for the limit splits (``truncation="split_turns"``): its leading system (and
    developer) messages, which every piece repeats, and the pieces after them, each opened by a user message (or,
    the first, by whatever follows the leading ones) and holding as many whole turns as ``fits(head, start, end)``
    (the leading messages plus ``messages[start:end]`` within the limit) allows, one turn at the least. A row with
    no second user turn is one piece (its tail is then cut as ``"whole_turns"`` cuts it)."""
    head = 0
    while head < len(messages) and messages[head].get("role") in ("system", "developer"):
        head += 1
    starts = [head] + [i for i in range(head + 1, len(messages)) if messages[i].get("role") == "user"]
    bounds = [*starts[1:], len(messages)]
    pieces: list[tuple[int, int]] = []
    first = 0
    while first < len(starts):
        last = first
        while last + 1 < len(starts) and fits(head, starts[first], bounds[last + 1]):
            last += 1
        pieces.append((starts[first], bounds[last]))
        first = last + 1
    return head, pieces


def split_batch(batch: Any, column: str, split: dict[int, Pieces], indices: Sequence[int] | None
                ) -> tuple[Any, list[int] | None, list[int]]:
    """``batch`` with each row of ``split`` replaced by its pieces (every other column repeated; the messages
    and ``loss_mask`` of a piece are the row's leading ones plus the piece's), ``indices`` to match, and the
    row of ``batch`` each row came from."""
    total = batch.num_rows if isinstance(batch, pa.Table) else len(batch[column])
    if not split:
        return batch, indices, list(range(total))
    spans = [[(0, None)] if row not in split else [((0, split[row][0]), piece) for piece in split[row][1]]
             for row in range(total)]
    source = [row for row, pieces in enumerate(spans) for _ in pieces]
    rows = None if indices is None else [indices[row] for row in source]
    if isinstance(batch, pa.Table):
        table = batch.take(pa.array(source, pa.int64()))
        for name in (column, "loss_mask"):
            table = table.set_column(table.column_names.index(name), name, _pieces_of(batch.column(name), spans))
        return table, rows, source
    out = {name: [items[row] for row in source] for name, items in batch.items()}
    for name in (column, "loss_mask"):
        out[name] = [items if piece == (0, None) else items[:piece[0][1]] + items[piece[1][0]:piece[1][1]]
                     for items, pieces in zip(batch[name], spans) for piece in pieces]
    return out, rows, source


def _pieces_of(column: pa.ChunkedArray, spans: list[list[Any]]) -> pa.Array:
    """A list column's rows cut into their pieces (``split_batch``): the items taken by index, Arrow's own."""
    array = column.combine_chunks()
    offsets = np.asarray(array.offsets, dtype=np.int64)
    offsets -= offsets[0]
    taken: list[np.ndarray] = []
    ends = [0]
    for row, pieces in enumerate(spans):
        for piece in pieces:
            if piece == (0, None):
                parts = [np.arange(offsets[row], offsets[row + 1])]
            else:
                parts = [offsets[row] + np.arange(*piece[0]), offsets[row] + np.arange(*piece[1])]
            taken += parts
            ends.append(ends[-1] + sum(len(part) for part in parts))
    values = array.flatten().take(pa.array(np.concatenate(taken), pa.int64()))
    kind = pa.LargeListArray if pa.types.is_large_list(array.type) else pa.ListArray
    width = pa.int64() if kind is pa.LargeListArray else pa.int32()
    return kind.from_arrays(pa.array(ends, width), values, type=array.type)
