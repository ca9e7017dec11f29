"""Object storage in and out: ``s3://``, ``gs://`` and anything else ``pyarrow.fs`` or ``fsspec`` opens.

A URI is opened through ``pyarrow.fs.FileSystem.from_uri`` (credentials the
usual way: the environment, AWS profiles, a GCS service account), or, for a
scheme pyarrow does not know, ``fsspec``; an explicit ``filesystem=`` (a
``pyarrow.fs.FileSystem`` or an ``fsspec`` filesystem) replaces both. A URI is
never folded into a local path (``s3:/bucket`` in the working directory).

What goes wrong is named with the URI and what to do: an unknown scheme, a
missing bucket, denied credentials, a missing object.

:class:`ObjectStaging` is the object-store side of ``_files.Replacement`` for a
folder of parts: the parts go to a hidden prefix beside the output, and are put
in place only once the job has succeeded (copied, then the staging removed).
An object store has no rename of a prefix, so the copy is not one step: a reader
listing the output during it may see some new parts beside old ones.
"""

from __future__ import annotations

import atexit
import contextlib
import fnmatch
import glob
import io
import os
import posixpath
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

import pyarrow as pa
import pyarrow.fs as pafs

from whileai_datasets import _files
from whileai_datasets.errors import ExportFormatError, OptionError, WhileaiError, WriteError

#: A URI's scheme (``s3://``, ``gs://``, ``https://``): not a path on this machine.
_URI = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+)://")
_DENIED = re.compile(r"ACCESS_DENIED|AccessDenied|InvalidAccessKeyId|SignatureDoesNotMatch|Forbidden|\b403\b|"
                     r"credentials|permission", re.IGNORECASE)
_NO_BUCKET = re.compile(r"NO_SUCH_BUCKET|NoSuchBucket|bucket\b.*\b(not found|does not exist)", re.IGNORECASE)
_CREDENTIALS = ("Check the credentials: the environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE, "
                "GOOGLE_APPLICATION_CREDENTIALS), your profile files, or pass filesystem= with credentials that "
                "may {action} it.")


def is_uri(path: object) -> bool:
    """Whether ``path`` is a URI (``scheme://...``) rather than a path on this machine."""
    return isinstance(path, (str, os.PathLike)) and _URI.match(os.fspath(path)) is not None


def arrow_filesystem(filesystem: Any) -> pafs.FileSystem:
    """``filesystem`` as a ``pyarrow.fs.FileSystem`` (an ``fsspec`` filesystem is wrapped)."""
    if isinstance(filesystem, pafs.FileSystem):
        return filesystem
    if hasattr(filesystem, "protocol") and hasattr(filesystem, "open"):  # an fsspec AbstractFileSystem
        return pafs.PyFileSystem(pafs.FSSpecHandler(filesystem))
    raise OptionError(f"filesystem must be a pyarrow.fs.FileSystem or an fsspec filesystem, got "
                      f"{type(filesystem).__name__}", location="filesystem",
                      hint="Pass e.g. pyarrow.fs.S3FileSystem(...) or fsspec.filesystem('s3', ...).")


def resolve(uri: str, filesystem: Any = None) -> tuple[pafs.FileSystem, str]:
    """The filesystem that opens ``uri`` and the path within it.

    Raises:
        ExportFormatError: a scheme neither pyarrow nor fsspec opens.
    """
    scheme, _, rest = uri.partition("://")
    if filesystem is not None:
        return arrow_filesystem(filesystem), rest.split("?", 1)[0]
    try:
        return pafs.FileSystem.from_uri(uri)  # type: ignore[no-any-return]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as err:
        cause: Exception = err
    try:
        import fsspec

        found, path = fsspec.core.url_to_fs(uri)
        return arrow_filesystem(found), path
    except (ImportError, ValueError) as err:  # no fsspec, no such protocol, or its package missing
        cause = err
    raise ExportFormatError(f"{scheme}:// is not a scheme pyarrow.fs or fsspec can open ({cause})", location=uri,
                            hint="Use s3://, gs:// (or install the fsspec package for that scheme), or pass "
                                 "filesystem= with a filesystem that opens it.")


