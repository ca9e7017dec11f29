"""Rows of any whileai shape into canonical Arrow tables, a chunk at a time.

``Normalizer`` holds one config's schema and options; ``Normalizer.chunk()``
is an accumulator for that config: ``add(row, ctx)`` normalizes one parsed row
straight into typed column builders (``rows.columns``), all or nothing, and
``table()`` builds the chunk's ``pyarrow.Table`` in the config's schema, each
column in one Arrow call, then cast (zero-copy) to the Json extension types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from whileai_datasets.errors import WhileaiError
from whileai_datasets.rows import content as content_parts
from whileai_datasets.rows import conversations, normalize, pairs, schema, training_flags, unread_keys
from whileai_datasets.rows.columns import MAX_KEY_ORDERS, MessageColumns, ScalarColumns
from whileai_datasets.rows.features import storage_type
from whileai_datasets.rows.leaks import LeakScan
from whileai_datasets.rows.normalize import RowContext

#: column kind -> Python types stored as they are
_FAST_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "float64": (float, int),
    "int64": (int,),
    "bool": (bool,),
}
_TRAINING_KEYS = frozenset(schema.CARRY_KEYS) | frozenset(schema.SOURCE_KEYS)
_SESSION_KEYS = frozenset(schema.SESSION_KEYS)
_PREFERENCE_KEYS = frozenset(schema.PAIR_KEYS) | {"prompt"}
_RAW_KEYS = frozenset(schema.RAW_SCALAR_FEATURES)
#: row keys that make a ``messages`` row whileai's own (its carried and source keys, and the keys of the shapes
#: only whileai writes): its tool-call arguments are encoded as whileai encodes them; any other row's arguments
#: given as JSON text keep their bytes (another tool wrote them so, and its model was trained on them so)
WHILEAI_MARKERS = (_TRAINING_KEYS - {"prompt"}) | frozenset((
    "steps", "final_text", "opener", "tool_trace", "messages_json", "steps_json", "metadata_json", "conversation_id",
    "schema_version", "prompt_text", "lineage"))


@dataclass(frozen=True)
class Options:
    """What the builder was told (``WhileaiExportConfig`` fields)."""

    system_prompt: str = ""
    tools: tuple[Any, ...] | None = None
    mask_mode: str = "assistant"
    keep_message_keys: bool = False
    tools_json: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        text = normalize.JSON_ENCODER.encode(list(self.tools)) if self.tools else None
        object.__setattr__(self, "tools_json", text)


class Normalizer:
    """Canonical rows for one config: ``default``, ``preference`` or ``raw``."""

    def __init__(self, config_name: str, options: Options, *, sessions: bool = False) -> None:
        self.config_name = config_name
        self.options = options
        #: training rows with the columns of agent sessions (``schema.SESSION_FEATURES``)
        self.sessions = sessions and config_name == "default"
        self.features = {
            "default": schema.SESSION_EXPORT_FEATURES if self.sessions else schema.EXPORT_FEATURES,
            "preference": schema.PREFERENCE_FEATURES,
            "raw": schema.RAW_FEATURES,
        }[config_name]
        #: the table schema, and each column's storage type (``Features.arrow_schema`` builds a new one per call)
        self.arrow_schema = self.features.arrow_schema
        self.storage_types = [storage_type(fld.type) for fld in self.arrow_schema]
        self.kinds = normalize.column_kinds(self.features)
        self.fast_types = {key: _FAST_TYPES[kind] for key, kind in self.kinds.items() if kind in _FAST_TYPES}
        self._chunk_class = {"default": TrainingChunk, "preference": PreferenceChunk, "raw": RawChunk}[config_name]
        #: the keys the rows read so far had and no shape read (``rows.unread_keys``); the reader's
        #: caller takes it and says so once
        self.unread = unread_keys.Unread()
        #: a row's key order -> its keys that look meant to be read (``unread_keys.row_suspects``), and
        #: whether a row with those keys is whileai's own (``whileai_keys``)
        self._suspects: dict[tuple[str, ...], tuple[tuple[str, ...], bool]] = {}
        self._read_keys = frozenset(unread_keys.ROW_KEYS) | frozenset(self.kinds)

    def suspects(self, row: dict[str, Any]) -> tuple[tuple[str, ...], bool]:
        """``unread_keys.row_suspects`` of ``row``'s keys, and whether it carries a key only whileai writes
        (``WHILEAI_MARKERS``), once per key order."""
        keys = tuple(row)
        found = self._suspects.get(keys)
        if found is None:
            if len(self._suspects) >= MAX_KEY_ORDERS:
                self._suspects.clear()
            suspects = unread_keys.row_suspects(keys, self._read_keys)
            if self.sessions:  # a session row's own columns (``conversation`` is no misspelt ``conversations``)
                suspects = tuple(key for key in suspects if key not in _SESSION_KEYS)
            found = self._suspects[keys] = (suspects, not WHILEAI_MARKERS.isdisjoint(keys))
        return found

    def empty_table(self) -> pa.Table:
        """No rows, in the config's schema (pyarrow 21's ``Schema.empty_table`` refuses extension types)."""
        arrays = [pa.array([], plain).cast(fld.type) for fld, plain in zip(self.arrow_schema, self.storage_types)]
        return pa.Table.from_arrays(arrays, schema=self.arrow_schema)

    def chunk(self, leaks: LeakScan | None = None) -> Chunk:
        """An empty chunk. With ``leaks`` (training rows only), every row added
        is also counted and checked for privileged leaks there."""
        return self._chunk_class(self, leaks)

    def table(self, rows: list[tuple[RowContext, Any]]) -> pa.Table:
        """The canonical table of ``(context, parsed row)`` pairs (raises at the first bad row)."""
        chunk = self.chunk()
        for ctx, row in rows:
            chunk.add(row, ctx)
        return chunk.table()


class Chunk:
    """Canonical rows of one config being filled (see the module docstring)."""

    def __init__(self, normalizer: Normalizer, leaks: LeakScan | None = None) -> None:
        self.normalizer = normalizer
        self.options = normalizer.options
        self.leaks = leaks
        self.scalars = ScalarColumns(normalizer.kinds, normalizer.fast_types, self._keys())
        self.lists: dict[str, MessageColumns] = {}

    def _keys(self) -> frozenset[str]:
        raise NotImplementedError

    @property
    def num_rows(self) -> int:
        return self.scalars.n

    def add(self, row: Any, ctx: RowContext) -> None:
        """Normalize one parsed row into the chunk; on a ``WhileaiError`` (or a
        ``RecursionError``) the chunk is left as it was and the error raised."""
        try:
            raw = self._add(_object(row, ctx), ctx)
        except (WhileaiError, RecursionError):  # RecursionError: a value nested too deep, named by the reader
            for columns in self.lists.values():
                columns.rollback(self.scalars.n)
                columns.unread.clear()
            self.scalars.truncate()
            self._undo()
            raise
        self.scalars.end_row()
        for columns in self.lists.values():
            if columns.unread:
                for key, path in columns.unread:
                    self.normalizer.unread.add("message", key, ctx, path)
                columns.unread.clear()
        if self.leaks is not None:
            self.leaks.n_rows += 1
            self.leaks.check(*raw)

    def _add(self, row: dict[str, Any], ctx: RowContext) -> tuple[dict[str, Any], Any, Any]:
        """Add ``row``; returns what the leak check takes: the raw row, and the
        conversation's turns and assistant texts when they are this row's own
        (``LeakScan.check``)."""
        raise NotImplementedError

    def _undo(self) -> None:
        """Drop what a failed row added outside ``lists`` and ``scalars``."""

    def _columns(self) -> dict[str, pa.Array]:
        """The columns in storage types, by name (absent ones are all null)."""
        raise NotImplementedError

    def table(self) -> pa.Table:
        target, plains = self.normalizer.arrow_schema, self.normalizer.storage_types
        built = self._columns()
        arrays = []
        for fld, plain in zip(target, plains):
            array = built.get(fld.name)
            if array is None and self.scalars.has(fld.name):
                array = self.scalars.array(fld.name, plain)
            elif array is None:
                array = pa.nulls(self.num_rows, plain)
            arrays.append(array if plain == fld.type else array.cast(fld.type))
        return pa.Table.from_arrays(arrays, schema=target)

    def _tools_of(self, row: dict[str, Any], ctx: RowContext) -> str | None:
        own = conversations.tools_of(row.get("tools"), ctx)
        return normalize.JSON_ENCODER.encode(own) if own is not None else None

    def _tools_column(self, values: list[str | None]) -> pa.Array:
        constant = self.options.tools_json
        if constant is None:
            return pa.array(values, pa.string())
        return _repeat(constant, self.num_rows)


class TrainingChunk(Chunk):
    """Config ``default``: what whileai's ``training_rows`` builds before
    think-stripping, unrolling and truncation."""

    def __init__(self, normalizer: Normalizer, leaks: LeakScan | None = None) -> None:
        super().__init__(normalizer, leaks)
        self.lists["messages"] = MessageColumns(self.options.keep_message_keys)
        self.tools: list[str | None] = []

    def _keys(self) -> frozenset[str]:
        return _TRAINING_KEYS | _SESSION_KEYS if self.normalizer.sessions else _TRAINING_KEYS

    def _add(self, row: dict[str, Any], ctx: RowContext) -> tuple[dict[str, Any], Any, Any]:
        if _reshaped(row):
            shaped = normalize.join_trl(normalize.bridge_tool_trace(normalize.expand_flat(row, ctx)))
        else:
            shaped = row
        source = shaped.get("messages")
        if source and not isinstance(source, list):
            raise ctx.error("messages", f"expected a list of messages, got {type(source).__name__}", "Fix the row.")
        if source and type(source[0]) is dict and "role" not in source[0]:  # ShareGPT turns under messages
            source = conversations.as_messages(source, ctx, "messages")
        column, system, own = "messages", self.options.system_prompt, ""
        if not source and ("conversations" in shaped or "conversation" in shaped):
            source = conversations.from_conversations(shaped, ctx)
            column = conversations.conversation_key(shaped) or ""
            own = conversations.row_system(shaped, source or [], ctx)
            if not system:  # the row's system leads as the option's would (error paths keep the turns' indices)
                system, own = own, ""
        if not source and ("response" in shaped or "completion" in shaped):
            shaped = conversations.prompt_reply(shaped)
        if not source and shaped.get("steps") and type(shaped["steps"]) is not list:
            raise ctx.error("steps", f"expected a list of steps, got {normalize.type_name(shaped['steps'])}",
                            "Fix the row (a rollout's steps are a list of objects).")
        built = None if source else normalize.conversation(shaped)
        turns = source or built
        if not turns:
            raise conversations.no_conversation_error(shaped, ctx)
        if content_parts.has_media(shaped):  # TRL's and LLaMA-Factory's multimodal rows: placeholders + references
            turns = content_parts.fill_media(turns, shaped, ctx.error)
        flags = self._row_flags(shaped, source, ctx, column)
        if shaped.get(conversations.SYSTEM_PROMPT_KEY) is not None:  # a Hermes agent export's own system prompt
            own = conversations.row_system_prompt(shaped, turns, own, ctx)
            if not system:
                system, own = own, ""
        if own:  # the option's system prompt, then the row's own
            turns = [{"role": "system", "content": own}, *turns]
            flags = [None, *flags] if flags is not None else None
        suspects, whileai = self.normalizer.suspects(shaped)
        self.lists["messages"].add(turns, system=system, ctx=ctx, column=column, row_flags=flags,
                                   argument_text=not (whileai or built is not None))
        if self.options.tools_json is None:
            self.tools.append(self._tools_of(shaped, ctx))
        self.scalars.add(shaped, ctx)
        for key in suspects:
            self.normalizer.unread.add("row", key, ctx, key)
        # the leak check reads the raw row; the turns rebuilt from it, and the
        # assistant texts just added, are reused when nothing reshaped it
        if shaped is not row:
            return row, None, None
        return row, built if column == "messages" else source, self.lists["messages"].said

    @staticmethod
    def _row_flags(row: dict[str, Any], source: Any, ctx: RowContext, column: str) -> list[int | None] | None:
        """The row's own ``loss_mask``, one flag per message of its list (``rows.training_flags``)."""
        if row.get(training_flags.ROW_MASK) is None:
            return None
        if not source:
            raise ctx.error(
                training_flags.ROW_MASK, "expected a loss_mask only beside a message list, got one on a row whose "
                "conversation is rebuilt from its rollout (prompt, steps, final_text)",
                "Drop the loss_mask (the mask mode decides), or write the row's messages out.")
        return training_flags.row_flags(row, len(source), ctx, column)

    def _undo(self) -> None:
        del self.tools[self.num_rows :]

    def _columns(self) -> dict[str, pa.Array]:
        columns = self.lists["messages"]
        messages = columns.array()
        return {
            schema.MESSAGES: messages,
            schema.LOSS_MASK: columns.loss_mask(messages, self.options.mask_mode),
            schema.TOOLS: self._tools_column(self.tools),
        }


