"""File and line of the few rows an audit names, found once at the end.

The canonical rows carry no line numbers (only the ``raw`` config does), and the audit keeps only the
first few row numbers of each finding, so the lines are found by one pass over the files up to the last
row asked for: a JSONL file's non-blank lines, a ``.json`` array's elements (the line each starts on, as
the reader reads them). Parquet rows have a row number only.
"""

from __future__ import annotations

import glob
import gzip
import io
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any

from whileai_datasets import option_names
from whileai_datasets._storage import LOCAL, Storage
from whileai_datasets.auditing.audit_report import Audit
from whileai_datasets.errors import ExportFormatError
from whileai_datasets.reading import file_kind
from whileai_datasets.reading.json_array import iter_json_array_rows
from whileai_datasets.sessions.detect import detect

#: A reader's location: ``run.jsonl line 4 (row 3)``, ``rows.json line 9 (array index 2)``, ``run.parquet row 7``.
_LOCATION = re.compile(r"^(?P<file>.+?)(?: line (?P<line>\d+))?(?: \((?:row (?P<row>\d+)|array index (?P<index>\d+))\)"
                       r"| row (?P<bare>\d+))")


def source_files(source: Any) -> list[str]:
    """The JSONL files a path source names, in the order the builder reads them (a glob: sorted)."""
    if not isinstance(source, (str, os.PathLike)):
        return []
    path = os.fspath(source)
    files = sorted(glob.glob(path)) if glob.has_magic(path) else [path]
    if any(_session(f) for f in files):
        return []  # a session's rows are its conversations, not its lines: rows are named by number
    return [f for f in files if counts_lines(f)]


def _session(path: str) -> bool:
    if not os.path.isfile(path):
        return os.path.isdir(path)  # a session folder
    with open(path, "rb") as handle:
        try:
            return detect(path, handle) is not None
        except ExportFormatError:
            return False


def counts_lines(path: str) -> bool:
    """Whether the audit gives lines for the rows of ``path``: a JSONL file (plain or gzip) or a JSON array."""
    return path.endswith((".jsonl", ".jsonl.gz", ".json"))


def _json_array(path: str, store: Storage = LOCAL) -> bool:
    """A ``.json`` file holding one array: its rows are its elements, not its lines."""
    with store.open(path) as handle:
        return file_kind.is_json_array(path, handle)


def _row_lines(path: str, store: Storage = LOCAL) -> Iterator[int]:
    """The line each row of ``path`` starts on, in order: a JSONL file's non-blank lines, or the elements of
    a JSON array (read as the reader reads them; an element it cannot store still counts as a row's place)."""
    if path.endswith(".json") and _json_array(path, store):
        with store.open(path) as handle:
            for ctx, _ in iter_json_array_rows(handle, os.path.basename(path)):
                yield ctx.line
        return
    with store.open(path) as raw, (gzip.open(raw, "rt", encoding="utf-8") if path.endswith(".gz")
                                   else io.TextIOWrapper(raw, encoding="utf-8")) as lines:
        yield from (number for number, line in enumerate(lines, 1) if line.strip())


def named_rows(found: Audit) -> list[int]:
    """The row numbers an audit names: each finding's first rows and the worst rows."""
    wanted = [r for f in found.findings.values() for r in f.first]
    return wanted + [int(r) for w in found.worst.values() for r in w.rows]


def locate(source: Any, rows: Iterable[int], skipped: dict[str, Any] | None = None) -> dict[int, dict[str, Any]]:
    """Per row number (its number in the rows read): ``{"row", "file", "line"}``, the row numbered in its file
    as the reader numbers it (rows it left out counted), so one row number names one line (file and line None,
    and the row number the one asked, where unknown).

    ``skipped`` is the reader's report of the rows it left out (``BadRows.to_dict()``): their lines hold no
    row read, so they are stepped over. When it lists fewer locations than it counts, rows past the last
    one listed are left without a line (where the rest fell is not known).
    """
    wanted = sorted(set(int(r) for r in rows))
    found: dict[int, dict[str, Any]] = {r: {"row": r, "file": None, "line": None} for r in wanted}
    files = source_files(source)
    if not wanted or not files:
        return found
    left_out, complete = _left_out(skipped)
    pending = iter(wanted)
    target = next(pending, None)
    row = 0
    for path in files:
        name = os.path.basename(path)
        for in_file, number in enumerate(_row_lines(path)):
            if left_out:
                if (name, number) in left_out:
                    left_out.discard((name, number))
                    continue
            elif not complete:  # past the last skipped row listed: later lines may hide more
                return found
            while target is not None and target == row:
                found[target] = {"row": in_file, "file": path, "line": number}  # numbered as the reader numbers it
                target = next(pending, None)
            row += 1
            if target is None:
                return found
    return found


