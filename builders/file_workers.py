"""A session dataset's whole files read by the parse workers, a few files ahead, their tables taken in file order.

A folder of agent sessions is many files of a few MB, each read whole (a conversation spans its file), so the
byte ranges ``reading.parallel`` cuts one large JSONL file into do not apply; read one after another in one
process they cost 4x the same conversations as one ``messages`` file that the workers parse. Here runs of
consecutive whole local files (a group of up to ``parallel.PIECE_MAX_BYTES``) go to the workers of the same pool
(``parallel.RangeReader``), at most ``workers + 1`` groups in flight. A worker reads each file of its group
exactly as the builder reads it in its own process (``whole_file_rows``: a session by its content, else Parquet,
a JSON array or JSONL), the group's conversations into shared canonical tables (a table per file cost more than
the rows of a small session: building a table has a fixed cost), written to an Arrow IPC file in the pool's
scratch folder, and says per file how many rows it kept, which it skipped and its unread keys. This process
takes each file's rows (a slice of the group's tables, no copy) when the file's turn comes, with its reports. A
file's error (a session refused at its line) is raised at that file's turn, after the rows of every file before
it (the worker reads those again on their own to hand them over): the rows, their order, the warnings and the
errors are those of one process. Memory stays at a few groups per process however many files the folder holds.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import IO, Any

import pyarrow as pa

from whileai_datasets import option_names
from whileai_datasets.builders import inputs
from whileai_datasets.errors import WhileaiError
from whileai_datasets.reading import file_kind, parallel, read_errors
from whileai_datasets.reading.json_array import iter_json_array_rows
from whileai_datasets.reading.reader import BadRows, LinePosition, iter_jsonl_rows, iter_parquet_rows, iter_tables
from whileai_datasets.rows.canonical import Normalizer
from whileai_datasets.rows.leaks import LeakScan
from whileai_datasets.rows.normalize import RowContext
from whileai_datasets.rows.unread_keys import Unread
from whileai_datasets.sessions import detect as session_logs

#: Rows of a whole file, ``(context, row)`` each, as the normalizer takes them.
Rows = Iterator[tuple[RowContext, Any]]


def whole_file_rows(
    handle: IO[bytes], original: str, name: str, normalizer: Normalizer, chunk_rows: int,
    options: dict[str, Any] | None = None,
) -> Rows | None:
    """The rows of a whole file that is not plain JSONL: Parquet, an agent's session (told by its content, in a
    dataset that holds sessions; ``options``: the builder's options its reader may take), or a JSON array read
    element by element; None for JSONL, which the caller reads by lines (in its own process or by byte ranges)."""
    if file_kind.is_parquet(original, handle):
        return iter_parquet_rows(handle, name, chunk_rows)
    session = session_logs.detect(name, handle) if normalizer.sessions else None
    if session is not None:
        return session_logs.rows(session, handle, name, options)
    if file_kind.is_json_array(original, handle):
        return iter_json_array_rows(handle, name)
    return None


@dataclass(frozen=True)
class WholeFile:
    """One file of a group: ``file`` as ``datasets`` gave it (``gzip://x.jsonl::/a/x.jsonl.gz`` names its codec), its
    given name, the ``name`` errors and the ``source_file`` column show, and how to open its decoded bytes in any
    process (a picklable function of the builder's module)."""

    file: str
    original: str
    name: str
    opener: Callable[[], IO[bytes]]


@dataclass(frozen=True)
class FileJob:
    """What a worker needs to read a group of whole files: the parse settings of a piece (its ``path``, ``source``
    and range unused: the files are the group's), the files, in order, and the options a session reader may take."""

    settings: parallel.Job
    files: tuple[WholeFile, ...]
    options: dict[str, Any] = field(default_factory=dict)


def file_job(files: list[WholeFile], normalizer: Normalizer, *, chunk_rows: int, on_bad_row: str, leaks: bool,
             options: dict[str, Any] | None = None) -> Callable[[str], FileJob]:
    """The job of a group of whole files, given the output file its tables go to (made when the job is sent)."""

    def job(output: str) -> FileJob:
        settings = parallel.Job("", "", 0, 0, 0, 0, normalizer.config_name, normalizer.options, chunk_rows,
                                on_bad_row, leaks, output, True, option_names.current())
        return FileJob(settings, tuple(files), dict(options or {}))

    return job


@dataclass
class FileReport:
    """What a worker says of one file it read: the rows it kept, and its skipped rows and unread keys."""

    rows: int = 0
    bad: BadRows = field(default_factory=BadRows)
    unread: Unread = field(default_factory=Unread)


@dataclass
class GroupPiece:
    """A group read: where its tables are (None: no rows), its leak facts, a report per file read whole, and the
    error of the file after them, raised when that file's turn comes."""

    output: str | None
    leaks: dict[str, Any] | None
    files: list[FileReport]
    error: WhileaiError | None = None

    def table(self) -> pa.Table | None:
        """The group's rows as one table (memory-mapped chunks; the file is removed once mapped)."""
        tables = list(parallel.Piece(self.output, {}, None, {}).tables())
        return pa.concat_tables(tables) if tables else None


class _FileBadRows(BadRows):
    """The group's skipped rows, each also counted for the file being read (the last report): a row is skipped
    as soon as it is read, before the next row, maybe of the next file, is."""

    def __init__(self, files: list[FileReport]) -> None:
        super().__init__()
        self.files = files

    def add(self, err: WhileaiError) -> None:
        super().add(err)
        self.files[-1].bad.add(err)


def _group_rows(job: FileJob, files: tuple[WholeFile, ...], normalizer: Normalizer,
                reports: list[FileReport]) -> Rows:
    """The rows of each file in turn, read as the builder reads a whole file in its own process, with a report
    per file begun as its reading begins (its unread keys counted apart)."""
    for whole in files:
        report = FileReport()
        reports.append(report)
        normalizer.unread = report.unread
        inputs.refuse_cut_zstd(whole.name, whole.file, whole.opener)
        with read_errors.read_failures(whole.name, whole.file, whole.opener), whole.opener() as opened:
            handle = inputs.line_reader(opened)
            rows = whole_file_rows(handle, whole.original, whole.name, normalizer, job.settings.chunk_rows,
                                   job.options)
            if rows is None:
                rows = iter_jsonl_rows(handle, whole.name, LinePosition())
            for item in rows:
                report.rows += 1
                yield item


def read_files(job: FileJob) -> GroupPiece:
    """Read a group of whole files in a worker (also callable in process), its tables to the job's output."""
    settings = job.settings
    with option_names.command_line(settings.surface):
        normalizer = parallel.normalizer_for(settings.config, settings.options, sessions=True)
        reports: list[FileReport] = []
        try:
            return _read_group(job, job.files, normalizer, reports)
        except WhileaiError as err:  # at the last file begun: those before it are read again, on their own
            piece = _read_group(job, job.files[: len(reports) - 1], normalizer, [])
            piece.error = err
            return piece


def _read_group(job: FileJob, files: tuple[WholeFile, ...], normalizer: Normalizer,
                reports: list[FileReport]) -> GroupPiece:
    settings = job.settings
    leaks = LeakScan() if settings.leaks else None
    tables = iter_tables(_group_rows(job, files, normalizer, reports), normalizer,
                         chunk_rows=settings.chunk_rows, on_bad_row=settings.on_bad_row, bad=_FileBadRows(reports),
                         leaks=leaks)
    written = parallel.write_tables(settings.output, tables)
    for report in reports:
        report.rows -= report.bad.count  # (read, less the skipped)
    return GroupPiece(settings.output if written else None, leaks.state() if leaks is not None else None, reports)


class FileReader:
    """Groups of whole files (by shard number) read by ``pool``'s workers, ``pool.workers + 1`` groups at most in
    flight, in shard order; ``tables(shard)`` takes one file's rows when its turn comes."""

    def __init__(self, pool: parallel.RangeReader, groups: list[tuple[list[int], Callable[[str], FileJob]]]) -> None:
        self._pool = pool
        #: the groups not yet sent: their shards, and their job given an output path (made when it is sent)
        self._waiting = list(groups)
        self._pending: list[tuple[list[int], Future[GroupPiece]]] = []
        #: the group being taken: its shards, what the worker said, its rows, and where the next file's start
        self._current: tuple[list[int], GroupPiece, pa.Table | None] | None = None
        self._offset = 0
        self._shards = {shard for shards, _ in groups for shard in shards}

    def takes(self, shard: int) -> bool:
        return shard in self._shards

    def tables(self, shard: int, name: str, bad: BadRows, leaks: LeakScan | None) -> Iterator[pa.Table]:
        """Shard ``shard``'s rows, once its group's worker is done; its reports merged into ``bad``, ``leaks`` (the
        group's, with its first file) and the pool's normalizer's unread keys."""
        if self._current is None or shard not in self._current[0]:
            self._take(name, leaks)
        shards, piece, table = self._current  # type: ignore[misc]
        index = shards.index(shard)
        if index >= len(piece.files):  # the file that failed (those after it are never asked for)
            assert piece.error is not None
            raise piece.error
        report = piece.files[index]
        bad.merge(report.bad.to_dict())
        self._pool.normalizer.unread.merge(report.unread.to_dict())
        start, self._offset = self._offset, self._offset + report.rows
        if index == len(shards) - 1:
            self._current = None  # (its mapping goes once the last slice is written)
        if report.rows and table is not None:
            yield table.slice(start, report.rows)

    def close(self) -> None:
        """Cancel the groups not yet taken (their outputs go with the pool's scratch folder)."""
        for _, future in self._pending:
            future.cancel()
        self._pending.clear()
        self._waiting.clear()
        self._current = None

    def _take(self, name: str, leaks: LeakScan | None) -> None:
        """The next group, once its worker is done (the ones after it sent first)."""
        try:
            self._send()
            shards, future = self._pending.pop(0)
            piece = future.result()
            self._send()  # the next group goes out before this one's rows are written
        except BrokenProcessPool as err:
            raise self._pool.died(name) from err
        if leaks is not None and piece.leaks is not None:
            leaks.merge(piece.leaks)
        self._current, self._offset = (shards, piece, piece.table()), 0

    def _send(self) -> None:
        while self._waiting and len(self._pending) <= self._pool.workers:
            shards, job = self._waiting.pop(0)
            self._pending.append((shards, self._pool.submit(read_files, job(self._pool.output_path()))))


def groups(sizes: dict[int, int], workers: int) -> list[list[int]]:
    """Runs of consecutive shards (``sizes``: the bytes of each shard a worker can read), each of at least
    ``parallel.PIECE_MIN_BYTES`` and at most ``parallel.PIECE_MAX_BYTES`` (a larger file alone), about four per
    worker: a small file is read in the same tables as its neighbours."""
    total = sum(sizes.values())
    most = max(parallel.PIECE_MIN_BYTES, min(parallel.PIECE_MAX_BYTES, total // (4 * workers) + 1))
    found: list[list[int]] = []
    held = 0
    for shard in sorted(sizes):
        if not found or held + sizes[shard] > most or found[-1][-1] != shard - 1:
            found.append([])
            held = 0
        found[-1].append(shard)
        held += sizes[shard]
    return found


def pooled_size(local: str) -> int:
    """The bytes of a whole local file a worker can open (0: not one, a remote or still-compressed stream)."""
    if "://" in local or "::" in local or not os.path.isfile(local):
        return 0
    return os.path.getsize(local)
