"""The ``whileai/export`` builder: whileai rows of any shape into the canonical schema.

``import whileai_datasets`` registers it, then::

    load_dataset("whileai/export", data_files="run.jsonl", system_prompt=..., tools=...)

Configs: ``default`` (training rows: what whileai's ``training_rows`` builds
before think-stripping, unrolling and truncation, which are transforms here),
``preference`` (chosen/rejected pairs as whole conversations) and ``raw``
(every key kept, for analysis). Files are ``.jsonl``, ``.jsonl.gz`` (any
compression ``datasets`` extracts), ``.json`` (a JSON array of rows, read element by
element, or JSONL) or ``.parquet``, read a chunk at a time.

A local, uncompressed JSONL file larger than ``shard_bytes`` is split into
byte-range shards, so ``num_proc`` parses one big export in parallel (and a
streamed one has several shards): a shard holds the lines that start inside
its range, and counts the lines before it with a bytes scan, so line and row
numbers stay exact. Compressed files and Parquet are one shard per file.

In a dataset of agent sessions every file is read whole (a conversation spans its file): the parse workers read
a session folder's local files a few ahead, in file order (``file_workers``).
"""

from __future__ import annotations

import contextlib
import glob
import io
import itertools
import json
import os
import re
import warnings
from collections.abc import Iterator
from functools import partial
from typing import Any

import datasets
import pyarrow as pa
from datasets.builder import Key
from datasets.exceptions import DatasetGenerationError

from whileai_datasets import option_names
from whileai_datasets.builders import cache_space, file_workers, inputs, own_columns, split_facts, unread
from whileai_datasets.builders.config import WhileaiExportConfig
from whileai_datasets.errors import ExportFormatError, NothingToTrainWarning, WhileaiError
from whileai_datasets.reading import file_kind, parallel, read_errors
from whileai_datasets.reading.no_loss import NoLoss
from whileai_datasets.reading.reader import (
    BadRows,
    LinePosition,
    count_lines,
    iter_jsonl_rows,
    iter_line_range,
    iter_tables,
    line_start_at_or_after,
)
from whileai_datasets.rows.canonical import Normalizer
from whileai_datasets.rows.leaks import LeakScan
from whileai_datasets.rows.unread_keys import Unread
from whileai_datasets.sessions import detect as session_logs
from whileai_datasets.sessions import openhands as openhands_sessions

#: ``dataset_name`` without the '/', which would otherwise become a folder in
#: the cache paths (``.../whileai/export-train.arrow`` not found).
CACHE_NAME = "whileai_export"
#: what one prepare job leaves for its split: its skipped rows and leak facts
JOB_REPORT_FILE = "whileai_job_report.json"

#: Rows datasets' writer pools before writing, for a dataset that holds agent sessions (see _split_generators)
SESSION_WRITER_ROWS = 16
#: One shard's byte range of a file: ``(start, end, file size)``; ``None`` is the whole file.
ByteRange = tuple[int, int, int]


class BadRowsWarning(UserWarning):
    """Rows were skipped under ``on_bad_row="skip"``."""


DESCRIPTION = "whileai rollouts in the whileai-datasets canonical schema."
#: What ``ds.info.description`` says per config (saved with ``save_to_disk``): the canonical training rows'
#: ``loss_mask`` is read by no trainer, so these rows as they are (``push_to_hub``) train every token.
DESCRIPTIONS = {
    "default": DESCRIPTION + " loss_mask marks the turns to train (one 0/1 per message) and no trainer reads it: "
    "pushed as they are, these rows train every token of messages. For a trainer, push "
    'ds.map(transforms.to_trl("completion"), batched=True) (TRL trains the completions), tokenize\'s '
    "input_ids/assistant_masks, or use whileai_datasets.publish (docs/publishing.md: push_to_hub or publish?).",
}