def _left_out(skipped: dict[str, Any] | None) -> tuple[set[tuple[str, int]], bool]:
    """The (file name, line) of each row the reader left out, and whether that list is all of them."""
    if not skipped or not skipped.get("count"):
        return set(), True
    places = [_parsed(text) for text in skipped.get("locations", [])]
    lines = {(os.path.basename(p["file"]), p["line"]) for p in places if p["file"] and p["line"]}
    return lines, len(lines) == int(skipped["count"])


def lines_of(path: str, places: Iterable[int], store: Storage = LOCAL) -> dict[int, int]:
    """Per place of a row in ``path`` as the Ray reader keeps it (a JSONL line's byte offset, a JSON array's
    element index), the line the row starts on."""
    if not (path.endswith(".json") and _json_array(path, store)):
        return lines_at(path, places, store)
    wanted = set(places)
    out: dict[int, int] = {}
    for index, line in zip(range(max(wanted, default=-1) + 1), _row_lines(path, store)):
        if index in wanted:
            out[index] = line
    return out


def places_in_file(path: str, places: Iterable[int], store: Storage = LOCAL) -> dict[int, tuple[int, int]]:
    """Per place of a row in ``path`` as the Ray reader keeps it (``lines_of``): the row's number in its file as
    the reader numbers it (``locate``'s, rows left out counted) and the line it starts on."""
    lines = lines_of(path, places, store)
    if path.endswith(".json") and _json_array(path, store):  # the place is the element's index already
        return {place: (place, line) for place, line in lines.items()}
    wanted = set(lines.values())
    number: dict[int, int] = {}
    for in_file, line in enumerate(_row_lines(path, store)):
        if line in wanted:
            number[line] = in_file
            if len(number) == len(wanted):
                break
    return {place: (number.get(line, place), line) for place, line in lines.items()}


def lines_at(path: str, offsets: Iterable[int], store: Storage = LOCAL) -> dict[int, int]:
    """Per byte offset of a line start in JSONL ``path`` (decompressed), its line number: one read of the
    file up to the last offset, counting newlines (the Ray audit keeps each named row's offset)."""
    out: dict[int, int] = {}
    newlines = done = 0
    with store.open(path) as raw, (gzip.GzipFile(fileobj=raw, mode="rb") if path.endswith(".gz") else raw) as handle:
        for offset in sorted(set(offsets)):
            while done < offset:
                chunk = handle.read(min(1 << 20, offset - done))
                if not chunk:
                    break
                newlines += chunk.count(b"\n")
                done += len(chunk)
            out[offset] = newlines + 1
    return out


def count_unreadable(found: Audit, bad: dict[str, Any] | None) -> int:
    """Count the rows the reader left out (``sources.Source(..., "skip")``'s ``bad_rows``) as unreadable;
    they train nothing. Returns how many; ``found.rows`` then counts every source row."""
    count = int((bad or {}).get("count", 0))
    if not count:
        return 0
    finding = found.findings["unreadable"]
    finding.rows = count
    finding.first_error = without_skip_advice(bad["first_error"]) if bad else None
    finding.where = [_parsed(text) for text in (bad or {}).get("locations", [])[:5]]
    found.findings["zero_loss"].rows += count
    found.rows += count
    return count


def without_skip_advice(error: str | None) -> str | None:
    """A reader's error without its last sentence when that one advises skipping bad rows: the audit reads
    with bad rows left out and counted whatever its ``on_bad_row`` (which is tokenize's), so the advice
    would point at an option that changes nothing here."""
    if not error:
        return error
    at = error.rfind(option_names.spell("on_bad_row", "skip"))
    if at < 0:
        return error
    start = error.rfind(". ", 0, at)
    return error[: start + 1] if start >= 0 else error


def _parsed(text: str) -> dict[str, Any]:
    """A reader's location as ``{"row", "file", "line"}`` (row: the row's number in its file, as the reader
    counts it), with the text itself under ``at``."""
    match = _LOCATION.match(text.split(", ", 1)[0])
    if match is None:
        return {"row": None, "file": None, "line": None, "at": text}
    row = match["row"] or match["index"] or match["bare"]
    return {"row": int(row) if row else None, "file": match["file"], "line": int(match["line"]) if match["line"] else None,
            "at": text}
