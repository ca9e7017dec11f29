"""Where the Ray export writes: part files in a staging directory, moved into place.

Each Ray write task writes its blocks with the local export's writer (so a
part holds exactly the bytes the local export writes for those rows); the
directory (a temp folder of its own beside the output) is moved into place
only once the export's gates passed, as the local export moves its temp file.
An output URI (``s3://bucket/out/``) needs no folder every node mounts: each
task writes its part locally and uploads it under a hidden staging prefix
beside the output (``_storage.ObjectStaging``), copied into place at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import ray.data
from ray.data.datasource import Datasink

from whileai_datasets import _files, _storage
from whileai_datasets.errors import ExportFormatError
from whileai_datasets.shaping import writer as export_writer


@contextlib.contextmanager
def ordered() -> Iterator[None]:
    """Ray Data keeps block order while the export runs (file order out, and
    contiguous blocks for the report's row indices)."""
    options = ray.data.DataContext.get_current().execution_options
    before = options.preserve_order
    options.preserve_order = True
    try:
        yield
    finally:
        options.preserve_order = before


class Parts(Datasink[int]):
    """Each Ray write task writes its blocks to one part file with the local
    export's writer (``part-<task>.parquet`` or ``.jsonl``)."""

    def __init__(self, folder: str, suffix: str, storage: _storage.Storage = _storage.LOCAL) -> None:
        self.folder = folder
        self.suffix = suffix
        self.storage = storage

    def on_write_start(self, schema: Any = None) -> None:
        if not _storage.is_uri(self.folder):
            os.makedirs(self.folder, exist_ok=True)

    def write(self, blocks: Iterable[pa.Table], ctx: Any) -> int:
        name = f"part-{ctx.task_idx:05d}{self.suffix}"
        if not _storage.is_uri(self.folder):
            return _write_part(blocks, os.path.join(self.folder, name))
        local = tempfile.mkdtemp(prefix=f"whileai-part-{_files.owner_tag()}")
        try:
            rows = _write_part(blocks, os.path.join(local, name))
            if rows:
                _storage.upload(os.path.join(local, name), f"{self.folder}/{name}", self.storage.filesystem)
            return rows
        finally:
            shutil.rmtree(local, ignore_errors=True)


def _write_part(blocks: Iterable[pa.Table], path: str) -> int:
    """The non-empty blocks written to the part file ``path``; its row count (no file for none)."""
    writer = None
    try:
        for block in blocks:
            if not block.num_rows:
                continue
            if writer is None:
                writer = export_writer.open_writer(path, export_writer.TRAINING_NULLS)
            writer.write(block)
        if writer is not None:
            writer.commit()
            return int(writer.rows)
        return 0
    finally:
        if writer is not None:
            writer.abort()


def destination(output: str, filesystem: Any = None) -> str:
    """``output`` as a directory the export may (re)place: absent, or holding
    only part files of an earlier export."""
    if _storage.is_uri(output):
        return _object_destination(output, filesystem)
    dest = os.path.abspath(output)
    if os.path.isfile(dest):
        raise ExportFormatError(
            "the Ray export writes a directory of part files, and this is a file",
            location=output,
            hint="Pass a directory path (out/ or out.jsonl/ for JSONL parts), or remove the file.",
        )
    if os.path.isdir(dest):
        other = [n for n in os.listdir(dest) if not n.startswith("part-")]
        if other:
            raise ExportFormatError(
                "the output directory holds files that are not part files of an export "
                f"({', '.join(sorted(other)[:3])})",
                location=output,
                hint="Pass a new or empty directory; an earlier export's directory is replaced.",
            )
    return dest


def _object_destination(output: str, filesystem: Any) -> str:
    """A URI output: no object at that key, and under that prefix only part files."""
    dest = output.rstrip("/")
    _storage.check_bucket(dest, filesystem, writing=True)
    listed = _storage.expand(dest, _not_a_part, filesystem)
    if listed == [dest]:
        raise ExportFormatError("the Ray export writes a prefix of part files, and this is an object",
                                location=output, hint="Pass a prefix (s3://bucket/out/), or remove the object.")
    if listed:
        names = ", ".join(sorted(u.rsplit("/", 1)[1] for u in listed)[:3])
        raise ExportFormatError(f"the output prefix holds objects that are not part files of an export ({names})",
                                location=output, hint="Pass a new or empty prefix; an earlier export's parts are "
                                                      "replaced.")
    return dest


def _not_a_part(name: str) -> bool:
    return not name.startswith("part-")


def staging(dest: str, filesystem: Any = None) -> _files.Replacement | _storage.ObjectStaging:
    """A temp folder of this export's own beside ``dest`` for the parts
    (any a killed export left there is removed first); for a URI, a hidden
    staging prefix beside it."""
    if _storage.is_uri(dest):
        return _storage.ObjectStaging(dest, filesystem)
    return _files.Replacement(dest, folder=True)


def commit(parts: _files.Replacement | _storage.ObjectStaging) -> str:
    """Flush the written parts' folder and put it in place of ``dest`` in one
    step, replacing an earlier export (``_files.Replacement.commit``)."""
    return parts.commit()
