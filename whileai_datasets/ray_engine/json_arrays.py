"""``.json`` files holding one JSON array of rows, on Ray: one read task per file, in blocks.

The local builder's reader (``reading.json_array.iter_json_array_rows``) streams the elements; a
JSON array cannot be cut into byte ranges (an element's start is found only by reading from the
array's start), so a file is one read task, as a compressed JSONL stream is. Each element becomes
a row of the block form ``source.Normalize`` reads: its JSON text (re-encoded from the parsed
value, so the normalizer parses exactly what the builder's reader parsed) and its array index as
the row's position. An element the reader refuses in its place (a lone surrogate) travels as that
error's fields, and the normalizer raises it at the row's turn, as the builder does. Text that is
not JSON stops the read task with the reader's error, as it stops the builder.

Which file is an array is decided as the builder decides it (``rows.file_kind.is_json_array``, on
the first bytes of the decompressed stream); a ``.json`` file of one row per line stays JSONL.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Iterator
from typing import IO, Any

from whileai_datasets.errors import ExportFormatError, WhileaiError
from whileai_datasets.reading import file_kind, read_errors
from whileai_datasets.reading.json_array import iter_json_array_rows
from whileai_datasets.rows.normalize import RowContext

#: Decompressed bytes looked at for the array's ``[`` (read a little at a time: a compressed
#: file cut short past its first bytes then fails in its read task, where its rows are read).
_SNIFF_BYTES = 4096
_SNIFF_STEP = 64
_LEADING = b"\xef\xbb\xbf \t\r\n"

#: One block's rows: each element's JSON text, its array index, and the refusal in its place.
Elements = tuple[list[bytes], list[int], list[str | None]]


def holds_array(path: str, opener: Callable[[], IO[bytes]]) -> bool:
    """Whether ``path`` (opened by ``opener``, decompressing) is a ``.json`` file holding a JSON
    array. Raises ``ExportFormatError`` (``read_errors.read_failures``) when its first bytes
    cannot be read."""
    if not file_kind.named_json(path):
        return False
    head = b""
    with read_errors.read_failures(os.path.basename(path), path, opener), opener() as handle:
        while len(head) < _SNIFF_BYTES and not head.lstrip(_LEADING):
            step = handle.read(_SNIFF_STEP)
            if not step:
                break
            head += step
    return file_kind.is_json_array(path, io.BytesIO(head))


def element_blocks(handle: IO[bytes], name: str, block_bytes: int) -> Iterator[Elements]:
    """The elements of the array ``handle`` holds, in blocks of about ``block_bytes`` of JSON
    text (at least one block, empty for ``[]``)."""
    texts: list[bytes] = []
    indices: list[int] = []
    refusals: list[str | None] = []
    size = 0
    yielded = False
    for ctx, value in iter_json_array_rows(handle, name):
        text, refused = _encoded(ctx, value)
        texts.append(text)
        indices.append(int(ctx.row))
        refusals.append(refused)
        size += len(text)
        if size >= block_bytes:
            yield texts, indices, refusals
            texts, indices, refusals, size, yielded = [], [], [], 0, True
    if texts or not yielded:
        yield texts, indices, refusals


def _encoded(ctx: RowContext, value: Any) -> tuple[bytes, str | None]:
    """An element's JSON text, or ``null`` and the fields of the error it is (as JSON text)."""
    if not isinstance(value, WhileaiError):
        try:
            return json.dumps(value, ensure_ascii=False).encode("utf-8"), None
        except RecursionError as err:  # parsed just below the limit, deeper to write back
            value = read_errors.nesting_error(ctx, err)
    fields = {"problem": value.problem, "location": value.location, "hint": value.hint}
    return b"null", json.dumps(fields, ensure_ascii=False)


def refusal(fields: str) -> ExportFormatError:
    """The error ``_encoded`` carried in an element's place."""
    loaded = json.loads(fields)
    return ExportFormatError(loaded["problem"], location=loaded["location"], hint=loaded["hint"])


def element_context(opener: Callable[[], IO[bytes]], name: str, index: int) -> RowContext:
    """The builder's context of array element ``index``: the file, the line the element starts
    on and its index (read again from the start: the error path only)."""
    with opener() as handle:
        for ctx, _ in iter_json_array_rows(handle, name):
            if ctx.row == index:
                return ctx
    raise ExportFormatError(  # the file changed since it was read
        f"the JSON array has no element {index} any more",
        location=name,
        hint="The file changed while it was read: read it again once nothing writes it.",
    )
