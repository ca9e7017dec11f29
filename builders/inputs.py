"""What the builder checks and reads about its input files, and the small
reports it writes beside a prepared dataset."""

from __future__ import annotations

import io
import json
import os
from typing import Any

from whileai_datasets import option_names
from whileai_datasets.errors import ExportFormatError
from whileai_datasets.reading import read_errors


def load_tools(tools: Any) -> tuple[Any, ...] | None:
    """``tools`` as given (a list), as JSON text of a list (a string starting with ``[``, the
    way LLaMA-Factory writes them), or read from a JSON file path."""
    if tools is None:
        return None
    if isinstance(tools, str) and tools.lstrip().startswith("["):
        tools = _tools_text(tools)
    elif isinstance(tools, (str, os.PathLike)):
        path = os.fspath(tools)
        try:
            with open(path, encoding="utf-8") as handle:
                tools = json.load(handle)
        except OSError as err:
            raise ExportFormatError(
                f"cannot read the tools file ({err.strerror})",
                location=path,
                hint="Pass a list or an existing JSON file.",
            ) from err
        except ValueError as err:
            raise ExportFormatError(
                f"the tools file is not valid JSON ({err})",
                location=path,
                hint="It must hold a JSON list of tool schemas.",
            ) from err
    if not isinstance(tools, (list, tuple)):
        raise ExportFormatError(
            f"tools must be a list of tool schemas, JSON text of one, or a path to a JSON file, "
            f"got {type(tools).__name__}",
            hint="Pass tools=[{...}, ...], tools='[{...}, ...]' or tools='tools.json'.",
        )
    return tuple(tools)


def _tools_text(text: str) -> list[Any]:
    """``tools=`` given as JSON text: it must parse to a list of tool schemas (objects)."""
    try:
        tools = json.loads(text)
    except ValueError as err:
        raise ExportFormatError(
            f"tools starts with '[', so it was read as JSON text of tool schemas, but it does not parse ({err})",
            location="tools",
            hint="Pass the JSON text of a list of tool schemas, a list, or a path to a JSON file.",
        ) from err
    if not all(isinstance(tool, dict) for tool in tools):
        kinds = sorted({type(tool).__name__ for tool in tools if not isinstance(tool, dict)})
        raise ExportFormatError(
            f"tools (JSON text) must hold tool schemas (objects), got {', '.join(kinds)} in the list",
            location="tools",
            hint='Write each tool as {"type": "function", "function": {...}}.',
        )
    return list(tools)


#: ``.md``: Aider's chat history (read only when its content is one, ``whileai_datasets.sessions``)
_DATA_SUFFIXES = (".jsonl", ".json", ".ndjson", ".parquet", ".md")
_COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".lz4")


def check_extension(file: str, split: str) -> None:
    """Refuse files that cannot be whileai exports. ``datasets`` fills in
    every file of the working directory when ``data_files`` is left out."""
    name = file.split("::")[0].rsplit("/", 1)[-1].lower()
    for suffix in _COMPRESSION_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    if not name.endswith(_DATA_SUFFIXES):
        raise ExportFormatError(
            f"{file!r} (split {split!r}) is not a whileai export: expected .jsonl, .json, .ndjson or .parquet,"
            " optionally compressed",
            hint=option_names.files_hint(),
        )


#: the first bytes of the compressions ``datasets`` extracts
_COMPRESSED_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd", b"\x04\x22\x4d\x18")


def plain_size(file: str) -> int:
    """The size of ``file`` when it is a local, uncompressed file (so it can
    be read by byte ranges), else 0."""
    if "://" in file or "::" in file or not os.path.isfile(file):
        return 0
    with open(file, "rb") as probe:
        head = probe.read(6)
    return 0 if head.startswith(_COMPRESSED_MAGIC) else os.path.getsize(file)




def refuse_cut_zstd(name: str, file: str, reopen: Any) -> None:
    """A zstd file whose last frame is cut short, refused before it is read:
    fsspec's zstd reader would hand on the cut last line as if it were whole."""
    if read_errors.codec_of(file) == "zstd" and read_errors.zstd_stops_early(file):
        cut = EOFError("the last zstd frame is incomplete")
        raise read_errors.truncated_error(name, file, reopen, cut) from cut


def line_reader(handle: Any) -> Any:
    """``handle``, buffered when it is a raw stream (fsspec's zstd reader has no ``readline``)."""
    return io.BufferedReader(handle) if isinstance(handle, io.RawIOBase) else handle