class PreferenceChunk(Chunk):
    """Config ``preference``: chosen/rejected pairs as whole conversations."""

    def __init__(self, normalizer: Normalizer, leaks: LeakScan | None = None) -> None:
        super().__init__(normalizer, leaks)
        for side in ("chosen", "rejected"):
            self.lists[side] = MessageColumns(self.options.keep_message_keys)
        self.tools: list[str | None] = []

    def _keys(self) -> frozenset[str]:
        return _PREFERENCE_KEYS

    def _add(self, row: dict[str, Any], ctx: RowContext) -> tuple[dict[str, Any], Any, Any]:
        pair = pairs.read_pair(row, ctx)
        for side in ("chosen", "rejected"):
            turns = self._side(pair.get(side), ctx, side)
            if content_parts.has_media(pair):  # each side holds the prompt's placeholders: each takes the media
                turns = content_parts.fill_media(turns, pair, ctx.error)
            self.lists[side].add(turns, system=self.options.system_prompt, ctx=ctx, column=side)
        if self.options.tools_json is None:
            self.tools.append(self._tools_of(pair, ctx))
        self.scalars.add(pair, ctx)
        return row, None, None

    def _undo(self) -> None:
        del self.tools[self.num_rows :]

    @staticmethod
    def _side(side: Any, ctx: RowContext, name: str) -> Any:
        if isinstance(side, dict):
            row = normalize.join_trl(normalize.bridge_tool_trace(normalize.expand_flat(side, ctx)))
            return row.get("messages") or normalize.conversation(row)
        if isinstance(side, list):
            return side
        raise ctx.error(
            name,
            f"expected a rollout object or a message list, got {normalize.type_name(side)}",
            "Preference rows need both a chosen and a rejected side.",
        )

    def _columns(self) -> dict[str, pa.Array]:
        columns = {side: self.lists[side].array() for side in ("chosen", "rejected")}
        columns[schema.TOOLS] = self._tools_column(self.tools)
        return columns


