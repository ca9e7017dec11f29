"""Batches in and out of the transforms, and the ``datasets`` features of their columns.

Every transform works on a ``pyarrow.Table``. ``as_table`` turns the dict of
lists ``datasets`` passes under plain formatting into one (encoding decoded
messages back to their storage structs), and ``like`` turns the result back
into the kind of batch that came in, with feature metadata (``datasets``' built-in
types only, so what ``Dataset.map`` writes loads without this package).

``datasets``' default ``map`` (no ``batched=True``) passes one example, a
``LazyRow`` or a plain dict of values: ``as_table`` makes it a one-row table
and ``like`` hands one row back, so a row-preserving transform gives the same
rows either way.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from datasets import Features

from whileai_datasets._typing import Batch
from whileai_datasets.columnar._types import FIREWORKS_INPUT_TYPE, TRL_MESSAGE_TYPE, trl_message_to_storage
from whileai_datasets.errors import SchemaError
from whileai_datasets.rows.features import (
    MESSAGE_TYPE,
    is_storage_form,
    message_from_storage,
    message_to_storage,
    plain_feature,
    storage_type,
)

# ---------------------------------------------------------------- batches


def as_table(batch: Batch) -> pa.Table:
    """``batch`` as a table: a table as is, a dict of lists encoded column by column."""
    if isinstance(batch, pa.Table):
        return batch
    if isinstance(batch, pa.RecordBatch):
        return pa.Table.from_batches([batch])
    if not isinstance(batch, Mapping):
        raise SchemaError(
            f"expected a pyarrow.Table or a dict of lists, got {type(batch).__name__}",
            hint="Call the transform through Dataset.map(..., batched=True).",
        )
    one = is_one_example(batch)
    arrays = {}
    for name in batch.keys():
        arrays[name] = _encode_column(name, [batch[name]] if one else list(batch[name]))
    return pa.table(arrays)


def is_one_example(batch: Any) -> bool:
    """Whether ``batch`` is one example (a ``LazyRow``, or a dict of values
    rather than of lists) instead of a batch of them."""
    if isinstance(batch, (pa.Table, pa.RecordBatch)) or not isinstance(batch, Mapping):
        return False
    kind = type(batch).__name__
    if kind in ("LazyRow", "LazyBatch"):
        return kind == "LazyRow"
    for name in ("messages", "chosen", "loss_mask"):
        if name in batch:
            value = batch[name]
            if not isinstance(value, list):
                return True
            first = next((v for v in value if v is not None), None)
            return not isinstance(first, list)
    return any(not isinstance(v, list) for v in batch.values())


def like(batch: Batch, table: pa.Table, *, reshaped: bool = False) -> Batch:
    """``table`` as the kind of batch ``batch`` was (a table, or a dict of
    decoded Python lists that ``datasets`` encodes again with the features).

    ``reshaped`` (a wire shape: columns dropped or retyped) returns the table to
    ``Dataset.map`` even under plain formatting (a one-row table for one example): ``datasets`` merges a dict
    with the input columns, so a dropped column would stay, and it infers
    types from Python values, so TRL's argument values would lose their
    feature. A table replaces the batch and keeps its features. So it does
    for messages with content parts (decoded, their column mixes text and
    lists, which ``datasets`` cannot infer an Arrow type for)."""
    lazy = type(batch).__name__ in ("LazyBatch", "LazyRow")  # LazyRow: one example (a one-row table)
    if isinstance(batch, (pa.Table, pa.RecordBatch)) or (lazy and (reshaped or _has_parts(table))):
        return with_features(table)
    features = table_features(table)
    if is_one_example(batch):
        return features.decode_example(table.to_pylist()[0])
    return features.decode_batch(table.to_pydict())


def _has_parts(table: pa.Table) -> bool:
    """Whether a message column holds content parts: decoded, such a column
    mixes text and lists, which ``datasets``' writer cannot turn back into Arrow."""
    for fld in table.schema:
        arrow_type = fld.type
        if pa.types.is_list(arrow_type) and pa.types.is_struct(arrow_type.value_type):
            if "parts" in arrow_type.value_type.names:
                parts = pc.struct_field(table.column(fld.name).combine_chunks().flatten(), "parts")
                if parts.null_count < len(parts):
                    return True
    return False


_MESSAGE_COLUMNS = (
    "messages",
    "chosen",
    "rejected",
    "prompt",
    "completion",
    "preferred_output",
    "non_preferred_output",
)


def _encode_column(name: str, values: list[Any]) -> pa.Array:
    """One column of a dict batch as Arrow, typed by what it holds and its name."""
    sample = next((v for v in values if v is not None), None)
    if _is_message_column(name, values):
        return message_array(values)
    if name == "input" and isinstance(sample, dict) and "messages" in sample:
        rows = [None if row is None else _fireworks_input(row) for row in values]
        return typed_array(rows, FIREWORKS_INPUT_TYPE)
    typed = _known_types().get(name)
    if name == "prompt" and sample is not None and not isinstance(sample, str):
        typed = pa.json_()  # a preference pair's prompt: any JSON
    if typed is not None and (sample is None or _fits(sample, typed)):
        if isinstance(typed, pa.JsonType):
            return pa.array([None if v is None else json.dumps(v) for v in values], pa.string()).cast(typed)
        return pa.array(values, typed)
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise SchemaError(
            f"cannot convert column {name!r} to Arrow ({err})",
            location=f"column {name!r}",
            hint='Use ds.with_format("arrow") so the transform gets the Arrow table as stored.',
        ) from err


