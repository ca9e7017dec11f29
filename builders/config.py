"""The options of the ``whileai/export`` builder (its ``BuilderConfig``), checked before anything is read."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import datasets

from whileai_datasets._options import check_choice, check_count, check_flag
from whileai_datasets._typing import MaskMode, OnBadRow
from whileai_datasets.builders import inputs
from whileai_datasets.reading.reader import DEFAULT_CHUNK_ROWS
from whileai_datasets.rows.canonical import Options
from whileai_datasets.sessions.pi import Branches

#: A plain JSONL file larger than this is read as several shards.
DEFAULT_SHARD_BYTES = 64 << 20


@dataclass
class WhileaiExportConfig(datasets.BuilderConfig):
    """Options of the ``whileai/export`` builder.

    Args:
        system_prompt: Prepended to every conversation as a system message
            (whileai's ``system_prompt=``); empty prepends nothing.
        tools: Tool schemas put on every row, as a list, its JSON text (a
            string starting with ``[``) or a path to a JSON file; when absent, a
            row keeps the ``tools`` it carries (a list, or JSON text of one).
        mask_mode: ``"assistant"`` (every assistant turn carries loss) or
            ``"final"`` (the last one only).
        on_bad_row: ``"raise"`` (the default) stops at the first bad row with
            its file and line (a row with no conversation is one); ``"skip"``
            skips bad rows, warns once with the count and first location, and
            keeps the report (``whileai_datasets.bad_rows(ds)``). Text that is
            not JSON in a ``.json`` array raises either way.
        keep_message_keys: Keep per-message keys whileai drops (``extra``).
        chunk_rows: Rows per Arrow chunk.
        shard_bytes: A local, uncompressed JSONL file larger than this is read
            as byte-range shards of at most this size, which ``num_proc``
            parses in parallel (equal shards, as many as a multiple of
            ``num_proc``, so the jobs get equal work); 0 reads every file as
            one shard. Rows, their order and line numbers do not depend on
            it, so it is left out of the cache key.
        parse_workers: Worker processes that parse a local, uncompressed
            JSONL file (in pieces, tables kept in file order) when
            ``num_proc`` is not given; in a dataset of agent sessions, the
            whole local files, a few at a time, in file order. ``None`` (the
            default): one per core, at most 4, for a file, shard or session
            folder of 16 MiB or more; 1 parses in this process. Left out of
            the cache key, like ``shard_bytes``.
        branches: Which branches of a pi or OpenClaw session tree become rows:
            ``"all"`` (the default; each leaf's path, ``conversation``
            ``"branch:<leaf id>"``) or ``"current"`` (the path to the last
            entry written, where pi resumes). Other agents' sessions are read
            as they are (docs/sessions.md).
        leak_facts: Also take, from each raw row as it is read, what the
            export's privileged-leak gate needs (``privileged`` is never a
            column), and keep it beside the dataset (``default`` config
            only). ``export_dataset`` on a path sets it; it costs about a
            fifth of the parse, so a plain load leaves it off.
    """

    system_prompt: str | None = None
    tools: Any = None
    mask_mode: MaskMode = "assistant"
    on_bad_row: OnBadRow = "raise"
    keep_message_keys: bool = False
    chunk_rows: int = DEFAULT_CHUNK_ROWS
    shard_bytes: int = DEFAULT_SHARD_BYTES
    parse_workers: int | None = None
    leak_facts: bool = False
    branches: Branches = "all"
    features: datasets.Features | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.validate()

    def validate(self) -> None:
        """Check the options; ``datasets`` sets load_dataset's keyword
        arguments on a copy of a preset config after ``__post_init__``, so the
        builder calls this again once they are in."""
        check_choice(self.mask_mode, "mask_mode", MaskMode)
        check_choice(self.on_bad_row, "on_bad_row", OnBadRow)
        check_count(self.chunk_rows, "chunk_rows", minimum=1, optional=False,
                    hint="Pass a positive number of rows per Arrow chunk.")
        check_flag(self.keep_message_keys, "keep_message_keys")
        check_flag(self.leak_facts, "leak_facts")
        check_choice(self.branches, "branches", Branches)
        check_count(self.shard_bytes, "shard_bytes", optional=False,
                    hint="Pass e.g. shard_bytes=64 * 2**20, or 0 to read every file as one shard.")
        check_count(self.parse_workers, "parse_workers", minimum=1,
                    hint="Pass e.g. parse_workers=2, 1 to parse in this process, or None for one per core.")
        self.tools = inputs.load_tools(self.tools)

    def create_config_id(self, config_kwargs: dict[str, Any], custom_features: datasets.Features | None = None) -> str:
        # The cache key follows what the tools file holds, not its path.
        kwargs = dict(config_kwargs)
        # how a file is split into shards changes no row: the cache is shared
        kwargs.pop("shard_bytes", None)
        kwargs.pop("parse_workers", None)
        if "tools" in kwargs:
            kwargs["tools"] = json.dumps(inputs.load_tools(kwargs["tools"]), sort_keys=True)
        return super().create_config_id(kwargs, custom_features)

    def options(self) -> Options:
        return Options(
            system_prompt=str(self.system_prompt or ""),
            tools=self.tools,
            mask_mode=self.mask_mode,
            keep_message_keys=self.keep_message_keys,
        )