class RawChunk(Chunk):
    """Config ``raw``: the typed scalars, every other key in ``extra``, and provenance."""

    def _keys(self) -> frozenset[str]:
        return _RAW_KEYS

    def _add(self, row: dict[str, Any], ctx: RowContext) -> tuple[dict[str, Any], Any, Any]:
        self.scalars.add(row, ctx)
        rest = {k: v for k, v in row.items() if k not in _RAW_KEYS}
        self.scalars.set("extra", normalize.JSON_ENCODER.encode(rest) if rest else None)
        self.scalars.set("source_file", ctx.source)
        self.scalars.set("source_line", ctx.line if ctx.line is not None else ctx.row)
        return row, None, None

    def _columns(self) -> dict[str, pa.Array]:
        return {}


def _reshaped(row: dict[str, Any]) -> bool:
    """Whether ``expand_flat``, ``bridge_tool_trace`` or ``join_trl`` may change
    ``row``: each returns it as it is unless it has one of these keys."""
    return (
        "tool_trace" in row or "completion" in row or "prompt_text" in row
        or "steps_json" in row or "messages_json" in row or "metadata_json" in row
    )


def _object(row: Any, ctx: RowContext) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise ctx.error("", f"expected a JSON object, got {normalize.type_name(row)}", "Each row (a line, or an element of a JSON array) must be one object.")
    return row


def _repeat(text: str, n: int) -> pa.Array:
    """``n`` copies of one string, built by Arrow (no list of n references)."""
    return pa.DictionaryArray.from_arrays(np.zeros(n, np.int32), pa.array([text], pa.string())).cast(pa.string())
