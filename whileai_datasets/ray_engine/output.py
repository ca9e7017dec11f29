"""Where the Ray export writes: part files in a staging directory, moved into place.

Each Ray write task writes its blocks with the local export's writer (so a
part holds exactly the bytes the local export writes for those rows); the
directory (a temp folder of its own beside the output) is moved into place
only once the export's gates passed, as the local export moves its temp file.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import ray.data
from ray.data.datasource import Datasink

from whileai_datasets import _files
from whileai_datasets.errors import ExportFormatError
from whileai_datasets.export import writer as export_writer


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

    def __init__(self, folder: str, suffix: str) -> None:
        self.folder = folder
        self.suffix = suffix

    def on_write_start(self, schema: Any = None) -> None:
        os.makedirs(self.folder, exist_ok=True)

    def write(self, blocks: Iterable[pa.Table], ctx: Any) -> int:
        writer = None
        try:
            for block in blocks:
                if not block.num_rows:
                    continue
                if writer is None:
                    path = os.path.join(self.folder, f"part-{ctx.task_idx:05d}{self.suffix}")
                    writer = export_writer.open_writer(path, export_writer.TRAINING_NULLS)
                writer.write(block)
            if writer is not None:
                writer.commit()
                return writer.rows
            return 0
        finally:
            if writer is not None:
                writer.abort()


def destination(output: str) -> str:
    """``output`` as a directory the export may (re)place: absent, or holding
    only part files of an earlier export."""
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


def staging(dest: str) -> _files.Replacement:
    """A temp folder of this export's own beside ``dest`` for the parts
    (any a killed export left there is removed first)."""
    return _files.Replacement(dest, folder=True)


def commit(parts: _files.Replacement) -> str:
    """Flush the written parts' folder and put it in place of ``dest`` in one
    step, replacing an earlier export (``_files.Replacement.commit``)."""
    return parts.commit()