def error(uri: str, err: Exception, *, writing: bool = False, filesystem: Any = None) -> WhileaiError:
    """The error for ``err`` raised opening ``uri``: missing bucket, denied access, missing object, or the cause."""
    if isinstance(err, WhileaiError):
        return err
    text = str(err)
    action = "write" if writing else "read"
    kind = WriteError if writing else ExportFormatError
    bucket = uri.partition("://")[2].split("/", 1)[0]
    if _NO_BUCKET.search(text) or (isinstance(err, FileNotFoundError) and not _bucket_exists(uri, filesystem)):
        return kind(f"no such bucket {bucket!r} (cannot {action} this URI)", location=uri,
                    hint="Create the bucket, or check its name and the endpoint/region the credentials point at "
                         "(AWS_ENDPOINT_URL, AWS_REGION).")
    if isinstance(err, PermissionError) or _DENIED.search(text):
        return kind(f"access denied: the credentials may not {action} this URI ({text.strip()})", location=uri,
                    hint=_CREDENTIALS.format(action=action))
    if isinstance(err, FileNotFoundError):
        return kind("no such object", location=uri, hint="Check the key (the path after the bucket).")
    return kind(f"cannot {action}: {text.strip() or type(err).__name__}", location=uri,
                hint="Check the URI, the network and the credentials.")


def check_bucket(uri: str, filesystem: Any = None, *, writing: bool = False) -> None:
    """Raise when the bucket of ``uri`` does not exist (before a job writes to it for minutes)."""
    if not _bucket_exists(uri, filesystem):
        raise error(uri, FileNotFoundError(uri), writing=writing, filesystem=filesystem)


def _bucket_exists(uri: str, filesystem: Any) -> bool:
    try:
        fs, path = resolve(uri, filesystem)
        if path.startswith("/"):  # a file:// path: no bucket
            return True
        return bool(fs.get_file_info(path.split("/", 1)[0]).type != pafs.FileType.NotFound)
    except (OSError, WhileaiError):
        return True  # cannot tell: say "no such object"


def _info(uri: str, filesystem: Any) -> tuple[pafs.FileSystem, str, pafs.FileInfo]:
    fs, path = resolve(uri, filesystem)
    try:
        return fs, path, fs.get_file_info(path)
    except OSError as err:
        raise error(uri, err, filesystem=filesystem) from err


_DATA_SUFFIXES = (".jsonl", ".json", ".ndjson", ".parquet")
_COMPRESSED = (".gz", ".bz2", ".zst", ".lz4", ".xz")


def is_data_name(name: str) -> bool:
    """Whether a file name is a whileai export's (JSONL, JSON, Parquet; optionally compressed)."""
    lower = name.lower()
    for suffix in _COMPRESSED:
        lower = lower.removesuffix(suffix)
    return lower.endswith(_DATA_SUFFIXES)


def expand(uri: str, accept: Callable[[str], bool] = is_data_name, filesystem: Any = None) -> list[str]:
    """The object URIs ``uri`` names: itself (an object), the data objects of a prefix, or those a glob
    matches (sorted). Empty when none is found."""
    fs, path, info = _info(uri, filesystem)
    if info.type == pafs.FileType.File:
        return [uri]
    folder, pattern = (uri.rstrip("/"), None) if not glob.has_magic(uri) else posixpath.split(uri)
    if pattern is not None:
        fs, path, info = _info(folder, filesystem)
    if info.type != pafs.FileType.Directory:
        return []
    try:
        entries = fs.get_file_info(pafs.FileSelector(path, recursive=False))
    except OSError as err:
        raise error(folder, err, filesystem=filesystem) from err
    names = sorted(e.base_name for e in entries if e.type == pafs.FileType.File)
    keep = [n for n in names if (fnmatch.fnmatchcase(n, pattern) if pattern else accept(n))]
    return [f"{folder}/{name}" for name in keep]


def size(uri: str, filesystem: Any = None) -> int:
    """The object's size in bytes."""
    _, _, info = _info(uri, filesystem)
    if info.type != pafs.FileType.File:
        raise error(uri, FileNotFoundError(uri), filesystem=filesystem)
    return int(info.size)


def open_input(uri: str, filesystem: Any = None) -> IO[bytes]:
    """The object's bytes as a seekable, buffered binary file."""
    fs, path = resolve(uri, filesystem)
    try:
        return io.BufferedReader(fs.open_input_file(path), buffer_size=1 << 20)  # type: ignore[arg-type]
    except OSError as err:
        raise error(uri, err, filesystem=filesystem) from err


def upload(local: str, uri: str, filesystem: Any = None) -> None:
    """The local file ``local`` written to ``uri`` (an object appears once whole)."""
    fs, path = resolve(uri, filesystem)
    try:
        with open(local, "rb") as source, fs.open_output_stream(path) as sink:
            shutil.copyfileobj(source, sink, 8 << 20)
    except OSError as err:
        raise error(uri, err, writing=True, filesystem=filesystem) from err


_FETCHED: list[str] = []


