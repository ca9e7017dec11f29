"""What goes wrong while a file is read, as ``ExportFormatError`` naming the file and line.

The reader's hot loop only parses; these functions run once something failed:

* a compressed file that ends early (an interrupted download) raises
  ``EOFError`` (gzip, bz2, xz, lz4) or the codec's own error (zstd) from deep
  inside the line iteration; :func:`read_failures` turns it into an error
  naming the file, the line it stopped in (counted by reading the file again,
  up to the cut) and the likely cause;
* a line nested deeper than Python's recursion limit makes ``json.loads`` (or
  the normalizer) raise ``RecursionError``: :func:`nesting_error` names the
  line and the limit;
* a file with no rows: :func:`no_rows_error`.
"""

from __future__ import annotations

import bz2
import functools
import gzip
import importlib
import io
import lzma
import sys
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

import pyarrow as pa

from whileai_datasets import option_names
from whileai_datasets.errors import ExportFormatError, WhileaiError
from whileai_datasets.rows.normalize import RowContext

#: Bytes read at a time while counting the lines before a cut.
_COUNT_BLOCK = 1 << 16
#: Codec names by the protocol fsspec (and so ``datasets``) opens the file with, or by suffix.
_CODECS = {
    "gzip": "gzip",
    "gz": "gzip",
    "bz2": "bz2",
    "xz": "xz",
    "lzma": "xz",
    "zstd": "zstd",
    "zst": "zstd",
    "lz4": "lz4",
}


@functools.cache
def _codec_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a decompressor raises on data that stops or breaks off
    (looked up once: the optional codecs are imported on first use)."""
    found: list[type[BaseException]] = [EOFError, zlib.error, lzma.LZMAError]
    for module, name in (("zstandard", "ZstdError"), ("lz4.frame", "LZ4FrameError")):
        try:
            found.append(getattr(__import__(module, fromlist=[name]), name))
        except (ImportError, AttributeError):
            continue
    return tuple(found)


def codec_of(path: str) -> str | None:
    """The compression a path is read with (``gzip://x::/a/x.gz`` or ``x.jsonl.gz``), or None."""
    head = path.split("::")[0]
    if "://" in head:
        return _CODECS.get(head.split("://")[0])
    return _CODECS.get(head.rsplit(".", 1)[-1].lower()) if "." in head else None


def decoded_stream(path: str) -> IO[bytes]:
    """A local file's decompressed bytes through the codec's own Python
    module, which hands out every byte it decoded before a cut (for
    :func:`complete_lines` where the reader used another decoder)."""
    codec = codec_of(path)
    if codec == "gzip":
        return gzip.open(path, "rb")
    if codec == "bz2":
        return bz2.open(path, "rb")
    if codec == "xz":
        return lzma.open(path, "rb")
    if codec == "lz4":
        import lz4.frame

        return lz4.frame.open(path, "rb")  # type: ignore[no-any-return]
    if codec == "zstd":
        return io.BufferedReader(_RewindingZstd(path))
    return open(path, "rb")


def codec_installed(codec: str | None) -> bool:
    """Whether the Python module of ``codec`` (``codec_of``'s name) imports: the standard library's always do."""
    package = _CODEC_PACKAGES.get(codec or "")
    if package is None:
        return True
    try:
        importlib.import_module(package)
    except ImportError:
        return False
    return True


class _RewindingZstd(io.RawIOBase):
    """A local zstd file's decoded bytes that can go back to an earlier position, as gzip's reader can: zstandard's
    own stream only reads forward, so a backward seek opens the file again and reads up to the position (telling
    a session from its head goes back once, to the start)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._stream = self._open()
        self._at = 0

    def _open(self) -> Any:
        import zstandard

        return zstandard.open(self._path, "rb")

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        self._at += len(data)
        return len(data)

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._at
        elif whence != io.SEEK_SET:
            raise io.UnsupportedOperation("a zstd stream does not know its end before reading to it")
        if offset < self._at:
            self._stream.close()
            self._stream, self._at = self._open(), 0
        while self._at < offset:
            skipped = len(self._stream.read(min(_COUNT_BLOCK, offset - self._at)))
            if not skipped:
                break
            self._at += skipped
        return self._at

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()


def complete_lines(reopen: Callable[[], IO[bytes]]) -> int:
    """How many complete lines the file yields before its data stops (read
    again from the start, a block at a time, until the codec fails)."""
    lines = 0
    try:
        with reopen() as handle:
            read = getattr(handle, "read1", handle.read)
            while True:
                block = read(_COUNT_BLOCK)
                if not block:
                    break
                lines += block.count(b"\n")
    except (*_codec_errors(), OSError):
        pass  # the data stops here: what was read before is what counts
    return lines


def truncated_error(name: str, path: str, reopen: Callable[[], IO[bytes]], err: BaseException) -> ExportFormatError:
    """The error for a compressed file whose data stops early (or breaks off)."""
    codec = codec_of(path) or "compressed"
    lines = complete_lines(reopen)
    cut = isinstance(err, EOFError) or "end" in str(err).lower() or "truncat" in str(err).lower()
    problem = (
        f"the {codec} file ends early: its data stops inside line {lines + 1}, after {lines} complete line(s) "
        f"({type(err).__name__}: {err})"
        if cut
        else f"the {codec} data is corrupt after {lines} complete line(s) ({type(err).__name__}: {err})"
    )
    return ExportFormatError(
        problem,
        location=f"{name} line {lines + 1}",
        hint="The download or copy was probably cut short: fetch the file again and compare its size or "
        "checksum with the original.",
    )


def zstd_stops_early(path: str) -> bool:
    """Whether a local zstd file's last frame is cut short: fsspec's zstd
    reader returns end-of-file there instead of raising, so this decodes the
    compressed file again, a block at a time, and asks the decoder."""
    try:
        import zstandard
    except ImportError:
        return False  # opening the file says what to install
    local = path.split("::")[-1]
    if "://" in local:
        return False  # a remote file is read once; nothing to check against
    decoder = zstandard.ZstdDecompressor()
    frame = decoder.decompressobj()
    started = False
    with open(local, "rb") as handle:
        for block in iter(lambda: handle.read(_COUNT_BLOCK << 4), b""):
            while block:
                started = True
                frame.decompress(block)
                block = frame.unused_data if frame.eof else b""
                if block:
                    frame = decoder.decompressobj()
    return started and not frame.eof


def nesting_error(ctx: RowContext, err: RecursionError) -> ExportFormatError:
    """The error for a row nested deeper than Python's recursion limit allows."""
    limit = sys.getrecursionlimit()
    return ExportFormatError(
        f"the row nests lists/objects deeper than can be read: Python's recursion limit is {limit} frames, "
        f"so nesting must stay well below {limit} levels ({err})",
        location=ctx.at(),
        hint="whileai rows nest a few levels; this line is likely corrupt. Fix or drop it, or pass "
        f"{option_names.spell('on_bad_row', 'skip')}.",
    )


def unencodable_error(ctx: RowContext, err: UnicodeEncodeError) -> ExportFormatError:
    """The error for a row holding a lone surrogate (``\\ud800``: valid JSON, not valid Unicode)."""
    bad = err.object[err.start : err.end] if isinstance(err.object, str) else ""
    shown = "".join(f"\\u{ord(c):04x}" for c in bad) or "a surrogate"
    return ExportFormatError(
        f"the row holds {shown}, half of a UTF-16 surrogate pair: valid as a JSON escape, but not a character, "
        "so it cannot be stored as UTF-8 text",
        location=ctx.at(),
        hint="The writer split an emoji or other character in two; fix the text (or the line's bytes), or pass "
        f"{option_names.spell('on_bad_row', 'skip')}.",
    )


def no_rows_error(name: str, reopen: Callable[[], IO[bytes]]) -> ExportFormatError:
    """The error for a file that holds no rows (empty, only blank lines, or ``[]``)."""
    with reopen() as handle:
        head = handle.read(64)
    what = "the file holds only blank lines" if head else "the file is empty"
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"["):  # a .json file: nothing else gets here with one
        what = "the file holds an empty JSON array"
    return ExportFormatError(
        f"no rows in {name}: {what}",
        location=name,
        hint="Check that the export that wrote it finished (or the download completed), "
        f"{option_names.leave_out_hint()}.",
    )