class WhileaiExport(datasets.ArrowBasedBuilder):
    """Builder for whileai exports; see the module docstring."""

    BUILDER_CONFIG_CLASS = WhileaiExportConfig
    BUILDER_CONFIGS = [
        WhileaiExportConfig(name="default", description="Training rows in the canonical schema."),
        WhileaiExportConfig(name="preference", description="Chosen/rejected pairs as whole conversations."),
        WhileaiExportConfig(name="raw", description="Every key kept; nested values as Json."),
    ]
    DEFAULT_CONFIG_NAME = "default"

    def __init__(self, *args: Any, dataset_name: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, dataset_name=CACHE_NAME, **kwargs)
        self.config.validate()
        self.bad_rows = BadRows()
        #: rows read that carry no loss (said on every load of a split, streamed: per file; training rows only)
        self.no_loss = NoLoss()
        #: keys of the rows read that no shape reads (said with the split, as no_loss is)
        self.unread = Unread()
        #: leak facts of the rows read (training rows only), for the export's leak gate
        self.leaks = LeakScan() if self.config.leak_facts and self.config.name == "default" else None
        #: bad rows already warned about while streaming
        self._warned_bad_rows = 0
        #: set while a prepare job runs: the split reports its bad rows, not the shards
        self._preparing = False
        #: per file (path, size, mtime), line starts already counted: offset -> (lines, rows) before it
        self._line_marks: dict[tuple[str, int, int], dict[int, tuple[int, int]]] = {}
        #: num_proc of the download_and_prepare running, for dealing shards out evenly
        self._jobs = 1
        #: the parse workers of the table generation running (started on first use)
        self._range_reader: parallel.RangeReader | None = None

    def _download_and_prepare(self, *args: Any, **kwargs: Any) -> None:
        # datasets wraps every generation error in DatasetGenerationError("An
        # error occurred while generating the dataset"); ours already say what
        # and where, so they surface as themselves.
        self._jobs = max(1, int(kwargs.get("num_proc") or 1))
        try:
            super()._download_and_prepare(*args, **kwargs)
        except (DatasetGenerationError, OSError) as err:
            self._raise_cause(err)
            raise

    def _raise_cause(self, err: BaseException) -> None:
        """Raise what is behind ``err``: our own error, or the cache's full disk."""
        if isinstance(err, DatasetGenerationError) and isinstance(err.__cause__, WhileaiError):
            raise err.__cause__ from err.__cause__.__cause__
        full = cache_space.cache_error(err, self._cache_dir_root)
        if full is not None:
            raise full from full.__cause__

    def _info(self) -> datasets.DatasetInfo:
        normalizer = Normalizer(self.config.name, self.config.options())
        return datasets.DatasetInfo(description=DESCRIPTIONS.get(self.config.name, DESCRIPTION),
                                     features=normalizer.features)

    def _split_generators(self, dl_manager: datasets.DownloadManager) -> list[datasets.SplitGenerator]:
        if not self.config.data_files:
            raise ExportFormatError(
                "no data files given",
                hint=option_names.files_hint(),
            )
        for split, given in self.config.data_files.items():
            for name in given:
                if openhands_sessions.conversation_folder(str(name)) is None:  # its files are read by its reader
                    inputs.check_extension(str(name), split)
        dl_manager.download_config.extract_on_the_fly = True
        base_files = dl_manager.download(self.config.data_files)
        extracted = dl_manager.extract(base_files)
        streaming = isinstance(dl_manager, datasets.StreamingDownloadManager)
        sessions = self._holds_sessions(extracted, self.config.data_files)
        if sessions:  # the columns that say which agent, session and file each conversation came from
            self.info.features = Normalizer(self.config.name, self.config.options(), sessions=True).features
            # a session file is mostly a one-row table, which datasets' writer pools until it holds a batch:
            # whole sessions, each up to many MB, so a small batch keeps a session folder's load in bounded memory
            self._writer_batch_size = min(self._writer_batch_size or SESSION_WRITER_ROWS, SESSION_WRITER_ROWS)
        generators = []
        for split in extracted:
            # one entry per shard in each list (datasets deals the lists out to num_proc jobs, in order)
            files: list[str] = []
            originals: list[str] = []
            ranges: list[ByteRange | None] = []
            triples = zip(base_files[split], extracted[split], self.config.data_files[split])
            for base, file, original in _conversation_folders(triples) if sessions else triples:
                for byte_range in self._byte_ranges(str(base), str(file), str(original), streaming):
                    files.append(file)
                    originals.append(original)
                    ranges.append(byte_range)
            generators.append(
                datasets.SplitGenerator(
                    name=split,
                    gen_kwargs={"files": files, "originals": originals, "ranges": ranges, "sessions": sessions},
                )
            )
        return generators

    def _holds_sessions(self, extracted: Any, originals: Any) -> bool:
        """Whether any input is an agent's session log (training rows only; told by content)."""
        if self.config.name != "default":
            return False
        for split in extracted:
            for file, original in zip(extracted[split], originals[split]):
                file = _local_source(str(file))
                if "://" in file or "::" in file or not os.path.isfile(file):
                    continue
                with read_errors.decoded_stream(file) as handle:  # a compressed log is read through its codec
                    name = os.path.basename(str(original).split("::")[-1])
                    if file_kind.is_parquet(str(original), handle):
                        continue
                    if session_logs.detect(name, handle) or session_logs.carries_session_columns(handle):
                        return True  # a session, or the rows of one written out (an export read back)
        return False

    def _byte_ranges(self, downloaded: str, file: str, original: str, streaming: bool) -> list[ByteRange | None]:
        """``file``'s shards: equal byte ranges of at most ``shard_bytes``
        (a multiple of num_proc of them) for a local, uncompressed JSONL file
        larger than that, else the whole file. A file the parse workers read
        while preparing is one shard: they cut it into pieces themselves, and
        shards would make them wait for each other at every shard's end."""
        limit = self.config.shard_bytes
        # extraction left the path alone: not compressed (datasets also sniffs the magic bytes)
        if not limit or file != downloaded or "://" in file or "::" in file or not os.path.isfile(file):
            return [None]
        size = os.path.getsize(file)
        if size <= limit:
            return [None]
        if not streaming and self._jobs == 1 and parallel.resolve_workers(self.config.parse_workers, size) > 1:
            return [None]
        with open(file, "rb") as handle:  # a JSON array is read element by element from its start
            if file_kind.is_parquet(original, handle) or file_kind.is_json_array(original, handle):
                return [None]
            if self.config.name == "default" and session_logs.detect(original, handle) is not None:
                return [None]  # a session is read whole: its conversations span the file
        count = -(-size // limit)
        count = -(-count // self._jobs) * self._jobs
        bounds = [size * k // count for k in range(count + 1)]
        return [(start, end, size) for start, end in itertools.pairwise(bounds)]

    def _generate_shards(
        self, files: list[str], originals: list[str], ranges: list[ByteRange | None], sessions: bool = False
    ) -> Iterator[str | dict[str, Any]]:
        for original, byte_range in zip(originals, ranges):
            if byte_range is None:
                yield original
            else:
                yield {"fragment_data_file": original, "fragment_byte_range": list(byte_range[:2])}

    def _generate_tables(
        self, files: list[str], originals: list[str], ranges: list[ByteRange | None], sessions: bool = False
    ) -> Iterator[tuple[Key, pa.Table]]:
        normalizer = Normalizer(self.config.name, self.config.options(), sessions=sessions)
        whole_files = self._whole_files(files, originals, ranges, normalizer) if sessions else None
        try:
            for shard, (file, original, byte_range) in enumerate(zip(files, originals, ranges)):
                name = os.path.basename(str(original).split("::")[-1])
                reopen = partial(open, file, "rb")
                pooled = whole_files is not None and whole_files.takes(shard)
                if not pooled:  # (a worker checks its own file)
                    inputs.refuse_cut_zstd(name, file, reopen)
                skipped_before, rows_read = self.bad_rows.count, 0
                start_row = 0 if byte_range is None else None
                with read_errors.read_failures(name, file, reopen), contextlib.ExitStack() as stack:
                    if whole_files is not None and pooled:  # read by a parse worker, a few files ahead
                        tables, position = whole_files.tables(shard, name, self.bad_rows, self.leaks), None
                    else:
                        handle = inputs.line_reader(stack.enter_context(_open_shard(file, sessions)))
                        tables, position = self._shard_tables(handle, file, str(original), name, byte_range,
                                                              normalizer)
                    if position is not None:
                        start_row = position.row
                    yielded = 0
                    for yielded, table in enumerate(tables, 1):
                        exact = start_row is not None and self.bad_rows.count == skipped_before
                        self.no_loss.add(table, name, start_row + rows_read if exact else None)  # type: ignore[operator]
                        rows_read += table.num_rows
                        yield Key(shard, yielded - 1), table
                    if byte_range is None and not rows_read and self.bad_rows.count == skipped_before:
                        raise read_errors.no_rows_error(name, reopen)
                    if not yielded:
                        # a shard without rows (a byte range no line starts in, every row skipped) still
                        # has a length, 0: datasets 4.x numbers shards by the tables they yield
                        yield Key(shard, 0), normalizer.empty_table()
                if byte_range is not None and position is not None:
                    # where the next shard starts: a worker reading shards in order never rescans
                    self._line_marks_of(file)[position.offset] = (position.line, position.row)
                at_file_end = byte_range is None or byte_range[1] >= byte_range[2]
                self.unread.merge(normalizer.unread.to_dict())
                normalizer.unread = Unread()
                if not self._preparing and at_file_end:
                    self._warn_streamed_bad_rows()
                    self._warn_no_loss(name)
                    unread.warn(self.unread, name, kept=self.config.keep_message_keys, stacklevel=3)
                    self.unread = Unread()
        finally:
            if whole_files is not None:
                whole_files.close()
            if self._range_reader is not None:
                self._range_reader.close()
                self._range_reader = None

    def _shard_tables(
        self, handle: Any, file: str, original: str, name: str, byte_range: ByteRange | None, normalizer: Normalizer
    ) -> tuple[Iterator[pa.Table], LinePosition | None]:
        """One shard's canonical tables, and the position its line numbers
        run on from (None for Parquet). A plain JSONL shard large enough goes
        to the parse workers (``parse_workers``) unless datasets' ``num_proc``
        jobs already run in parallel."""
        config = self.config

        def canonical(rows: Iterator[Any]) -> Iterator[pa.Table]:
            return iter_tables(
                rows, normalizer, chunk_rows=config.chunk_rows, on_bad_row=config.on_bad_row,
                bad=self.bad_rows, leaks=self.leaks,
            )

        if normalizer.sessions and os.path.isdir(file):  # an OpenHands conversation folder (_conversation_folders)
            folder = session_logs.Session(openhands_sessions, "json", openhands_sessions.folder_document(file))
            return canonical(session_logs.rows(folder, handle, name, self._session_options())), None
        whole = file_workers.whole_file_rows(handle, original, name, normalizer, config.chunk_rows,
                                             self._session_options()) if byte_range is None else None
        if whole is not None:
            return canonical(whole), None
        if byte_range is not None:
            position, end = self._position_before(handle, file, byte_range[0]), byte_range[1]
        else:
            position, end = LinePosition(), inputs.plain_size(file)  # 0: compressed or remote
        alone = self._jobs == 1 and not normalizer.sessions  # the workers' tables have no session columns
        workers = parallel.resolve_workers(config.parse_workers if alone else 1, end - position.offset)
        if end and workers > 1:
            if self._range_reader is None:
                self._range_reader = parallel.RangeReader(
                    normalizer, workers=workers, chunk_rows=config.chunk_rows, on_bad_row=config.on_bad_row
                )
            return self._range_reader.tables(handle, file, name, position, end, self.bad_rows, self.leaks), position
        lines = handle if byte_range is None else iter_line_range(handle, position, end)
        return canonical(iter_jsonl_rows(lines, name, position)), position

    def _session_options(self) -> dict[str, Any]:
        """The options a session reader may take (``detect.rows`` hands each reader those it names)."""
        return {"branches": self.config.branches}

    def _whole_files(
        self, files: list[str], originals: list[str], ranges: list[ByteRange | None], normalizer: Normalizer
    ) -> file_workers.FileReader | None:
        """The parse workers for a session dataset's whole local files (``file_workers``), when there are two or
        more, ``num_proc`` is not given and ``parse_workers`` (or their size, by default) asks for workers."""
        if self._jobs != 1:
            return None
        sizes, wholes = {}, {}
        for shard, (file, original, byte_range) in enumerate(zip(files, originals, ranges)):
            size = file_workers.pooled_size(_local_source(str(file))) if byte_range is None else 0
            if size:
                sizes[shard] = size
                wholes[shard] = file_workers.WholeFile(str(file), str(original),
                                                       os.path.basename(str(original).split("::")[-1]),
                                                       partial(_open_shard, str(file), True))
        workers = parallel.resolve_workers(self.config.parse_workers, sum(sizes.values()))
        if workers < 2 or len(sizes) < 2:
            return None
        self._range_reader = parallel.RangeReader(normalizer, workers=workers, chunk_rows=self.config.chunk_rows,
                                                  on_bad_row=self.config.on_bad_row)
        jobs = [(group, file_workers.file_job([wholes[shard] for shard in group], normalizer,
                                              chunk_rows=self.config.chunk_rows, on_bad_row=self.config.on_bad_row,
                                              leaks=self.leaks is not None, options=self._session_options()))
                for group in file_workers.groups(sizes, workers)]
        return file_workers.FileReader(self._range_reader, jobs)

    def _line_marks_of(self, file: str) -> dict[int, tuple[int, int]]:
        stat = os.stat(file)
        return self._line_marks.setdefault((file, stat.st_size, stat.st_mtime_ns), {0: (0, 0)})

    def _position_before(self, handle: Any, file: str, start: int) -> LinePosition:
        """The first line starting at or after ``start``, with the lines and
        rows before it, counted on from the nearest line start already known."""
        begin = line_start_at_or_after(handle, start)
        marks = self._line_marks_of(file)
        known = max(offset for offset in marks if offset <= begin)
        lines, rows = marks[known]
        more_lines, more_rows = count_lines(handle, known, begin)
        marks[begin] = (lines + more_lines, rows + more_rows)
        return LinePosition(begin, lines + more_lines, rows + more_rows)

    # ------------------------------------------------------------ bad rows
    #
    # Preparing a split, each job (a num_proc worker holding its own copy of
    # the builder, or this builder when num_proc is 1) writes the rows it
    # skipped next to its output; the split merges them in job order (which
    # is file order), warns once and keeps them in split_facts for bad_rows(ds).
    # Streaming has no output: it warns as each file ends.

    def _prepare_split(self, split_generator: datasets.SplitGenerator, **kwargs: Any) -> None:
        before, self.leaks = self.bad_rows.count, LeakScan() if self.leaks is not None else None
        self.no_loss, self.unread = NoLoss(), Unread()
        super()._prepare_split(split_generator, **kwargs)
        prefix = os.path.join(self._output_dir, f"{self.dataset_name}-{split_generator.name}")
        for path in sorted(glob.glob(glob.escape(prefix) + "-[0-9][0-9][0-9][0-9][0-9]." + JOB_REPORT_FILE)):
            with open(path, encoding="utf-8") as handle:
                job = json.load(handle)
            os.remove(path)
            self.bad_rows.merge(job["bad_rows"])
            self.no_loss.merge(job.get("no_loss") or {})
            self.unread.merge(job.get("unread") or {})
            if self.leaks is not None and job["leaks"] is not None:
                self.leaks.merge(job["leaks"])
        if not os.path.isdir(self._output_dir):
            return
        if self.leaks is not None:
            split_facts.save(self._output_dir, split_generator.name, leaks=self.leaks.state())
        if self.bad_rows.count > before:
            self._warn_bad_rows()
            split_facts.save(self._output_dir, bad_rows=self.bad_rows.to_dict())
        if not split_generator.split_info.num_examples:
            raise _all_rows_skipped(split_generator.name, self.bad_rows)
        split_facts.save(self._output_dir, split_generator.name, no_loss=self.no_loss.to_dict(),
                         unread=self.unread.to_dict())
        self.no_loss, self.unread = NoLoss(), Unread()  # said by _as_dataset, on this load and on every load from the cache

    def _as_dataset(self, split: Any = datasets.Split.TRAIN, in_memory: bool = False) -> datasets.Dataset:
        ds = own_columns.without_empty_own_columns(super()._as_dataset(split, in_memory), self.config.name)
        folder = self._fs._strip_protocol(self._output_dir)
        said = no_loss_of(split_facts.per_split(folder, "no_loss"), str(split))
        if said is not None:
            warnings.warn(said, NothingToTrainWarning, stacklevel=4)
        unread.warn_saved(split_facts.per_split(folder, "unread"), str(split), kept=self.config.keep_message_keys,
                          stacklevel=4)
        return ds

    def _prepare_split_single(self, *, fpath: str, job_id: int, **kwargs: Any) -> Iterator[tuple[int, bool, Any]]:
        outer = self.bad_rows, self.leaks, self.no_loss, self.unread
        self.bad_rows, self.no_loss, self.unread, self._preparing = BadRows(), NoLoss(), Unread(), True
        self.leaks = LeakScan() if outer[1] is not None else None
        try:
            for item in super()._prepare_split_single(fpath=fpath, job_id=job_id, **kwargs):
                if item[1]:  # the job is done: leave its reports for _prepare_split
                    job_report = fpath.split("-JJJJJ")[0] + f"-{job_id:05d}.{JOB_REPORT_FILE}"
                    if os.path.isdir(os.path.dirname(job_report)):
                        with open(job_report, "w", encoding="utf-8") as handle:
                            leaks = self.leaks.state() if self.leaks is not None else None
                            json.dump({"bad_rows": self.bad_rows.to_dict(), "leaks": leaks,
                                       "no_loss": self.no_loss.to_dict(), "unread": self.unread.to_dict()}, handle)
                yield item
        except (DatasetGenerationError, OSError) as err:
            # raised here, in the worker: its __cause__ would not survive the trip back from a num_proc worker
            self._raise_cause(err)
            raise
        finally:
            (self.bad_rows, self.leaks, self.no_loss, self.unread), self._preparing = outer, False

    def _warn_no_loss(self, where: str) -> None:
        """One ``NothingToTrainWarning`` for the rows counted so far that carry no loss, then a fresh count."""
        if self.no_loss.count:
            warnings.warn(self.no_loss.message(where), NothingToTrainWarning, stacklevel=3)
        self.no_loss = NoLoss()

    def _warn_streamed_bad_rows(self) -> None:
        if self.bad_rows.count > self._warned_bad_rows:
            self._warned_bad_rows = self.bad_rows.count
            self._warn_bad_rows()

    def _warn_bad_rows(self) -> None:
        bad = self.bad_rows
        warnings.warn(
            f"skipped {bad.count} bad row(s) ({option_names.spell('on_bad_row', 'skip')}); first: "
            f"{str(bad.first_error).rstrip('.')}."
            + ("" if option_names.in_command_line() else " whileai_datasets.bad_rows(ds) lists where."),
            BadRowsWarning,
            stacklevel=3,
        )


def no_loss_of(reports: dict[str, Any], split: str) -> str | None:
    """What to say about the rows of ``split`` that carry no loss, from the reports ``_prepare_split`` kept
    per split; None when they all carry some. ``split`` is a split name or a read instruction over one or
    more (``train[:10%]``, ``train+test``): each split it names is said, as the split it is."""
    names = [split] if split in reports else list(dict.fromkeys(n for n in re.findall(r"[\w.-]+", split) if n in reports))
    said = []
    for name in names:
        if reports[name].get("count"):
            found = NoLoss()
            found.merge(reports[name])
            said.append(found.message(f"split {name!r}" if name == split else f"split {name!r} (loaded as {split!r})"))
    return " ".join(said) or None


def _all_rows_skipped(split: str, bad: BadRows) -> ExportFormatError:
    """A split left with no rows: every row was bad and skipped (an empty file raises earlier)."""
    return ExportFormatError(
        f"no rows in split {split!r}: all {bad.count} row(s) are bad and were left out; first: {bad.first_error}",
        location=f"split {split!r}",
        hint="Fix the rows (the first error says what is wrong), or check that "
        f"{'the input' if option_names.in_command_line() else 'data_files'} names the right export.",
    )


def _conversation_folders(triples: Any) -> Iterator[tuple[Any, Any, Any]]:
    """The data files of a dataset that holds sessions, each OpenHands conversation folder's files (its event files
    and ``base_state.json``) one entry, the folder, where the first of them was: it is one conversation."""
    seen: set[str] = set()
    for base, file, original in triples:
        folder = openhands_sessions.conversation_folder(str(file))
        if folder is None:
            yield base, file, original
        elif folder not in seen:
            seen.add(folder)
            yield folder, folder, folder


def _local_source(file: str) -> str:
    """The local compressed file under a path datasets decompresses on the fly (``gzip://x::/a/x.gz``), read
    through the codec's own module (``read_errors.decoded_stream``) where a session log may be in it; any other
    path as it is."""
    inner = file.split("::")[-1]
    codec = read_errors.codec_of(file)
    if "::" in file and "://" not in inner and codec in _SEEKABLE_CODECS and os.path.isfile(inner) \
            and read_errors.codec_installed(codec):
        return inner
    return file


#: Codecs whose Python module reads a stream that can go back to its start: a session is told from its head
#: (zstd and lz4 where their packages are installed; else datasets' own reader says which one to install).
_SEEKABLE_CODECS = frozenset(("gzip", "bz2", "xz", "zstd", "lz4"))


def _open_shard(file: str, sessions: bool) -> Any:
    """A shard's bytes: a compressed local file of a dataset that holds sessions through its codec's module
    (``detect`` reads its head and goes back), every other file as datasets opens it; none for an OpenHands
    conversation folder, whose files are read by its reader."""
    if sessions and os.path.isdir(file):
        return io.BytesIO()
    local = _local_source(file) if sessions else file
    return read_errors.decoded_stream(local) if local != file else open(file, "rb")