def local_copy(uri: str, filesystem: Any = None) -> str:
    """What the local engine reads for a URI source: a local copy of the object, or for a prefix or a
    glob, a glob over local copies of its data objects; in a temp folder removed when Python exits.

    Raises:
        ExportFormatError: no such bucket, object or matching object; access denied; an unknown scheme.
    """
    objects = expand(uri, is_data_name, filesystem)
    if not objects:
        check_bucket(uri, filesystem)
        raise ExportFormatError("no such object (or no .jsonl/.parquet object under this prefix or pattern)",
                                location=uri, hint="Check the key, or pass a prefix or glob that holds exports.")
    folder = tempfile.mkdtemp(prefix=f"whileai-{_files.owner_tag()}")
    _FETCHED.append(folder)
    copies = [fetch(item, filesystem, folder) for item in objects]
    return copies[0] if objects == [uri] else os.path.join(folder, "*")


def named_as_given(path: str | None, uri: str) -> str | None:
    """The object URI of a file ``local_copy(uri)`` made (None stays None)."""
    if path is None:
        return None
    objects = uri if not glob.has_magic(uri) and is_data_name(posixpath.basename(uri)) else None
    folder = posixpath.dirname(uri) if glob.has_magic(uri) else uri.rstrip("/")
    return objects or f"{folder}/{os.path.basename(path)}"


def fetch(uri: str, filesystem: Any, folder: str) -> str:
    """A local copy of the object ``uri`` under its own name in ``folder``."""
    local = os.path.join(folder, posixpath.basename(uri.split("?", 1)[0].rstrip("/")) or "object")
    with open_input(uri, filesystem) as source, open(local, "wb") as sink:
        try:
            shutil.copyfileobj(source, sink, 8 << 20)
        except OSError as err:
            raise error(uri, err, filesystem=filesystem) from err
    return local


@atexit.register
def _remove_fetched() -> None:
    for folder in _FETCHED:
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class Storage:
    """Opens a source file (a local path or a URI) on any node; pickles with its explicit filesystem."""

    filesystem: Any = None

    def open(self, path: str) -> IO[bytes]:
        return open_input(path, self.filesystem) if is_uri(path) else open(path, "rb")

    def size(self, path: str) -> int:
        return size(path, self.filesystem) if is_uri(path) else os.path.getsize(path)


#: Local paths (and URIs through their scheme's default filesystem): the default ``Storage``.
LOCAL = Storage()


class ObjectStaging:
    """Parts written under a hidden prefix beside ``target`` (a URI), put in place by :meth:`commit`,
    removed by :meth:`discard`; as ``_files.Replacement(target, folder=True)``."""

    def __init__(self, target: str, filesystem: Any = None) -> None:
        self.target = target.rstrip("/")
        self.filesystem = filesystem
        parent, name = posixpath.split(self.target)
        self.swept = self._sweep(parent, f".{name}.whileai-")
        self.path = f"{parent}/.{name}.whileai-{_files.owner_tag()}{os.urandom(4).hex()}.tmp"
        self.done = False

    def _sweep(self, parent: str, prefix: str) -> list[str]:
        """Remove the staging prefixes beside the target whose export is gone (``_files.owner_gone``: a
        process of this machine that is no longer running); returns their URIs."""
        fs, folder = resolve(parent, self.filesystem)
        removed = []
        try:
            for entry in _listing(fs, folder):
                name = entry.base_name
                if name.startswith(prefix) and _files.owner_gone(name[len(prefix):]):
                    fs.delete_dir(entry.path)
                    removed.append(f"{parent}/{name}")
        except OSError as err:
            raise error(self.target, err, writing=True, filesystem=self.filesystem) from err
        return removed

    def commit(self) -> str:
        """Remove the target's old parts, copy the staged parts in, remove the staging prefix."""
        fs, staged = resolve(self.path, self.filesystem)
        _, dest = resolve(self.target, self.filesystem)
        try:
            old = [e.path for e in _listing(fs, dest) if e.type == pafs.FileType.File]
            new = sorted(e.base_name for e in _listing(fs, staged) if e.type == pafs.FileType.File)
            for path in old:
                fs.delete_file(path)
            for name in new:
                fs.copy_file(f"{staged}/{name}", f"{dest}/{name}")
            self.done = True
        except OSError as err:
            raise error(self.target, err, writing=True, filesystem=self.filesystem) from err
        finally:
            self.discard()
        return self.target

    def discard(self) -> None:
        """Remove the staging prefix (never the target); safe to call again."""
        fs, staged = resolve(self.path, self.filesystem)
        with contextlib.suppress(FileNotFoundError):  # nothing was staged
            fs.delete_dir(staged)


def _listing(fs: pafs.FileSystem, path: str) -> list[pafs.FileInfo]:
    return fs.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=False))  # type: ignore[no-any-return]
