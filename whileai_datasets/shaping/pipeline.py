"""The export's chunk pipeline: canonical chunks through the transforms to
the rows the report counts and the rows the writer writes, two chunks at a time.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from whileai_datasets._options import TrainingOptions
from whileai_datasets.columnar import _arrow, _json, _parts
from whileai_datasets.shaping import writer
from whileai_datasets.transforms import groups as grouping
from whileai_datasets.transforms import masks, think, tool_output, unrolling, wire


@contextlib.contextmanager
def reused_memory() -> Iterator[None]:
    """Arrow allocations from jemalloc with freed pages kept, for the export.

    Every chunk allocates the same few hundred MB again; pyarrow's default
    pool hands freed pages back to the OS at once, and touching fresh pages
    costs (measured 0.98-1.76 s against 1.46-2.18 s for a 100k-row export).
    The previous pool is restored afterwards and jemalloc told to release
    what it kept. Without jemalloc in the pyarrow build, nothing changes."""
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:
        yield
        return
    previous = pa.default_memory_pool()
    pa.jemalloc_set_decay_ms(-1)
    pa.set_memory_pool(pool)
    try:
        yield
    finally:
        pa.set_memory_pool(previous)
        pa.jemalloc_set_decay_ms(0)


def pipelined(work: Callable[[pa.Table, int], Any], chunks: Iterator[pa.Table], workers: int = 2) -> Iterator[Any]:
    """``work(chunk, offset)`` for every chunk, results in order, two chunks at
    a time (Arrow kernels and file writes release the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    pending: list[Any] = []
    offset = 0
    with ThreadPoolExecutor(max_workers=workers) as pool:
        try:
            for chunk in chunks:
                pending.append(pool.submit(work, chunk, offset))
                offset += chunk.num_rows
                if len(pending) > workers:
                    yield pending.pop(0).result()
            while pending:
                yield pending.pop(0).result()
        finally:
            for future in pending:
                future.cancel()


def training_chunk(
    table: pa.Table,
    offset: int,
    groups: dict[str, pa.Array] | None,
    tools: str | None,
    options: TrainingOptions,
    memoize: bool = False,
) -> tuple[pa.Table, pa.Table, int]:
    """One chunk of canonical rows -> (report rows, written rows, training rows
    before the TRL completion shape dropped any)."""
    table = with_tools(table, tools)
    if options.strip_think:
        table = think.strip_table(table)
    if options.max_tool_output_chars is not None:
        table = tool_output.truncate_table(table, options.max_tool_output_chars)
    # the rows' own training flags (turns their loss_mask already masks) stay masked; unrolled, every
    # turn they leave trained ends a sample, whatever the mask mode (whileai ignores it there)
    table = masks.mask_table(table, "assistant" if options.unroll else options.mask_mode, keep_off=True)
    if groups is not None:
        for name in grouping.GROUP_COLUMNS:
            table = _arrow.set_column(table, name, groups[name].slice(offset, table.num_rows))
    fmt = options.format
    weights = options.weights
    if memoize and renders_unrolled_lines(table, options):
        return _unrolled_jsonl_chunk(table, fmt)
    if options.unroll:
        table = unrolling.unroll_table(table)
    empty = _arrow.lengths(_arrow.column(table, "messages")) == 0
    if empty.any():  # whileai's schema check; raised in order by the caller
        return table, table, -1 - int(np.argmax(empty))
    if fmt == "trl":
        final_only = options.unroll or options.mask_mode == "final"
        rows = wire.trl_completion_table(table) if final_only else wire.trl_training_table(table)
        return rows, rows, table.num_rows
    rows = wire.openai_table(table)
    written = wire.fireworks_table(rows) if fmt == "fireworks" else rows
    if weights:  # per sample: an unrolled sample marks only its last turn
        lists = wire.weighted_messages(_arrow.column(rows, "messages"), _arrow.column(rows, "loss_mask"), weights)
        written = _arrow.set_column(rows, "messages", lists)
    return rows, written, table.num_rows


def renders_unrolled_lines(table: pa.Table, options: TrainingOptions) -> bool:
    """Whether a JSONL export of ``table`` takes ``_unrolled_jsonl_chunk``, whose lines put the per-sample
    keys first (``unrolled_key_order`` gives rows shaped otherwise the same key order)."""
    fmt = options.format
    return bool(options.unroll and fmt != "fireworks" and not options.weights and not _trl_images(table, fmt))


def unrolled_key_order(rows: pa.Table) -> pa.Table:
    """Unrolled rows shaped without ``memoize``, their columns in the key order of
    ``_unrolled_jsonl_chunk``'s lines: the per-sample columns, then the rest, each in table order."""
    names = rows.column_names
    return rows.select([n for n in names if n in _PER_SAMPLE] + [n for n in names if n not in _PER_SAMPLE])


def with_tools(table: pa.Table, tools: str | None) -> pa.Table:
    """``table`` with ``tools`` (JSON text) on every row; with None, each row keeps its own tool
    schemas (the builder read them: a list, or JSON text of one), as ``load_dataset`` does. whileai
    drops a row's own tools, so every row of its export carries the option's or none
    (docs/differences.md)."""
    if tools is None and "tools" in table.column_names:
        return table
    return _arrow.set_column(table, "tools", _arrow.constant_column(tools, table.num_rows, pa.json_()))


def _trl_images(table: pa.Table, fmt: str) -> bool:
    """Whether TRL rows of ``table`` get an ``images`` column: each unrolled
    sample then needs the images of its own messages, so they are unrolled first."""
    return fmt == "trl" and _parts.images_column(_arrow.column(table, "messages")) is not None


def _unrolled_jsonl_chunk(table: pa.Table, fmt: str) -> tuple[pa.Table, pa.Table, int]:
    """``_training_chunk`` for unrolled OpenAI / TRL rows written as JSONL.

    The same transforms in an order that renders each source row's JSON
    once: the wire shape first (it is per row), then each message's JSON
    and the members unroll only repeats, then ``unroll``. What the samples
    repeat (message texts, members, lineage) are dictionary arrays over the
    source rows' texts, so ``unroll`` copies indices, and the writer's one
    ``take`` (``_lines.assemble``) copies each text straight into its lines."""
    source = unrolling.unrolled_from(table)
    shaped = wire.trl_training_table(table) if fmt == "trl" else wire.openai_table(table)
    memoized = _json.memoize_messages(_arrow.column(shaped, "messages"), drop_content=True)
    shaped = _arrow.set_column(shaped, "messages", memoized)
    cover = [n for n in shaped.column_names if n not in _PER_SAMPLE]
    members = _json.render_members(shaped, cover, keep_null=writer.TRAINING_NULLS)
    shaped = _arrow.drop(shaped, *(n for n in cover if n not in _REPORTED))  # in the members: not repeated per sample
    by_row = pa.DictionaryArray.from_arrays(pa.array(np.arange(shaped.num_rows, dtype=np.int32)), members)
    shaped = _arrow.set_column(shaped, _json.MEMBERS_COLUMN, by_row)
    shaped = shaped.replace_schema_metadata({_json.MEMBERS_COVER: json.dumps(cover).encode()})
    rows = unrolling.unroll_table(shaped, source=source, lineage_by_row=True)
    empty = _arrow.lengths(_arrow.column(rows, "messages")) == 0
    if empty.any():
        return rows, rows, -1 - int(np.argmax(empty))
    before = rows.num_rows
    if fmt == "trl":
        rows = wire.trl_completion_table(rows)
    return rows, rows, before


#: Columns ``unroll`` sets per sample (and ``tools``, spliced in as one constant).
_PER_SAMPLE = frozenset(("messages", "loss_mask", "lineage", "unroll", "tools", _json.MEMBERS_COLUMN))
#: Columns the members cover that the report counts (or TRL's completion split reads) per sample.
_REPORTED = frozenset(("group_id", "reward", "prompt_text", tool_output.TRUNCATED, tool_output.CHARS_CUT))
