"""Rows of any whileai shape into canonical Arrow tables, a chunk at a time.

``Normalizer`` turns one parsed row into a canonical record (per config) and
``to_table`` turns a chunk of records into a ``pyarrow.Table`` in the
config's schema: columns are built as Python lists and converted by Arrow in
one call each, then cast (zero-copy) to the Json extension types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from datasets import Features

from whileai_datasets.rows import content as content_parts
from whileai_datasets.rows import normalize, schema
from whileai_datasets.rows.features import storage_type
from whileai_datasets.rows.normalize import RowContext

_CARRY = frozenset(schema.CARRY_KEYS)
_SOURCE = frozenset(schema.SOURCE_KEYS)
_PAIR = frozenset(schema.PAIR_KEYS)
_RAW = frozenset(schema.RAW_SCALAR_FEATURES)
#: column kind -> Python types stored as they are
_FAST_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "float64": (float, int),
    "int64": (int,),
    "bool": (bool,),
}


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
    """Canonical records for one config: ``default``, ``preference`` or ``raw``."""

    def __init__(self, config_name: str, options: Options) -> None:
        self.config_name = config_name
        self.options = options
        self.features = {
            "default": schema.EXPORT_FEATURES,
            "preference": schema.PREFERENCE_FEATURES,
            "raw": schema.RAW_FEATURES,
        }[config_name]
        self.kinds = normalize.column_kinds(self.features)
        self._fast_types = {key: _FAST_TYPES[kind] for key, kind in self.kinds.items() if kind in _FAST_TYPES}
        self.record = {"default": self._training, "preference": self._preference, "raw": self._raw}[config_name]

    # ------------------------------------------------------------ default

    def _training(self, row: Any, ctx: RowContext) -> dict[str, Any]:
        row = self._object(row, ctx)
        row = normalize.join_trl(normalize.bridge_tool_trace(normalize.expand_flat(row, ctx)))
        source = row.get("messages")
        if source and not isinstance(source, list):
            raise ctx.error("messages", f"expected a list of messages, got {type(source).__name__}", "Fix the row.")
        turns = source or normalize.conversation(row)
        if row.get("images") is not None:  # TRL's vision rows: placeholders + references
            turns = content_parts.fill_images(turns, row["images"], ctx.error)
        messages = normalize.convert_messages(
            turns, system=self.options.system_prompt, ctx=ctx, keep_keys=self.options.keep_message_keys
        )
        record: dict[str, Any] = {
            "messages": messages,
            "loss_mask": normalize.loss_mask(messages, self.options.mask_mode),
            "tools": self._tools(row, ctx),
        }
        self._scalars(row, ctx, record, _CARRY)
        self._scalars(row, ctx, record, _SOURCE)
        return record

    def _tools(self, row: dict[str, Any], ctx: RowContext) -> str | None:
        if self.options.tools_json is not None:
            return self.options.tools_json
        own = row.get("tools")
        if own is None or own == []:
            return None
        if not isinstance(own, list):
            raise ctx.error("tools", f"expected a list of tool schemas, got {type(own).__name__}", "Fix the row.")
        return normalize.JSON_ENCODER.encode(own)

    # ------------------------------------------------------------ preference

    def _preference(self, pair: Any, ctx: RowContext) -> dict[str, Any]:
        pair = normalize.join_preference(self._object(pair, ctx))
        record: dict[str, Any] = {"prompt": normalize.typed_value(pair.get("prompt"), "json", ctx, "prompt")}
        for side in ("chosen", "rejected"):
            record[side] = self._side(pair.get(side), ctx, side)
        tools = self.options.tools_json
        if tools is None and isinstance(pair.get("tools"), list) and pair["tools"]:
            tools = normalize.JSON_ENCODER.encode(pair["tools"])
        record["tools"] = tools
        self._scalars(pair, ctx, record, _PAIR)
        return record

    def _side(self, side: Any, ctx: RowContext, name: str) -> list[dict[str, Any]]:
        if isinstance(side, dict):
            row = normalize.join_trl(normalize.bridge_tool_trace(normalize.expand_flat(side, ctx)))
            turns = row.get("messages") or normalize.conversation(row)
        elif isinstance(side, list):
            turns = side
        else:
            raise ctx.error(
                name,
                f"expected a rollout object or a message list, got {normalize._type_name(side)}",
                "Preference rows need both a chosen and a rejected side.",
            )
        return normalize.convert_messages(
            turns, system=self.options.system_prompt, ctx=ctx, column=name, keep_keys=self.options.keep_message_keys
        )

    # ------------------------------------------------------------ raw

    def _raw(self, row: Any, ctx: RowContext) -> dict[str, Any]:
        row = self._object(row, ctx)
        record: dict[str, Any] = {}
        self._scalars(row, ctx, record, _RAW)
        rest = {k: v for k, v in row.items() if k not in schema.RAW_SCALAR_FEATURES}
        record["extra"] = normalize.JSON_ENCODER.encode(rest) if rest else None
        record["source_file"] = ctx.source
        record["source_line"] = ctx.line if ctx.line is not None else ctx.row
        return record

    # ------------------------------------------------------------ shared

    @staticmethod
    def _object(row: Any, ctx: RowContext) -> dict[str, Any]:
        if not isinstance(row, dict):
            raise ctx.error("", f"expected a JSON object, got {normalize._type_name(row)}", "Each line must be one object.")
        return row

    def _scalars(self, row: dict[str, Any], ctx: RowContext, record: dict[str, Any], keys: frozenset[str]) -> None:
        # Only the keys the row has: a record leaves absent (null) columns out.
        # Plain scalars of the right type pass straight through; everything
        # else (Json, lists, a wrong type to report) goes through typed_value.
        kinds, fast = self.kinds, self._fast_types
        for key in keys.intersection(row):
            value = row[key]
            if value is None:
                continue
            if type(value) in fast.get(key, ()):
                record[key] = value
            else:
                record[key] = normalize.typed_value(value, kinds[key], ctx, key)

    def to_table(self, records: list[dict[str, Any]]) -> pa.Table:
        return records_to_table(records, self.features)


def records_to_table(records: list[dict[str, Any]], features: Features) -> pa.Table:
    """A table in ``features``' schema from canonical records (a column a
    record leaves out is null on that row)."""
    target = features.arrow_schema
    columns: dict[str, list[Any]] = {name: [None] * len(records) for name in target.names}
    for i, record in enumerate(records):
        for key, value in record.items():
            columns[key][i] = value
    arrays = []
    for fld in target:
        values = columns[fld.name]
        plain = storage_type(fld.type)
        array = pa.array(values, type=plain)
        arrays.append(array if plain == fld.type else array.cast(fld.type))
    return pa.Table.from_arrays(arrays, schema=target)