def _is_message_column(name: str, values: list[Any]) -> bool:
    lists = [v for v in values if v is not None]
    if not lists or not all(isinstance(v, list) for v in lists):
        return False
    first = next((m for row in lists for m in row if m is not None), None)
    if first is None:
        return name in _MESSAGE_COLUMNS
    return isinstance(first, dict) and "role" in first


def message_array(values: list[Any]) -> pa.Array:
    values = [None if row is None else [message_from_storage(m) if is_storage_form(m) else m for m in row]
              for row in values]  # decoded plain structs: back to the messages they stand for
    trl = any(_has_structured_arguments(m) for row in values if row for m in row)
    convert = trl_message_to_storage if trl else message_to_storage
    rows = [None if row is None else [convert(m) for m in row] for row in values]
    return typed_array(rows, pa.list_(TRL_MESSAGE_TYPE if trl else MESSAGE_TYPE))


def is_json_list(arrow_type: pa.DataType) -> bool:
    """A ``List(Json())`` column: how the wire shapes hand messages to a user (one object per message)."""
    return pa.types.is_list(arrow_type) and isinstance(arrow_type.value_type, pa.JsonType)


def json_message_structs(lists: pa.Array) -> pa.Array:
    """A ``List(Json())`` message column as message struct storage (TRL's when arguments are values)."""
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    texts = lists.cast(pa.list_(pa.string())).to_pylist()
    return message_array([None if row is None else [json.loads(m) for m in row] for row in texts])


def _fireworks_input(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "messages": [message_to_storage(m) for m in row.get("messages") or []],
        "tools": json.dumps(row.get("tools"), ensure_ascii=False),
    }


def _fits(sample: Any, arrow_type: pa.DataType) -> bool:
    """Whether a Python value belongs in a column of ``arrow_type`` (a string
    ``prompt`` is the ask; a list ``prompt`` is a message list or JSON)."""
    if pa.types.is_string(arrow_type):
        return isinstance(sample, str)
    if pa.types.is_list(arrow_type) or pa.types.is_struct(arrow_type):
        return isinstance(sample, (list, dict))
    return not isinstance(sample, (list, dict, str)) or isinstance(arrow_type, pa.JsonType)


@functools.lru_cache(maxsize=1)
def _known_types() -> dict[str, pa.DataType]:
    """Arrow types of the columns this package knows by name."""
    from whileai_datasets.rows import schema

    known: dict[str, pa.DataType] = {}
    for features in (schema.PREFERENCE_FEATURES, schema.EXPORT_FEATURES):
        for name, field_type in zip(features.arrow_schema.names, features.arrow_schema.types):
            if not (pa.types.is_list(field_type) and pa.types.is_struct(field_type.value_type)):
                known[name] = field_type
    known["prompt"] = pa.string()
    known.update(TYPED_COLUMNS)
    return known


def _has_structured_arguments(message: Any) -> bool:
    if not isinstance(message, dict):
        return False
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and not isinstance(function.get("arguments"), str):
            return True
    return False


def typed_array(values: list[Any], arrow_type: pa.DataType) -> pa.Array:
    plain = storage_type(arrow_type)
    array = pa.array(values, type=plain)
    return array if plain == arrow_type else array.cast(arrow_type)


# ---------------------------------------------------------------- features

#: Columns this package adds, and whileai's typed scalars, by name.
#: GRPO group fields ``stamp_groups`` writes.
GROUP_TYPES: dict[str, pa.DataType] = {
    "group_id": pa.string(),
    "k": pa.int64(),
    "n0": pa.int64(),
    "n1": pa.int64(),
    "reward_mean": pa.float64(),
    "reward_std": pa.float64(),
}

TYPED_COLUMNS: dict[str, pa.DataType] = {
    "loss_mask": pa.list_(pa.int8()),
    "tool_output_truncated": pa.int64(),
    "tool_output_chars_cut": pa.int64(),
    "unroll": pa.struct([("turn", pa.int64()), ("turns", pa.int64())]),
    **GROUP_TYPES,
    "schema_version": pa.string(),
    "prompt_text": pa.string(),
    "reward": pa.float64(),
    "rollout_index": pa.int64(),
    "token_logprobs": pa.list_(pa.float64()),
}


def feature_for(arrow_type: pa.DataType) -> Any:
    """The ``datasets`` feature of a column of ``arrow_type``: built-in types only (message structs
    included), so a dataset a transform wrote loads where this package is not installed."""
    return plain_feature(arrow_type)


def table_features(table: pa.Table) -> Features:
    return Features({f.name: feature_for(f.type) for f in table.schema})


def with_features(table: pa.Table) -> pa.Table:
    """``table`` with ``datasets``' feature metadata (built-in types), so a map keeps
    the columns' types (Json values) as written."""
    metadata = _features_metadata(table.schema.remove_metadata())
    return table if metadata is None else table.replace_schema_metadata(metadata)


@functools.lru_cache(maxsize=64)
def _features_metadata(schema: pa.Schema) -> dict[bytes, bytes] | None:
    try:
        features = Features({f.name: feature_for(f.type) for f in schema})
    except (ValueError, TypeError):  # a type datasets has no feature for (a dictionary of Json)
        return None
    arrow = features.arrow_schema
    return None if arrow.types != schema.types else arrow.metadata
