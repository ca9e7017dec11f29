"""Source files on any node: what a source names (paths, globs, directories, URIs), how a file is opened
(decompressed, through ``_storage`` for a URI), and where a row key points in it (the error path).

``source`` reads the files; the functions here are what it, the audit and the export share about them.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from functools import partial
from typing import Any

import pyarrow as pa

from whileai_datasets import _storage
from whileai_datasets.errors import ExportFormatError
from whileai_datasets.ray_engine import json_arrays
from whileai_datasets.reading import file_kind, read_errors
from whileai_datasets.rows.normalize import RowContext

_COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd", ".lz4": "lz4", ".xz": "xz"}


def expand_paths(source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
                 filesystem: Any = None) -> list[str]:
    """The files of ``source``: a file, a directory (its data files, sorted), a
    glob pattern (sorted), or a list of those, in the order given; a URI
    (``s3://bucket/prefix/``) names objects the same way (``_storage.expand``)."""
    items = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    paths: list[str] = []
    for item in items:
        path = os.fspath(item)
        if _storage.is_uri(path):
            found = _storage.expand(path, _storage.is_data_name, filesystem)
        elif os.path.isdir(path):
            found = sorted(os.path.join(path, n) for n in os.listdir(path) if _storage.is_data_name(n))
        elif glob.has_magic(path):
            found = sorted(p for p in glob.glob(path) if os.path.isfile(p))
        else:
            found = [path] if os.path.isfile(path) else []
        if not found:
            raise ExportFormatError(
                "no such file (or no .jsonl/.parquet file in that directory or pattern)",
                location=path,
                hint="Pass existing JSONL or Parquet exports: a file, a directory, a glob or a list.",
            )
        paths.extend(found)
    return paths


def compression(path: str) -> str | None:
    return next((c for s, c in _COMPRESSIONS.items() if path.lower().endswith(s)), None)


def is_parquet(path: str, store: _storage.Storage = _storage.LOCAL) -> bool:
    with store.open(path) as handle:
        return file_kind.is_parquet(path, handle)


def is_json_array(path: str, store: _storage.Storage = _storage.LOCAL) -> bool:
    return json_arrays.holds_array(path, partial(open_file, path, store))


def open_file(path: str, store: _storage.Storage = _storage.LOCAL) -> Any:
    """``path``'s bytes, decompressed."""
    return open_stream(path, store) if compression(path) else store.open(path)


def open_stream(path: str, store: _storage.Storage = _storage.LOCAL) -> Any:
    codec = compression(path)
    source: Any = store.open(path) if _storage.is_uri(path) else path
    if codec == "xz":
        import lzma

        return lzma.open(source, "rb")
    return pa.input_stream(source, compression=codec)


def reopen_decoded(path: str, store: _storage.Storage) -> Any:
    """A local file through ``read_errors.decoded_stream``; an object through the reader's own decoder."""
    return open_stream(path, store) if _storage.is_uri(path) else read_errors.decoded_stream(path)


def locate(path: str, pos: int, store: _storage.Storage = _storage.LOCAL) -> tuple[int, int]:
    """``(line, row)`` of the JSONL line at byte ``pos``: the builder's line
    number (1-based) and row number (non-blank lines before it). Error path only."""
    line = row = 0
    with open_file(path, store) as stream:
        read = 0
        tail = b""
        while read < pos:
            chunk = stream.read(min(1 << 20, pos - read))
            if not chunk:
                break
            read += len(chunk)
            parts = (tail + chunk).split(b"\n")
            tail = parts.pop()
            line += len(parts)
            row += sum(1 for p in parts if p.strip())
    return line + 1, row


def row_context(path: str, pos: int, store: _storage.Storage = _storage.LOCAL) -> RowContext:
    """The builder's context of the row at ``pos`` (a row key) of ``path``: its file and row
    number (Parquet), line and array index (a JSON array) or line and row (JSONL). Error path only."""
    name = os.path.basename(path)
    if is_parquet(path, store):
        return RowContext(name, None, pos)
    if is_json_array(path, store):
        return json_arrays.element_context(partial(open_file, path, store), name, pos)
    return RowContext(name, *locate(path, pos, store))
