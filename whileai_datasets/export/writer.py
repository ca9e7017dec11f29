"""Writing wire tables: JSONL (whileai's files, built column-wise) or Parquet.

Both write to ``<dest>.tmp`` and rename on ``commit``, as whileai does, so a
failed or refused export never leaves a half-written file behind.

Parquet files carry ``datasets``' feature metadata with built-in types only
(each message one ``Json`` value with exactly its own keys), so
``Dataset.from_parquet`` reads them on a machine without this package.

JSONL rows carry exactly whileai's keys: a null value leaves its key out,
except the keys whileai writes as ``null``: a group's ``reward_mean`` /
``reward_std`` (on rows that have a ``group_id``) and a preference row's
``prompt``.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO

import pyarrow as pa
import pyarrow.parquet as pq

from whileai_datasets.export import direct_file
from whileai_datasets.transforms import _json, _portable

#: Null rules of whileai's training rows (see ``_json.encode_rows``).
TRAINING_NULLS: dict[str, str | bool] = {"reward_mean": "group_id", "reward_std": "group_id"}
#: Null rules of whileai's preference rows.
PREFERENCE_NULLS: dict[str, str | bool] = {"prompt": True}
#: JSONL written past the page cache where the file system allows (``direct_file``)
DIRECT_WRITES = True


class Writer:
    """A JSONL or Parquet file written a table at a time."""

    def __init__(self, dest: str, keep_null: dict[str, str | bool]) -> None:
        self.dest = Path(dest)
        self.tmp = self.dest.with_name(self.dest.name + ".tmp")
        self.keep_null = keep_null
        self.parquet = self.dest.suffix.lower() == ".parquet"
        self.dest.parent.mkdir(parents=True, exist_ok=True)
        self._handle: IO[bytes] | direct_file.DirectFile | None = None
        self._parquet: pq.ParquetWriter | None = None
        self._schema: pa.Schema | None = None
        self.rows = 0
        self._closed = False
        if not self.parquet:
            self._handle = direct_file.open_for_writing(str(self.tmp)) if DIRECT_WRITES else open(self.tmp, "wb")

    def write(self, table: pa.Table) -> None:
        self.write_encoded(self.encode(table))

    def encode(self, table: pa.Table) -> pa.Table | pa.Array:
        """What ``write_encoded`` writes (safe to compute in another thread):
        the rows' JSON texts, or the table for Parquet."""
        if self.parquet:
            return table
        return _json.encode_rows(table, keep_null=self.keep_null)

    def write_encoded(self, payload: pa.Table | pa.Array) -> None:
        if self._handle is None:
            self.rows += payload.num_rows
            self._write_parquet(payload)
            return
        self.rows += len(payload)
        self._handle.write(_json.lines_bytes(payload))

    def _write_parquet(self, table: pa.Table) -> None:
        table = _portable.portable_table(table)  # dictionaries decoded, messages as Json: loads anywhere
        if self._parquet is None:
            self._schema = table.schema
            self._parquet = pq.ParquetWriter(self.tmp, self._schema)
        if table.num_rows:
            self._parquet.write_table(table.select(self._schema.names).cast(self._schema))  # type: ignore[union-attr]

    def commit(self) -> str:
        """Close and move the file into place; returns its path."""
        self._close()
        self.tmp.replace(self.dest)
        return str(self.dest)

    def abort(self) -> None:
        """Close and remove the temporary file, if it is still there."""
        self._close()
        if self.tmp.exists():
            self.tmp.unlink()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        if self._parquet is not None:
            self._parquet.close()
            self._parquet = None
        elif self.parquet and not self.tmp.exists():
            pq.write_table(pa.table({}), self.tmp)


def open_writer(dest: str, keep_null: dict[str, str | bool]) -> Writer:
    return Writer(dest, keep_null)


__all__ = ["PREFERENCE_NULLS", "TRAINING_NULLS", "Writer", "open_writer"]
