"""The Ray Data engine: reading, grouping and exporting (see the package docstring)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
import ray
import ray.data

from whileai_datasets import _storage
from whileai_datasets._options import TrainingOptions, check_choice, choices
from whileai_datasets._typing import ExportFormat, MaskMode
from whileai_datasets.builders import unread
from whileai_datasets.columnar import _arrow
from whileai_datasets.errors import ExportFormatError, OptionError, WhileaiError, stacklevel_outside
from whileai_datasets.ray_engine import block_counts, source_files
from whileai_datasets.ray_engine import output as ray_output
from whileai_datasets.ray_engine import source as ray_source
from whileai_datasets.ray_engine.groups import GroupLookup, group_table, stamp_groups
from whileai_datasets.rows.canonical import Options
from whileai_datasets.shaping import overwrite, pipeline, refusals, reports

#: The public row key: the file a row came from and its position in it.
SOURCE_FILE = "source_file"
SOURCE_OFFSET = "source_offset"
#: Builder configs the Ray reader offers (``raw`` numbers rows by line, which
#: byte-range reading does not count).
RayConfig = Literal["default", "preference"]
CONFIGS: tuple[str, ...] = choices(RayConfig)

__all__ = ["export_training", "read_whileai", "stamp_groups"]


# ---------------------------------------------------------------- reading


def read_whileai(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    config: str = "default",
    system_prompt: str | None = None,
    tools: Any = None,
    mask_mode: MaskMode = "assistant",
    keep_message_keys: bool = False,
    row_key: bool = False,
    range_bytes: int = ray_source.RANGE_BYTES,
    block_bytes: int = ray_source.BLOCK_BYTES,
    filesystem: Any = None,
) -> Any:
    """whileai rows of any shape as a Ray dataset in the canonical schema.

    The Ray counterpart of ``load_dataset("whileai/export", data_files=...)``:
    the same options and rows. They come in file order when
    ``ray.data.DataContext.get_current().execution_options.preserve_order``
    is set; otherwise sort on the row key (``row_key=True``).

    Args:
        source: A file, a directory, a glob pattern, or a list of them
            (``.jsonl``/``.json``/``.ndjson``, optionally ``.gz``/``.bz2``/
            ``.xz``/``.zst``/``.lz4``, or ``.parquet``), on a filesystem every
            node of the cluster mounts, or URIs (``s3://bucket/prefix/``,
            ``gs://...``: an object, a prefix or a glob) every node opens.
        config: ``"default"`` (training rows) or ``"preference"`` (pairs).
        system_prompt, tools, mask_mode, keep_message_keys: As the builder's.
        row_key: Add ``source_file`` (the path) and ``source_offset`` (the
            line's byte offset in the decompressed file, the array index in a
            ``.json`` array, or the Parquet row number): sort on them to restore file order, or keep them for
            ``stamp_groups``.
        range_bytes: JSONL bytes per read task (the unit of parallelism).
        block_bytes: JSONL bytes per block (the unit ``map_batches`` sees).
        filesystem: A ``pyarrow.fs.FileSystem`` or ``fsspec`` filesystem that
            opens the URIs (pickled to the workers); by default each URI's
            scheme picks one, with credentials from the environment.
    Returns:
        A lazy ``ray.data.Dataset``.
    Raises:
        OptionError: a bad ``config`` or ``mask_mode``.
        ExportFormatError: no such file. Bad rows fail the
            Ray job; the error text names the file and line.
    """
    from whileai_datasets.builders.inputs import load_tools

    check_choice(config, "config", RayConfig, hint="The raw config numbers rows by line, which Ray's byte-range "
                 "reading does not count: load it with load_dataset('whileai/export', 'raw', ...).")
    check_choice(mask_mode, "mask_mode", MaskMode)
    paths = source_files.expand_paths(source, filesystem=filesystem)
    options = Options(
        system_prompt=str(system_prompt or ""),
        tools=load_tools(tools),
        mask_mode=mask_mode,
        keep_message_keys=keep_message_keys,
    )
    return canonical_rows(paths, config, options, None, (range_bytes, block_bytes), _storage.Storage(filesystem),
                          row_key=row_key)


def canonical_rows(paths: Sequence[str], config: str, options: Options, report: Any, sizes: tuple[int, int],
                   storage: Any, *, row_key: bool) -> Any:
    """``read_whileai``'s rows of `paths`, checked, with `report` (a ``block_counts.Reporter``, or None) told
    each block's errors and unread keys: what the engine's own jobs read through."""
    ds = _canonical(paths, config, options, report, sizes, storage)
    return ds.map_batches(PublicKey(tuple(paths), row_key), batch_format="pyarrow", batch_size=None)


def _canonical(
    paths: Sequence[str], config: str, options: Options, report: Any, sizes: tuple[int, int], storage: Any
) -> Any:
    """Canonical rows with the private row key and raw-row columns."""
    files = ray_source.WhileaiFiles(paths, range_bytes=sizes[0], block_bytes=sizes[1], storage=storage)
    normalize = ray_source.Normalize(tuple(paths), config, options, report, storage)
    # one block stream per read task: Ray would otherwise cut the blocks to reach its default task count
    blocks = ray.data.read_datasource(files, override_num_blocks=files.n_tasks())
    return blocks.map_batches(normalize, batch_format="pyarrow", batch_size=None)


@dataclass(frozen=True)
class PublicKey:
    """The private row-key columns as ``source_file`` / ``source_offset``, or dropped."""

    paths: tuple[str, ...]
    keep: bool

    def __call__(self, table: pa.Table) -> pa.Table:
        if not table.num_rows:  # Ray hands on empty blocks without their columns
            return table
        key = (_arrow.column(table, ray_source.FILE), _arrow.column(table, ray_source.POS))
        table = _arrow.drop(table, *ray_source.PRIVATE)
        if not self.keep:
            return table
        names = pa.array(self.paths, pa.string()).take(key[0])
        return table.append_column(SOURCE_FILE, names).append_column(SOURCE_OFFSET, key[1])


# ---------------------------------------------------------------- the export


def export_training(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    *,
    system_prompt: str | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
    strip_think: bool = True,
    validate: bool = True,
    mask_mode: MaskMode = "assistant",
    unroll: bool = False,
    max_tool_output_chars: int | None = None,
    format: ExportFormat = "openai",
    row_key: bool = False,
    range_bytes: int = ray_source.RANGE_BYTES,
    block_bytes: int = ray_source.BLOCK_BYTES,
    filesystem: Any = None,
) -> dict[str, Any]:
    """``whileai_datasets.export_dataset`` on Ray Data: same options, rows and report.

    Runs on the Ray runtime ``ray.init`` connected to (a local one is started
    when none is). Reading, normalizing, the transforms, the wire shape and
    the writing run in Ray tasks; group stamping uses Ray's ``groupby``;
    the report is added up from per-block counts. Rows keep file order.

    Args:
        source: Files as ``read_whileai`` takes them.
        output: A directory (replaced when the export succeeds) of part files
            ``part-00000.parquet``, ...; JSONL parts when it ends in
            ``.jsonl``. Concatenated in name order, the parts are the local
            export's file. A URI (``s3://bucket/prefix/out/``): the parts are
            staged under a hidden prefix beside it and copied in once the
            export succeeded (no shared mount is needed).
        system_prompt, tools, strip_think, validate, mask_mode, unroll,
        max_tool_output_chars, format: As ``export_dataset``.
        row_key: Write ``source_file`` / ``source_offset`` on every row.
        range_bytes, block_bytes: As ``read_whileai``; a read task's rows are
            one call of the transforms, so ``range_bytes`` bounds what one
            worker holds at a time.
        filesystem: As ``read_whileai``; it opens the output URI too.
    Returns:
        ``export_dataset``'s report, with ``path`` (the directory) and
        ``n_written``. Where a row is named, the local export gives its index
        in the output, and so does this one, except for a row with no
        messages, which is named by file and line.
    Raises:
        ExportFormatError: as ``export_dataset`` (bad rows, a refused gate),
            or ``output`` is a file or a directory holding other files, or it
            is or contains an input.
        WriteError: the parts could not be written or put in place (the
            earlier directory, if any, is untouched).
    """
    options = TrainingOptions.whileai_export(
        system_prompt=system_prompt, tools=tools, strip_think=strip_think, validate=validate, mask_mode=mask_mode,
        unroll=unroll, max_tool_output_chars=max_tool_output_chars, format=format)
    return run_training(source, output, options, row_key=row_key, range_bytes=range_bytes, block_bytes=block_bytes,
                        filesystem=filesystem)


def run_training(source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], output: str | os.PathLike[str],
                 options: TrainingOptions, *, row_key: bool = False, range_bytes: int = ray_source.RANGE_BYTES,
                 block_bytes: int = ray_source.BLOCK_BYTES, filesystem: Any = None) -> dict[str, Any]:
    """``export_training`` with its options made (``weights`` are the local export's only)."""
    if options.weights is not None:
        raise OptionError(f"weights are written by the local export, got weights={options.weights!r} on Ray",
                          location="weights", hint="Drop weights, or export with whileai_datasets.export_dataset.")
    paths = source_files.expand_paths(source, filesystem=filesystem)
    overwrite.refuse_overwrite(output, paths, directory=True)
    dest = ray_output.destination(os.fspath(output), filesystem)
    tools_json = json.dumps(list(options.tools), ensure_ascii=False) if options.tools else None
    storage = _storage.Storage(filesystem)
    staging = ray_output.staging(dest, filesystem)
    collector = block_counts.collector_on_this_node()
    try:
        with ray_output.ordered(), block_counts.surfaced(collector):
            reporter = block_counts.Reporter(collector)
            suffix = ".jsonl" if dest.lower().endswith(".jsonl") else ".parquet"
            rows = _rows(paths, options, tools_json, (row_key, suffix == ".jsonl"), reporter,
                         (range_bytes, block_bytes), storage)
            rows.write_datasink(ray_output.Parts(staging.path, suffix, storage))
        parts = ray.get(collector.parts.remote())
        unread.warn(block_counts.unread_keys(collector, paths, storage), where_read(source), kept=False,
                    stacklevel=stacklevel_outside())
        report = block_counts.report(parts, options)
        refusals.gate(report, options.validate)
        ray_output.commit(staging)
    finally:
        staging.discard()
        ray.kill(collector)
    report["path"] = dest
    report["n_written"] = report["n"]
    return report


def where_read(source: Any) -> str:
    """The source as a warning names it: the path or pattern given, or how many were given."""
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return f"{len(source)} sources"


def _rows(
    paths: Sequence[str],
    options: TrainingOptions,
    tools_json: str | None,
    key_jsonl: tuple[bool, bool],
    reporter: block_counts.Reporter,
    sizes: tuple[int, int],
    storage: _storage.Storage,
) -> Any:
    """The written rows as a lazy Ray dataset (groups computed first when they apply)."""
    system = str(options.system_prompt) if options.system_prompt else ""
    canonical = _canonical(paths, "default", Options(system_prompt=system), reporter, sizes, storage)
    groups = None
    if not options.unroll:  # whileai never stamps unrolled samples
        canonical = canonical.materialize()
        table = group_table(canonical, order_by=(ray_source.FILE, ray_source.POS), n_rows=canonical.count())
        groups = ray.put(table) if table is not None else None
    batches = TrainingBatches(options, tools_json, groups, reporter, tuple(paths), *key_jsonl, storage=storage)
    # whole blocks: the read, the transforms and the write then run fused, a read task's rows at a time
    return canonical.map_batches(batches, batch_format="pyarrow", batch_size=None)


@dataclass(frozen=True)
class TrainingBatches:
    """One block of canonical rows through the export's chunk pipeline
    (``shaping.pipeline.training_chunk``): the written rows come back, the
    block's report counts go to the collector."""

    options: TrainingOptions
    tools_json: str | None
    groups: Any
    reporter: Any
    paths: tuple[str, ...]
    row_key: bool
    jsonl: bool = False  # JSONL parts: keys in the local JSONL export's order
    storage: _storage.Storage = _storage.LOCAL

    def __call__(self, table: pa.Table) -> pa.Table:
        try:
            return self._run(table)
        except WhileaiError as err:
            self.reporter(err)
            raise

    def _run(self, table: pa.Table) -> pa.Table:
        if not table.num_rows:  # Ray hands on empty blocks without their columns
            return table
        raw = block_counts.raw_counts(table)
        canonical = _arrow.drop(table, ray_source.LEAK, ray_source.HAS_SCENARIO)
        groups = GroupLookup(self.groups).columns(canonical) if self.groups is not None else None
        rows, written, before = pipeline.training_chunk(canonical, 0, groups, self.tools_json, self.options, memoize=False)
        if before < 0:
            raise self._no_messages(rows, -1 - before)
        stats = reports.TrainingStats(self.options)
        stats.add(rows, before)
        self.reporter.add(block_counts.first_last(table), {"raw": raw, "stats": stats})
        # unrolled OpenAI JSONL: the local lines' key order (unrolled TRL lines differ in key order only)
        if self.jsonl and self.options.format == "openai" and pipeline.renders_unrolled_lines(canonical, self.options):
            written = pipeline.unrolled_key_order(written)
        if self.options.format == "fireworks":  # Fireworks rows keep two columns; put the key back
            written = written.append_column(ray_source.FILE, rows.column(ray_source.FILE)).append_column(ray_source.POS, rows.column(ray_source.POS))
        return PublicKey(self.paths, self.row_key)(_plain(written))

    def _no_messages(self, rows: pa.Table, index: int) -> ExportFormatError:
        file = int(_arrow.column(rows, ray_source.FILE)[index].as_py())
        pos = int(_arrow.column(rows, ray_source.POS)[index].as_py())
        ctx = source_files.row_context(self.paths[file], pos, self.storage)
        return ExportFormatError(
            "schema_invalid in training_rows: messages_missing",
            location=ctx.at(),
            hint="A row needs at least one message: pass system_prompt=, or drop rows with no conversation.",
        )


def _plain(table: pa.Table) -> pa.Table:
    """``table`` with dictionary columns decoded: the constant ``tools`` column is
    a dictionary of Json values, and pyarrow cannot read the Arrow IPC schema of
    one back (Ray ships block schemas between processes that way)."""
    for i, name in enumerate(table.column_names):
        if pa.types.is_dictionary(table.schema.field(i).type):
            table = table.set_column(i, name, _arrow.decoded(_arrow.column(table, name)))
    return table
