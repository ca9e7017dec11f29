"""Writing wire tables: JSONL (whileai's files, built column-wise) or Parquet.

Both write a temp file of their own beside the output and rename it on
``commit`` (``_files.Replacement``: exclusive temp, fsync, atomic rename), so
a failed, refused or concurrent export never leaves a half-written file.

Parquet files carry ``datasets``' feature metadata with built-in types only
(each message one ``Json`` value with exactly its own keys), so
``Dataset.from_parquet`` reads them on a machine without this package.

JSONL rows carry exactly whileai's keys: a null value leaves its key out,
except the keys whileai writes as ``null``: a group's ``reward_mean`` /
``reward_std`` (on rows that have a ``group_id``) and a preference row's
``prompt``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pyarrow as pa
import pyarrow.parquet as pq

from whileai_datasets import _files
from whileai_datasets.columnar import _json, _portable
from whileai_datasets.shaping import direct_file

#: Null rules of whileai's training rows (see ``_json.encode_rows``).
TRAINING_NULLS: dict[str, str | bool] = {"reward_mean": "group_id", "reward_std": "group_id"}
#: Null rules of whileai's preference rows.
PREFERENCE_NULLS: dict[str, str | bool] = {"prompt": True}
#: JSONL written past the page cache where the file system allows (``direct_file``)
DIRECT_WRITES = True


class Writer:
    """A JSONL or Parquet file written a table at a time, into a temp file
    of its own that ``commit`` puts in place whole (``_files.Replacement``).

    Every failure to write (a full disk, a lost mount) raises ``WriteError``
    naming the file, the cause and what was written, with the temp removed
    and the old file (if any) untouched."""

    def __init__(self, dest: str, keep_null: dict[str, str | bool]) -> None:
        self.dest = Path(dest)
        self.keep_null = keep_null
        self.parquet = self.dest.suffix.lower() == ".parquet"
        self._target = _files.Replacement(self.dest)
        self.tmp = Path(self._target.path)
        self._handle: IO[bytes] | direct_file.DirectFile | None = None
        self._parquet: pq.ParquetWriter | None = None
        self._schema: pa.Schema | None = None
        self.rows = 0
        #: bytes of JSONL handed to the file so far
        self.bytes = 0
        self._closed = False
        if self.parquet:
            return
        with self._failures():
            fd = self._target.take_fd()
            self._handle = direct_file.for_descriptor(fd, str(self.tmp)) if DIRECT_WRITES else os.fdopen(fd, "wb")

    @contextlib.contextmanager
    def _failures(self) -> Iterator[None]:
        """An ``OSError`` (pyarrow's included) becomes the ``WriteError`` of
        this file, the temp removed."""
        try:
            yield
        except OSError as err:
            self._close(discard=True)
            raise self._target.failed(err, written=self.bytes) from err

    def write(self, table: pa.Table) -> None:
        self.write_encoded(self.encode(table))

    def encode(self, table: pa.Table) -> pa.Table | pa.Array:
        """What ``write_encoded`` writes (safe to compute in another thread):
        the rows' JSON texts, or the table for Parquet."""
        if self.parquet:
            return table
        return _json.encode_rows(table, keep_null=self.keep_null)

    def write_encoded(self, payload: pa.Table | pa.Array) -> None:
        with self._failures():
            if self._handle is None:
                self.rows += payload.num_rows
                self._write_parquet(payload)
                return
            self.rows += len(payload)
            data = _json.lines_bytes(payload)
            self.bytes += memoryview(data).nbytes
            self._handle.write(data)

    def _write_parquet(self, table: pa.Table) -> None:
        table = _portable.portable_table(table)  # dictionaries decoded, messages as Json: loads anywhere
        if self._parquet is None:
            self._schema = table.schema
            self._parquet = pq.ParquetWriter(self.tmp, self._schema)
        if table.num_rows:
            self._parquet.write_table(table.select(self._schema.names).cast(self._schema))  # type: ignore[union-attr]

    def commit(self) -> str:
        """Close, flush to the device and move the file into place; returns its path.

        Raises:
            WriteError: it could not be written whole, or another writer
                replaced the file meanwhile (that one's file is left).
        """
        with self._failures():
            self._close()
        return self._target.commit()

    def abort(self) -> None:
        """Close and remove the temporary file, if it is still there (after
        ``commit`` it is not); never writes more."""
        try:
            self._close(discard=True)
        finally:
            self._target.discard()

    def _close(self, *, discard: bool = False) -> None:
        """Close the file. With ``discard`` (it is being thrown away) nothing
        more is written and no error escapes, so the temp is always removed."""
        if self._closed:
            return
        self._closed = True
        handle, self._handle = self._handle, None
        parquet, self._parquet = self._parquet, None
        with contextlib.suppress(OSError, pa.ArrowException) if discard else contextlib.nullcontext():
            if isinstance(handle, direct_file.DirectFile):
                handle.close(discard=discard)
            elif handle is not None:
                _close_file(handle, discard)
            if parquet is not None:
                parquet.close()
            elif self.parquet and not discard:
                pq.write_table(pa.table({}), self.tmp)


def _close_file(handle: IO[bytes], discard: bool) -> None:
    """Close a buffered file; when it is thrown away and the flush of what is
    still buffered fails (a full disk), the descriptor is released anyway."""
    try:
        handle.close()
    except OSError:
        if not discard:
            raise
        if not handle.closed:
            os.close(handle.fileno())


def open_writer(dest: str, keep_null: dict[str, str | bool]) -> Writer:
    return Writer(dest, keep_null)


__all__ = ["PREFERENCE_NULLS", "TRAINING_NULLS", "Writer", "open_writer"]
