"""The ``whileai/export`` builder: whileai rows of any shape into the canonical schema.

``import whileai_datasets`` registers it, then::

    load_dataset("whileai/export", data_files="run.jsonl", system_prompt=..., tools=...)

Configs: ``default`` (training rows: what whileai's ``training_rows`` builds
before think-stripping, unrolling and truncation, which are transforms here),
``preference`` (chosen/rejected pairs as whole conversations) and ``raw``
(every key kept, for analysis). Files are ``.jsonl``, ``.jsonl.gz`` (any
compression ``datasets`` extracts) or ``.parquet``, read a chunk at a time.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import datasets
import pyarrow as pa
from datasets.builder import Key
from datasets.exceptions import DatasetGenerationError

from whileai_datasets._typing import MASK_MODES, ON_BAD_ROW
from whileai_datasets.canonical import Normalizer, Options
from whileai_datasets.errors import ExportFormatError, WhileaiError
from whileai_datasets.reader import DEFAULT_CHUNK_ROWS, BadRows, iter_jsonl_rows, iter_parquet_rows, iter_tables

#: ``dataset_name`` without the '/', which would otherwise become a folder in
#: the cache paths (``.../whileai/export-train.arrow`` not found).
CACHE_NAME = "whileai_export"
BAD_ROWS_FILE = "whileai_bad_rows.json"


class BadRowsWarning(UserWarning):
    """Rows were skipped under ``on_bad_row="skip"``."""


def _load_tools(tools: Any) -> tuple[Any, ...] | None:
    """``tools`` as given (a list) or read from a JSON file path."""
    if tools is None:
        return None
    if isinstance(tools, (str, os.PathLike)):
        path = os.fspath(tools)
        try:
            with open(path, encoding="utf-8") as handle:
                tools = json.load(handle)
        except OSError as err:
            raise ExportFormatError(
                f"cannot read the tools file ({err.strerror})", location=path, hint="Pass a list or an existing JSON file."
            ) from err
        except ValueError as err:
            raise ExportFormatError(
                f"the tools file is not valid JSON ({err})", location=path, hint="It must hold a JSON list of tool schemas."
            ) from err
    if not isinstance(tools, (list, tuple)):
        raise ExportFormatError(
            f"tools must be a list of tool schemas or a path to a JSON file, got {type(tools).__name__}",
            hint="Pass tools=[{...}, ...] or tools='tools.json'.",
        )
    return tuple(tools)


@dataclass
class WhileaiExportConfig(datasets.BuilderConfig):
    """Options of the ``whileai/export`` builder.

    Args:
        system_prompt: Prepended to every conversation as a system message
            (whileai's ``system_prompt=``); empty prepends nothing.
        tools: Tool schemas put on every row, as a list or a path to a JSON
            file; when absent, a row keeps the ``tools`` it carries.
        mask_mode: ``"assistant"`` (every assistant turn carries loss) or
            ``"final"`` (the last one only).
        on_bad_row: ``"raise"`` (the default) stops at the first bad row with
            its file and line; ``"skip"`` skips bad rows, warns once with the
            count and first location, and keeps the report
            (``whileai_datasets.bad_rows(ds)``).
        keep_message_keys: Keep per-message keys whileai drops (``extra``).
        chunk_rows: Rows per Arrow chunk.
    """

    system_prompt: str | None = None
    tools: Any = None
    mask_mode: str = "assistant"
    on_bad_row: str = "raise"
    keep_message_keys: bool = False
    chunk_rows: int = DEFAULT_CHUNK_ROWS
    features: datasets.Features | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.validate()

    def validate(self) -> None:
        """Check the options; ``datasets`` sets load_dataset's keyword
        arguments on a copy of a preset config after ``__post_init__``, so the
        builder calls this again once they are in."""
        if self.mask_mode not in MASK_MODES:
            raise ExportFormatError(
                f"mask_mode must be one of {', '.join(map(repr, MASK_MODES))}, got {self.mask_mode!r}",
                hint="Pick one of those.",
            )
        if self.on_bad_row not in ON_BAD_ROW:
            raise ExportFormatError(
                f"on_bad_row must be one of {', '.join(map(repr, ON_BAD_ROW))}, got {self.on_bad_row!r}",
                hint="Pick one of those.",
            )
        if self.chunk_rows < 1:
            raise ExportFormatError(f"chunk_rows must be at least 1, got {self.chunk_rows}", hint="Pass a positive number.")
        self.tools = _load_tools(self.tools)

    def create_config_id(self, config_kwargs: dict[str, Any], custom_features: datasets.Features | None = None) -> str:
        # The cache key follows what the tools file holds, not its path.
        kwargs = dict(config_kwargs)
        if "tools" in kwargs:
            kwargs["tools"] = json.dumps(_load_tools(kwargs["tools"]), sort_keys=True)
        return super().create_config_id(kwargs, custom_features)

    def options(self) -> Options:
        return Options(
            system_prompt=str(self.system_prompt or ""),
            tools=self.tools,
            mask_mode=self.mask_mode,
            keep_message_keys=self.keep_message_keys,
        )


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

    def _download_and_prepare(self, *args: Any, **kwargs: Any) -> None:
        # datasets wraps every generation error in DatasetGenerationError("An
        # error occurred while generating the dataset"); ours already say what
        # and where, so they surface as themselves.
        try:
            super()._download_and_prepare(*args, **kwargs)
        except DatasetGenerationError as err:
            if isinstance(err.__cause__, WhileaiError):
                raise err.__cause__ from err.__cause__.__cause__
            raise

    def _info(self) -> datasets.DatasetInfo:
        normalizer = Normalizer(self.config.name, self.config.options())
        return datasets.DatasetInfo(
            description="whileai rollouts in the whileai-datasets canonical schema",
            features=normalizer.features,
        )

    def _split_generators(self, dl_manager: datasets.DownloadManager) -> list[datasets.SplitGenerator]:
        if not self.config.data_files:
            raise ExportFormatError(
                "no data files given",
                hint='Pass data_files="run.jsonl" (or a dict of splits) to load_dataset("whileai/export", ...).',
            )
        for split, files in self.config.data_files.items():
            for file in files:
                _check_extension(str(file), split)
        dl_manager.download_config.extract_on_the_fly = True
        base_files = dl_manager.download(self.config.data_files)
        extracted = dl_manager.extract(base_files)
        return [
            datasets.SplitGenerator(
                name=split,
                gen_kwargs={"files": list(extracted[split]), "originals": list(self.config.data_files[split])},
            )
            for split in extracted
        ]

    def _generate_shards(self, files: list[str], originals: list[str]) -> Iterator[str]:
        yield from originals

    def _generate_tables(self, files: list[str], originals: list[str]) -> Iterator[tuple[Key, pa.Table]]:
        normalizer = Normalizer(self.config.name, self.config.options())
        for shard, (file, original) in enumerate(zip(files, originals)):
            name = os.path.basename(str(original).split("::")[-1])
            with open(file, "rb") as handle:
                if _is_parquet(str(original), handle):
                    rows = iter_parquet_rows(handle, name, self.config.chunk_rows)
                else:
                    rows = iter_jsonl_rows(handle, name)
                tables = iter_tables(
                    rows, normalizer, chunk_rows=self.config.chunk_rows, on_bad_row=self.config.on_bad_row, bad=self.bad_rows
                )
                for index, table in enumerate(tables):
                    yield Key(shard, index), table
        self._report_bad_rows()

    def _report_bad_rows(self) -> None:
        bad = self.bad_rows
        if not bad.count:
            return
        warnings.warn(
            f"skipped {bad.count} bad row(s) (on_bad_row='skip'); first: {bad.first_error}. "
            "whileai_datasets.bad_rows(ds) lists where.",
            BadRowsWarning,
            stacklevel=2,
        )
        output_dir = getattr(self, "_output_dir", None)
        if output_dir and os.path.isdir(output_dir):
            with open(os.path.join(output_dir, BAD_ROWS_FILE), "w", encoding="utf-8") as handle:
                json.dump(bad.to_dict(), handle)


_DATA_SUFFIXES = (".jsonl", ".json", ".ndjson", ".parquet")
_COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".lz4")


def _check_extension(file: str, split: str) -> None:
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
            hint='Pass data_files="run.jsonl" (or a dict of splits) to load_dataset("whileai/export", ...).',
        )


def _is_parquet(name: str, handle: Any) -> bool:
    """Parquet by extension or by its magic bytes (``PAR1``)."""
    if name.endswith(".parquet"):
        return True
    head = handle.read(4)
    handle.seek(0)
    return bool(head == b"PAR1")
