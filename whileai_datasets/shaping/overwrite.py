"""Refusing an output that would write over an input, before anything is read or written.

An export's rows may be the only copy of a run: ``export run.jsonl run.jsonl``
(a typo, a script that reuses a variable) must not replace them. An output is
the input when both name one file, however spelled: the same path, another
spelling (``./run.jsonl``, ``out/../run.jsonl``), a symlink to it, or a hard
link (the same device and inode). A directory output (the Ray engine replaces
the whole directory) must also not be, or contain, an input. The writers'
temp files need no check: each is a new name created exclusively beside the
output (``_files.Replacement``), so it cannot be an existing input.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from whileai_datasets import _storage
from whileai_datasets.errors import ExportFormatError


def input_paths(source: Any) -> list[str]:
    """The local files ``source`` reads: a path, a list of paths, or a
    ``Dataset``'s cache files (anything else reads no file)."""
    if isinstance(source, (str, os.PathLike)):
        return [os.fspath(source)]
    cache_files = getattr(source, "cache_files", None)
    if isinstance(cache_files, list):
        return [entry["filename"] for entry in cache_files if isinstance(entry, dict) and "filename" in entry]
    if isinstance(source, (list, tuple)) and all(isinstance(item, (str, os.PathLike)) for item in source):
        return [os.fspath(item) for item in source]
    return []


def refuse_overwrite(
    output: str | os.PathLike[str] | None, inputs: Iterable[str | os.PathLike[str] | None], *, directory: bool = False
) -> None:
    """Raise ``ExportFormatError`` when ``output`` is one of ``inputs``; with
    ``directory``, also when the output directory is or contains one of them.

    Raises:
        ExportFormatError: naming the output, the input and how they are the same file.
    """
    if output is None:
        return
    out = os.fspath(output)
    if _storage.is_uri(out):  # never folded into a local s3:/bucket path
        _refuse_object_overwrite(out, inputs, directory)
        return
    for given in inputs:
        if given is None or not os.path.exists(given):
            continue  # what does not exist cannot be written over
        source = os.fspath(given)
        reason = _same_file(out, source) or (_inside(out, source) if directory else None)
        if reason is not None:
            raise _refusal(out, source, reason, directory)


def _refuse_object_overwrite(out: str, inputs: Iterable[str | os.PathLike[str] | None], directory: bool) -> None:
    """An output URI is an input URI spelled the same (or, for a directory, a prefix of one)."""
    prefix = out.rstrip("/") + "/"
    for given in inputs:
        source = os.fspath(given) if given is not None else ""
        if source.rstrip("/") == out.rstrip("/"):
            raise _refusal(out, source, "the same URI", directory)
        if directory and source.startswith(prefix):
            raise _refusal(out, source, "the output prefix contains it, and the export replaces that prefix", True)


def _same_file(target: str, source: str) -> str | None:
    """How ``target`` names the file ``source`` names, or None when it does not."""
    if os.path.abspath(target) == os.path.abspath(source):
        return "the same path"
    if os.path.realpath(target) == os.path.realpath(source):
        if os.path.islink(target) or os.path.islink(source):
            return "the same file, through a symlink"
        return "the same file, spelled another way"
    try:
        if os.path.samefile(target, source):
            return "the same file: a hard link to it"
    except OSError:  # one of them does not exist (yet): they cannot be one file
        return None
    return None


def _inside(folder: str, source: str) -> str | None:
    """Whether the directory ``folder`` holds ``source`` (at any depth)."""
    root = os.path.realpath(folder)
    path = os.path.realpath(source)
    try:
        common = os.path.commonpath([root, path])
    except ValueError:  # different drives
        return None
    if common == root and path != root:
        return "the output directory contains it, and the export replaces that directory"
    return None


def _refusal(output: str, source: str, reason: str, directory: bool) -> ExportFormatError:
    return ExportFormatError(
        f"the output would write over the input {source!r} ({reason}); nothing was read or written",
        location=output,
        hint=f"Write to a new path (e.g. {_suggestion(output, directory)!r}): an export never replaces its input.",
    )


def _suggestion(output: str, directory: bool) -> str:
    """A sibling of ``output`` named ``<stem>.train.jsonl`` (``.parquet`` for
    Parquet; a directory keeps its suffix)."""
    head, name = os.path.split(output.rstrip(os.sep) or output)
    stem, _, suffix = name.partition(".")
    if directory:
        return os.path.join(head, f"{stem}.train" + (f".{suffix}" if suffix else ""))
    return os.path.join(head, stem + (".train.parquet" if name.lower().endswith(".parquet") else ".train.jsonl"))
