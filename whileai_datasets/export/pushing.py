"""``push_to``: publish what an export wrote, streaming, with ``whileai_datasets.hub.publish``.

The file an export writes does not always say which turns carry loss (a TRL or Fireworks file
drops the mask, an unrolled one repeats each conversation per turn), so the canonical rows are
rebuilt by a second pass of the source through the same chunk pipeline. Each chunk goes to an
Arrow stream file in a temporary folder (``TMPDIR``) as soon as it is made; the publisher then
reads that file a record batch at a time (``hub.reading``), as it reads a ``datasets`` cache
file. So a push holds about a chunk of rows at a time, whatever the row count, and the folder
(about the size of the canonical rows) is removed when the push is done or fails.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from whileai_datasets import option_names
from whileai_datasets.columnar import _arrow
from whileai_datasets.errors import ExportFormatError

#: Turns one chunk of source rows (and its first row's offset) into canonical rows.
ChunkRows = Callable[[pa.Table, int], pa.Table]


def push_rows(path: str, repo_id: str, report: dict[str, Any], chunks: Iterable[pa.Table],
              canonical: ChunkRows) -> dict[str, Any]:
    """Publish the canonical rows of `chunks` (each through `canonical`) to a private repo; whileai's
    ``repo_id``, ``repo_type``, ``url``, ``commit`` and ``private``, with ``splits`` (rows per split of
    the default config) in place of its ``files``. `path` is the written file the card names."""
    with tempfile.TemporaryDirectory(prefix="whileai-push-") as folder:
        spilled = spill(canonical_chunks(chunks, canonical), Path(folder) / "canonical.arrow")
        return push_file(path, repo_id, report, rows=spilled)


def canonical_chunks(chunks: Iterable[pa.Table], canonical: ChunkRows) -> Iterable[pa.Table]:
    offset = 0
    for chunk in chunks:
        yield canonical(chunk, offset)
        offset += chunk.num_rows


def push_file(path: str, repo_id: str, report: dict[str, Any], *, rows: Any) -> dict[str, Any]:
    """Publish `rows` (a ``datasets.Dataset`` of canonical rows) as `push_rows` does."""
    from whileai_datasets.hub import publish

    result = publish(rows, repo_id, private=True, report=report, sources=[path])
    return {
        "repo_id": result["repo_id"],
        "repo_type": "dataset",
        "url": result["url"],
        "commit": result["commit"],
        "private": result["private"],
        "splits": result["splits"],
    }


def spill(tables: Iterable[pa.Table], path: Path) -> Any:
    """`tables` written one after another to the Arrow stream file `path`, as a ``datasets.Dataset``
    mapped from it (its rows stay on disk). A table whose schema the first one's cannot hold (a column
    typed null so far, a new column) widens the file's schema: what was written is rewritten once."""
    import datasets

    writer: pa.ipc.RecordBatchStreamWriter | None = None
    schema: pa.Schema | None = None
    try:
        for table in tables:
            table = _plain(table)
            if schema is not None and not table.schema.equals(schema, check_metadata=False):
                fitted = _fit(table, schema)
                if fitted is None:
                    assert writer is not None
                    writer.close()
                    schema = _wider(schema, table.schema)
                    writer = _rewrite(path, schema)
                    fitted = _fit(table, schema)
                    assert fitted is not None
                table = fitted
            if writer is None:
                schema = table.schema
                writer = pa.ipc.new_stream(str(path), schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        raise ValueError("push_to: the export produced no chunk of rows to publish")
    return datasets.Dataset.from_file(str(path))


def _plain(table: pa.Table) -> pa.Table:
    """`table` without dictionary columns (``datasets`` has no feature for a dictionary of Json)."""
    for i, name in enumerate(table.column_names):
        if pa.types.is_dictionary(table.schema.field(i).type):
            table = table.set_column(i, name, _arrow.decoded(_arrow.column(table, name)))
    return table.replace_schema_metadata(None)


def _fit(table: pa.Table, schema: pa.Schema) -> pa.Table | None:
    """`table` cast to `schema` (missing columns as nulls), or None when `schema` cannot hold it."""
    if set(table.column_names) - set(schema.names):
        return None
    for name in schema.names:
        if name not in table.column_names:
            table = table.append_column(schema.field(name), pa.nulls(table.num_rows, schema.field(name).type))
    try:
        return table.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


def _wider(schema: pa.Schema, later: pa.Schema) -> pa.Schema:
    try:
        return pa.unify_schemas([schema, later], promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        flag = option_names.spell("push_to").rstrip("=")
        publish = "whileai-datasets push" if option_names.in_command_line() else "whileai_datasets.publish"
        raise ExportFormatError(f"{flag}: a later chunk of rows has columns the first chunk's types cannot hold "
                                f"({err})", location=flag,
                                hint=f"Give every row's carried keys one type (or export without {flag} and "
                                f"publish the cast rows with {publish})") from err


def _rewrite(path: Path, schema: pa.Schema) -> pa.ipc.RecordBatchStreamWriter:
    """Copy the stream file at `path` into one with `schema` (a batch at a time); the writer, open for more."""
    wider = path.with_suffix(".wider")
    writer = pa.ipc.new_stream(str(wider), schema)
    with pa.OSFile(str(path)) as handle:
        for batch in pa.ipc.open_stream(handle):
            fitted = _fit(pa.Table.from_batches([batch]), schema)
            assert fitted is not None  # `schema` unifies the one the file was written with
            writer.write_table(fitted)
    wider.replace(path)  # the open writer keeps writing to the moved file
    return writer
