"""A byte range of a plain JSONL file parsed by worker processes, tables in order.

The range is cut into pieces at line starts. Workers parse and normalize
their pieces into canonical tables and hand them back with the lines and rows
they counted, the rows they skipped and the leak facts they took; this
process yields the tables, and merges the reports, in file order, adding up
the counts as it goes. Under ``on_bad_row="raise"`` a worker numbers lines
from its piece's start, so this process never reads the whole file to count
them (that cost a tenth of the parse); the ``raw`` config's ``source_line``
is shifted here, and a piece that raised is parsed again here with its
absolute numbers, so the error names its real line. Under ``"skip"``, whose
report lists every skipped row's line, this process counts the lines before
each piece (a bytes scan, ``reader.count_lines``) and the workers number
them exactly. So rows, their order, line numbers and errors are those of a
single-process read: a bad row raises where it would have, after every table
before it. At most ``workers + 1`` pieces are in flight, so memory stays at a
few pieces per process however large the file is. The same pool reads the whole
files of a session folder for the builder (``submit``, ``output_path``, ``died``).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets import option_names
from whileai_datasets.errors import ParseWorkerError, WhileaiError
from whileai_datasets.reading.lifeline import (
    Lifeline,
    close_lifeline,
    creating,
    open_lifeline,
    remove_scratch,
    scratch_folder,
    starting_workers,
    worker_start,
)
from whileai_datasets.reading.reader import (
    BadRows,
    LinePosition,
    count_lines,
    iter_jsonl_rows,
    iter_line_range,
    iter_tables,
    line_start_at_or_after,
)
from whileai_datasets.rows.canonical import Normalizer, Options
from whileai_datasets.rows.leaks import LeakScan
from whileai_datasets.rows.unread_keys import Unread

#: A range at least this large is parsed by worker processes unless told otherwise.
AUTO_MIN_BYTES = 16 << 20
#: Pieces are at most this large (and at least PIECE_MIN_BYTES), about four per worker and range.
PIECE_MAX_BYTES = 8 << 20
PIECE_MIN_BYTES = 64 << 10
#: Worker processes used by default: one per available core, at most this many.
MAX_AUTO_WORKERS = 4


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def resolve_workers(requested: int | None, size: int) -> int:
    """Worker processes for a range of ``size`` bytes: ``requested`` when
    given (0 and 1 parse in this process), else one per core (at most
    ``MAX_AUTO_WORKERS``) for a range of at least ``AUTO_MIN_BYTES``."""
    if requested is not None:
        return max(1, requested)
    if size < AUTO_MIN_BYTES or multiprocessing.current_process().daemon:
        return 1  # a daemonic process (a pool's worker) may not start processes of its own
    return max(1, min(available_cores(), MAX_AUTO_WORKERS))


@dataclass(frozen=True)
class Job:
    """What a worker needs to parse one piece. ``line`` and ``row`` are the
    lines and rows before it when ``numbered``, else 0 (the worker numbers
    from the piece's start)."""

    path: str
    source: str
    start: int
    end: int
    line: int
    row: int
    config: str
    options: Options
    chunk_rows: int
    on_bad_row: str
    leaks: bool
    #: the Arrow IPC file the worker writes the piece's tables to
    output: str
    numbered: bool = True
    #: where the errors are shown (``option_names.current()``): a spawned worker does not inherit it
    surface: str = "python"


@dataclass
class Piece:
    """A parsed piece: where its tables are (``Job.output``, or None when it
    has no rows) and what it reports."""

    output: str | None
    bad: dict[str, Any]
    leaks: dict[str, Any] | None
    #: the keys its rows held that were not read (``Unread.to_dict()``)
    unread: dict[str, Any]
    #: lines and non-blank lines (rows) the piece holds
    lines: int = 0
    rows: int = 0

    def tables(self) -> Iterator[pa.Table]:
        """The piece's tables, memory-mapped (no copy); the file is removed
        once they are read (the mapping keeps them valid)."""
        if self.output is None:
            return
        try:
            with pa.memory_map(self.output) as source:
                reader = pa.ipc.open_file(source)
                batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
        finally:
            os.remove(self.output)
        for batch in batches:
            yield pa.Table.from_batches([batch])


def _renumbered(table: pa.Table, lines_before: int) -> pa.Table:
    """A worker's table with the lines before its piece added to the line
    numbers it holds (the ``raw`` config's ``source_line``)."""
    if not lines_before or "source_line" not in table.column_names:
        return table
    at = table.column_names.index("source_line")
    column = table.column(at)
    return table.set_column(at, table.field(at), pc.add(column, pa.scalar(lines_before, column.type)))


#: the normalizers this process built, by (config, options); a list, not a
#: dict: options hold tool schemas (dicts), which compare equal but do not hash
_NORMALIZERS: list[tuple[str, Options, Normalizer]] = []


def normalizer_for(config: str, options: Options, *, sessions: bool = False) -> Normalizer:
    """This process's normalizer for ``config`` and ``options`` (built once; ``sessions``: with the columns of
    agent sessions), its unread keys counted afresh."""
    sessions = sessions and config == "default"  # (the columns of sessions are training rows' only)
    for known_config, known_options, normalizer in _NORMALIZERS:
        if known_config == config and known_options == options and normalizer.sessions == sessions:
            normalizer.unread = Unread()
            return normalizer
    normalizer = Normalizer(config, options, sessions=sessions)
    _NORMALIZERS[:] = [*_NORMALIZERS[-3:], (config, options, normalizer)]
    return normalizer


def parse_piece(job: Job) -> Piece:
    """Parse one piece in a worker (also callable in process). The tables go
    to an Arrow IPC file, not back through the pipe: pickling them and
    pushing them through a pipe cost a tenth of the parse."""
    with option_names.command_line(job.surface):
        return _parse_piece(job)


def _parse_piece(job: Job) -> Piece:
    normalizer = normalizer_for(job.config, job.options)
    bad = BadRows()
    leaks = LeakScan() if job.leaks else None
    position = LinePosition(job.start, job.line, job.row)
    with open(job.path, "rb") as handle:
        rows = iter_jsonl_rows(iter_line_range(handle, position, job.end), job.source, position)
        tables = iter_tables(
            rows, normalizer, chunk_rows=job.chunk_rows, on_bad_row=job.on_bad_row, bad=bad, leaks=leaks
        )
        written = write_tables(job.output, tables)
    return Piece(
        job.output if written else None,
        bad.to_dict(),
        leaks.state() if leaks is not None else None,
        normalizer.unread.to_dict(),
        lines=position.line - job.line,
        rows=position.row - job.row,
    )


def write_tables(path: str, tables: Iterator[pa.Table]) -> bool:
    """Write ``tables`` to an Arrow IPC file at ``path``, one record batch
    each; False (and no file) when there are none."""
    writer = None
    try:
        for table in tables:
            if writer is None:
                with creating(os.path.dirname(path)):
                    writer = pa.ipc.new_file(path, table.schema)
            for batch in table.combine_chunks().to_batches(max_chunksize=table.num_rows or None):
                writer.write_batch(batch)
    except BaseException:
        if writer is not None:
            writer.close()
            os.remove(path)
        raise
    if writer is None:
        return False
    writer.close()
    return True


def _scratch_root(workers: int) -> str | None:
    """Where pieces are handed over: shared memory when it has room for the
    pieces in flight (with a margin: a container's /dev/shm may be 64 MB),
    else the temp dir (None)."""
    shm = "/dev/shm"
    if not (os.path.isdir(shm) and os.access(shm, os.W_OK)):
        return None
    stat = os.statvfs(shm)
    room = stat.f_bavail * stat.f_frsize
    return shm if room >= 4 * (workers + 2) * PIECE_MAX_BYTES else None


def _memory_hint() -> str:
    """What to do when a worker ran out of memory, in the words of the surface shown."""
    if option_names.has_flag("parse_workers"):
        return "If the machine ran out of memory, load with parse_workers=1 (one process) or a smaller chunk_rows"
    return "If the machine ran out of memory, free some (or split the input into smaller files) and run again"


def _context() -> Any:
    """``fork`` where it is safe and cheap (Linux, Python < 3.12, which
    warns when a threaded process forks); else ``forkserver`` or ``spawn``."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and sys.version_info < (3, 12):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


class RangeReader:
    """Parses byte ranges of plain JSONL files with a pool of ``workers``
    processes, started on first use; ``close()`` stops them."""

    def __init__(self, normalizer: Normalizer, *, workers: int, chunk_rows: int, on_bad_row: str) -> None:
        self.normalizer = normalizer
        self.workers = workers
        self.chunk_rows = chunk_rows
        self.on_bad_row = on_bad_row
        self._pool: ProcessPoolExecutor | None = None
        self._scratch: str | None = None
        self._lifeline: Lifeline | None = None
        self._pieces = 0
        #: the pool's worker processes seen so far (to say how one died)
        self._workers: set[Any] = set()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._lifeline is not None:
            close_lifeline(self._lifeline)
            self._lifeline = None
        if self._scratch is not None:
            remove_scratch(self._scratch)
            self._scratch = None

    def _start(self) -> ProcessPoolExecutor:
        """The pool, its workers tied to this process, and where their pieces
        go (the first piece written makes that folder: ``lifeline.creating``)."""
        self._scratch = scratch_folder(_scratch_root(self.workers))
        context = _context()
        self._lifeline = open_lifeline(self._scratch, context.get_start_method())
        return ProcessPoolExecutor(
            max_workers=self.workers, mp_context=context, initializer=worker_start, initargs=(self._lifeline,)
        )

    def __enter__(self) -> RangeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def tables(
        self,
        handle: Any,
        path: str,
        source: str,
        position: LinePosition,
        end: int,
        bad: BadRows,
        leaks: LeakScan | None,
    ) -> Iterator[pa.Table]:
        """The canonical tables of the lines starting in ``[position.offset, end)``
        of ``path`` (``handle`` is open on it), in order. Numbering continues
        from ``position``, which, once exhausted, is left at the next line
        start with the counts before it (as ``reader.iter_line_range``)."""
        pending: list[tuple[Job, Future[Piece]]] = []
        try:
            start = LinePosition(position.offset, position.line, position.row)
            for job in self._jobs(handle, path, source, start, end, leaks is not None):
                pending.append((job, self.submit(parse_piece, job)))
                if len(pending) > self.workers:
                    yield from self._take(*pending.pop(0), position, bad, leaks)
            while pending:
                yield from self._take(*pending.pop(0), position, bad, leaks)
        except BrokenProcessPool as err:
            raise self.died(source) from err
        finally:
            for _, future in pending:
                future.cancel()

    def output_path(self) -> str:
        """A new file name in the folder the workers hand their tables over in (the pool started on first use)."""
        if self._pool is None:
            self._pool = self._start()
        self._pieces += 1
        return os.path.join(str(self._scratch), f"piece-{self._pieces:06d}.arrow")

    def submit(self, function: Callable[[Any], Piece], job: Any) -> Future[Piece]:
        """``function(job)`` on a worker of the pool (started on first use)."""
        if self._pool is None:
            self._pool = self._start()
        with starting_workers():
            future = self._pool.submit(function, job)
        self._workers.update(getattr(self._pool, "_processes", {}).values())
        return future

    def died(self, source: str) -> ParseWorkerError:
        """The error for a pool broken by a worker's death (``BrokenProcessPool``), reading ``source``."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)  # every worker joined: their exit codes are known
        return ParseWorkerError(f"a worker process parsing the file died ({self._death()})", location=source,
                                hint=_memory_hint())

    def _death(self) -> str:
        """How the pool's worker died: the first exit that is not the
        pool's own stop of the others (SIGTERM) once one of them broke."""
        exits = [process.exitcode for process in self._workers if process.exitcode not in (None, 0)]
        stops = (-signal.SIGTERM, 128 + signal.SIGTERM)  # the pool's terminate(), through worker_start's handler
        code = next((code for code in exits if code not in stops), exits[0] if exits else None)
        if code is None:
            return "it exited before its work was done"
        if code < 0 or code > 128:
            number = -code if code < 0 else code - 128
            name = signal.Signals(number).name if number in signal.valid_signals() else f"signal {number}"
            return f"killed by {name}" + (", which is what the out-of-memory killer sends" if number == signal.SIGKILL else "")
        return f"exit code {code}"

    def _take(
        self, job: Job, future: Future[Piece], position: LinePosition, bad: BadRows, leaks: LeakScan | None
    ) -> Iterator[pa.Table]:
        """A piece's tables with absolute line numbers (``position``: the
        lines and rows before it, moved past it), and its reports merged."""
        before = LinePosition(job.start, position.line, position.row)
        try:
            piece = future.result()
        except WhileaiError:
            if job.numbered:
                raise
            # a bad row, numbered from the piece's start: parsed again here, it raises with its real line
            job = self._numbered(job, before)
            piece = parse_piece(job)
        bad.merge(piece.bad)
        offset = (0, 0) if job.numbered else (before.line, before.row)  # numbered from the piece's start
        self.normalizer.unread.merge(piece.unread, lines_before=offset[0], rows_before=offset[1])
        if leaks is not None and piece.leaks is not None:
            leaks.merge(piece.leaks)
        position.offset, position.line, position.row = job.end, before.line + piece.lines, before.row + piece.rows
        for table in piece.tables():
            yield table if job.numbered else _renumbered(table, before.line)

    def _numbered(self, job: Job, before: LinePosition) -> Job:
        """``job`` numbered from ``before``, with an output file of its own."""
        return dataclasses.replace(job, line=before.line, row=before.row, output=self.output_path(), numbered=True)

    def _jobs(
        self, handle: Any, path: str, source: str, before: LinePosition, end: int, leaks: bool
    ) -> Iterator[Job]:
        """One job per piece of the lines starting in ``[before.offset, end)``
        (its output file in the scratch folder), numbered from its own start, or under
        ``on_bad_row="skip"`` with the lines and rows before it counted on from
        ``before``."""
        start = before.offset
        size = max(PIECE_MIN_BYTES, min(PIECE_MAX_BYTES, (end - start) // (4 * self.workers) + 1))
        numbered = self.on_bad_row == "skip"
        line, row = (before.line, before.row) if numbered else (0, 0)
        while start < end:
            # a line start: the lines starting in [start, stop) are this piece's
            stop = line_start_at_or_after(handle, min(start + size, end))
            yield Job(
                path, source, start, stop, line, row, self.normalizer.config_name,
                self.normalizer.options, self.chunk_rows, self.on_bad_row, leaks,
                self.output_path(), numbered, option_names.current(),
            )
            if numbered:
                lines, rows = count_lines(handle, start, stop)
                line, row = line + lines, row + rows
            start = stop