#: The package fsspec needs to open each codec that is not in the standard library.
_CODEC_PACKAGES = {"zstd": "zstandard", "lz4": "lz4"}


def missing_codec_error(name: str, path: str) -> ExportFormatError:
    """The error for a compressed file whose codec's package is not installed."""
    codec = codec_of(path) or "this compression"
    package = _CODEC_PACKAGES.get(codec, "the package for it")
    return ExportFormatError(
        f"cannot decompress a {codec} file: {package} is not installed",
        location=name,
        hint=f"pip install {package}, or decompress the file first.",
    )


@contextmanager
def read_failures(name: str, path: str, reopen: Callable[[], IO[bytes]]) -> Iterator[None]:
    """Turn what breaks while ``path`` is read (a compressed stream that ends
    early or is corrupt, an unreadable Parquet file, an I/O error) into an
    ``ExportFormatError`` naming ``name`` and, for JSONL, the line.

    A ``GeneratorExit`` (the reading generator closed early, or collected
    while the interpreter shuts down, when imports and module globals no
    longer work) passes through first, before any name of this module is
    looked up."""
    try:
        yield
    except GeneratorExit:
        raise
    except Exception as err:
        translated = _read_failure(name, path, reopen, err)
        if translated is None:
            raise
        raise translated from err


def _read_failure(name: str, path: str, reopen: Callable[[], IO[bytes]], err: Exception) -> ExportFormatError | None:
    """The ``ExportFormatError`` for what ``read_failures`` caught, or None to
    let it pass (ours already say where; a too-deep row is named per row by the reader)."""
    if isinstance(err, (WhileaiError, RecursionError)):
        return None
    if isinstance(err, _codec_errors()):
        return truncated_error(name, path, reopen, err)
    if isinstance(err, (OSError, pa.ArrowException)):  # before ValueError: pyarrow's ArrowInvalid is one too
        if codec_of(path) is not None and _is_codec_failure(err):
            return truncated_error(name, path, reopen, err)
        return ExportFormatError(
            f"cannot read the file ({type(err).__name__}: {str(err).strip()})",
            location=name,
            hint="Check that it is a whileai JSONL or Parquet export and that it was copied whole.",
        )
    if isinstance(err, ValueError) and str(err).startswith("Compression type"):
        return missing_codec_error(name, path)
    return None


def _is_codec_failure(err: BaseException) -> bool:
    """An ``OSError`` a decompressor raises (``gzip.BadGzipFile``, bz2's
    "Invalid data stream"), not one of the file system."""
    return getattr(err, "errno", None) is None

