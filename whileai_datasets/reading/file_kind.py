"""Which whileai inputs are Parquet or one JSON document, and which are JSONL.

A ``.json`` file (optionally compressed) whose first character past whitespace is ``[`` holds one
JSON array of rows, and one whose first line opens an object it does not close holds that one
object, written over several lines (:func:`is_json_array`, the hook that decides how a file is
read); any other ``.json`` file is read as JSONL, one row per line, as ``.jsonl`` files are.

Parquet: the name says so, or the bytes are a whole Parquet file.

Four bytes are not enough to tell: a JSONL file whose first line happens to start with ``PAR1``
(or a line spliced onto such bytes) would be read as Parquet and fail deep inside pyarrow with
"Parquet magic bytes not found in footer". A file is taken for Parquet by its contents only when
it has the magic at both ends and a footer pyarrow can read; any other file without the
``.parquet`` suffix is JSONL, and its errors name the line that is not JSON.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

MAGIC = b"PAR1"
#: the smallest whole file: the magic, a 4-byte footer length and the magic again
_SMALLEST = 12
#: compressed JSONL: never Parquet (and a zstd stream cannot seek back to sniff)
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".lz4")


#: bytes looked at for the ``[`` of a JSON array
_SNIFF_BYTES = 4096
_UTF8_BOM = b"\xef\xbb\xbf"


def named_parquet(name: str) -> bool:
    return name.lower().endswith(".parquet")


def is_parquet(name: str, handle: Any) -> bool:
    """Whether the open binary file ``handle`` (named ``name``) is to be read as Parquet.

    The handle is left at the position it had."""
    if named_parquet(name):
        return True
    if name.lower().endswith(_COMPRESSED) or not _seekable(handle):
        return False
    start = handle.tell()
    try:
        return _whole_parquet(handle)
    finally:
        handle.seek(start)


def is_parquet_path(path: str | os.PathLike[str]) -> bool:
    """`is_parquet` for a local path."""
    with open(path, "rb") as handle:
        return is_parquet(os.fspath(path), handle)


def _seekable(handle: Any) -> bool:
    seekable = getattr(handle, "seekable", None)
    return bool(seekable()) if callable(seekable) else False


def _whole_parquet(handle: Any) -> bool:
    handle.seek(0)
    if handle.read(len(MAGIC)) != MAGIC:
        return False
    size = handle.seek(0, os.SEEK_END)
    if size < _SMALLEST:
        return False
    handle.seek(size - 8)
    tail = handle.read(8)
    footer = int.from_bytes(tail[:4], "little")
    if tail[4:] != MAGIC or footer > size - _SMALLEST:
        return False
    handle.seek(0)
    try:
        pq.read_metadata(handle)
    except (pa.ArrowException, OSError):
        # magic at both ends but no readable footer: not a Parquet file, so read as the JSONL its name says
        return False
    return True


def named_json(name: str) -> bool:
    """Whether ``name`` is a ``.json`` file, compressed or not (not ``.jsonl``)."""
    lower = name.lower()
    for suffix in _COMPRESSED:
        lower = lower.removesuffix(suffix)
    return lower.endswith(".json")


def is_json_array(name: str, handle: Any) -> bool:
    """Whether the open binary file ``handle`` (named ``name``, a ``.json`` file) holds one JSON
    document, read element by element (``reading.json_array``) rather than line by line: a JSON
    array (its first character past whitespace and a UTF-8 byte order mark is ``[``), or one
    object written over several lines (:func:`opens_multiline_object`), read as an array of one.
    Looked at without consuming the handle (``peek``, or a read and a seek back); a stream that
    allows neither is read as JSONL. The handle is left at the position it had."""
    if not named_json(name):
        return False
    peek = getattr(handle, "peek", None)
    if callable(peek):
        head = peek(_SNIFF_BYTES)[:_SNIFF_BYTES]
    elif _seekable(handle):
        start = handle.tell()
        head = handle.read(_SNIFF_BYTES)
        handle.seek(start)
    else:
        return False
    text = bytes(head).removeprefix(_UTF8_BOM).lstrip(b" \t\r\n")
    return text.startswith(b"[") or opens_multiline_object(text)


def opens_multiline_object(text: bytes) -> bool:
    """Whether ``text`` (a file's first bytes, past whitespace) opens one object written over
    several lines: it starts with ``{`` and its first line is not a whole JSON value but ends
    where a pretty printer breaks a line (after ``{``, ``[`` or ``,``). A JSONL file's first line
    is a whole row; one too long for ``text`` to show its end is taken for JSONL."""
    if not text.startswith(b"{"):
        return False
    end = text.find(b"\n")
    if end < 0:
        return False
    first = text[:end].rstrip(b" \t\r")
    if not first.endswith((b"{", b"[", b",")):
        return False
    try:
        json.loads(first)
    except ValueError:
        return True
    return False
