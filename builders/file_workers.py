"""A session dataset's files read whole by the parse workers, a few files ahead, their tables taken in file order.

A folder of agent sessions is many files of a few MB, each read whole (a conversation spans its file), so the
byte ranges ``reading.parallel`` cuts one large JSONL file into do not apply; read one after another in one
process they cost 4x the same conversations as one ``messages`` file that the workers parse. Here each whole
local file goes to a worker of the same pool (``parallel.RangeReader``), at most ``workers + 1`` files in flight.
The worker reads the file exactly as the builder reads it in its own process (``whole_file_rows``: a session by
its content, else Parquet, a JSON array or JSONL) into canonical tables, written to an Arrow IPC file in the
pool's scratch folder; this process takes them in file order and merges each file's skipped rows, leak facts
and unread keys as it takes it. A file's error (a session refused at its line) is raised when that file's turn
comes, after every table before it: the rows, their order and the errors are those of one process. Memory stays
at a few files per process however many files the folder holds.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import IO, Any

import pyarrow as pa

from whileai_datasets import option_names
from whileai_datasets.builders import inputs
from whileai_datasets.reading import file_kind, parallel, read_errors
from whileai_datasets.reading.json_array import iter_json_array_rows
from whileai_datasets.reading.reader import BadRows, LinePosition, iter_jsonl_rows, iter_parquet_rows, iter_tables
from whileai_datasets.rows.canonical import Normalizer, Options
from whileai_datasets.rows.leaks import LeakScan
from whileai_datasets.rows.normalize import RowContext
from whileai_datasets.sessions import detect as session_logs

#: Rows of a whole file, ``(context, row)`` each, as the normalizer takes them.
Rows = Iterator[tuple[RowContext, Any]]


def whole_file_rows(handle: IO[bytes], original: str, name: str, normalizer: Normalizer, chunk_rows: int) -> Rows | None:
    """The rows of a whole file that is not plain JSONL: Parquet, an agent's session (told by its content, in a
    dataset that holds sessions), or a JSON array read element by element; None for JSONL, which the caller
    reads by lines (in its own process or by byte ranges)."""
    if file_kind.is_parquet(original, handle):
        return iter_parquet_rows(handle, name, chunk_rows)
    session = session_logs.detect(name, handle) if normalizer.sessions else None
    if session is not None:
        return session_logs.rows(session, handle, name)
    if file_kind.is_json_array(original, handle):
        return iter_json_array_rows(handle, name)
    return None


@dataclass(frozen=True)
class FileJob:
    """What a worker needs to read one whole file of a session dataset: the parse settings of a piece (``path``:
    the file as ``datasets`` gave it, ``gzip://x.jsonl::/a/x.jsonl.gz`` naming its codec; ``source``: the name
    errors and the ``source_file`` column show; the whole file, so no range or lines before it), the file's
    given name, and how to open its decoded bytes in any process (a picklable function of the builder's module)."""

    settings: parallel.Job
    original: str
    opener: Callable[[], IO[bytes]]


def file_job(
    file: str, original: str, name: str, opener: Callable[[], IO[bytes]], normalizer: Normalizer, *, chunk_rows: int,
    on_bad_row: str, leaks: bool,
) -> Callable[[str], FileJob]:
    """The job of one whole file, given the output file its tables go to (made when the job is sent)."""

    def job(output: str) -> FileJob:
        settings = parallel.Job(file, name, 0, 0, 0, 0, normalizer.config_name, normalizer.options, chunk_rows,
                                on_bad_row, leaks, output, True, option_names.current())
        return FileJob(settings, original, opener)

    return job


def read_file(job: FileJob) -> parallel.Piece:
    """Read one whole file in a worker (also callable in process), its tables to the job's output."""
    settings, name = job.settings, job.settings.source
    with option_names.command_line(settings.surface):
        normalizer = parallel.normalizer_for(settings.config, settings.options, sessions=True)
        bad = BadRows()
        leaks = LeakScan() if settings.leaks else None
        inputs.refuse_cut_zstd(name, settings.path, job.opener)
        with read_errors.read_failures(name, settings.path, job.opener), job.opener() as opened:
            handle = inputs.line_reader(opened)
            rows = whole_file_rows(handle, job.original, name, normalizer, settings.chunk_rows)
            if rows is None:
                rows = iter_jsonl_rows(handle, name, LinePosition())
            tables = iter_tables(rows, normalizer, chunk_rows=settings.chunk_rows, on_bad_row=settings.on_bad_row,
                                 bad=bad, leaks=leaks)
            written = parallel.write_tables(settings.output, tables)
    return parallel.Piece(settings.output if written else None, bad.to_dict(),
                          leaks.state() if leaks is not None else None, normalizer.unread.to_dict())


class FileReader:
    """Whole files (by shard number) read by ``pool``'s workers, ``pool.workers + 1`` at most in flight, in
    shard order; ``tables(shard)`` takes one file's tables when its turn comes."""

    def __init__(self, pool: parallel.RangeReader, jobs: dict[int, Callable[[str], FileJob]]) -> None:
        self._pool = pool
        #: per shard, its job given an output path (the path is made when the job is sent)
        self._waiting = dict(sorted(jobs.items()))
        self._pending: dict[int, Future[parallel.Piece]] = {}

    def takes(self, shard: int) -> bool:
        return shard in self._waiting or shard in self._pending

    def tables(self, shard: int, name: str, bad: BadRows, leaks: LeakScan | None) -> Iterator[pa.Table]:
        """Shard ``shard``'s tables, once its worker is done; its reports merged into ``bad``, ``leaks`` and the
        pool's normalizer's unread keys."""
        try:
            self._send()
            piece = self._pending.pop(shard).result()
            self._send()  # the next file goes out before this one's tables are written
        except BrokenProcessPool as err:
            raise self._pool.died(name) from err
        bad.merge(piece.bad)
        self._pool.normalizer.unread.merge(piece.unread)
        if leaks is not None and piece.leaks is not None:
            leaks.merge(piece.leaks)
        yield from piece.tables()

    def close(self) -> None:
        """Cancel the files not yet taken (their outputs go with the pool's scratch folder)."""
        for future in self._pending.values():
            future.cancel()
        self._pending.clear()
        self._waiting.clear()

    def _send(self) -> None:
        while self._waiting and len(self._pending) <= self._pool.workers:
            shard, job = next(iter(self._waiting.items()))
            del self._waiting[shard]
            self._pending[shard] = self._pool.submit(read_file, job(self._pool.output_path()))


def pooled_size(local: str) -> int:
    """The bytes of a whole local file a worker can open (0: not one, a remote or still-compressed stream)."""
    if "://" in local or "::" in local or not os.path.isfile(local):
        return 0
    return os.path.getsize(local)
