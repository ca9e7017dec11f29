"""Rows as anyone can read them: only ``datasets``' built-in feature types, one ``Json`` per message.

A file or Hub repo whose features name a feature type a package registers
loads only where that package is imported first (``Feature type 'WhileaiMessage'
not found`` everywhere else: other machines, the Hub viewer, ``trl sft``), so
nothing this package writes or hands a user names one. The canonical rows keep
messages as typed structs with built-in features (``rows.features.message_feature``);
what this package writes for trainers, and what the wire transforms hand
``Dataset.map``, stores each message as one ``Json`` value instead, as
``datasets``' own json loader types agent traces (``messages: List(Json())``): a
message keeps exactly the keys it had (no ``tool_calls: None`` invented on a
user turn), and a TRL message keeps its tool-call arguments as values. The JSON
text of each message is built column-wise (``_json.message_objects``), the same
text the JSONL writer writes.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from datasets import Features

from whileai_datasets.columnar import _arrow, _json


def is_message_list(arrow_type: pa.DataType) -> bool:
    """A list of message structs (typed ``Message`` / ``TrlMessage`` storage or a plain struct)."""
    return _json._is_message_list(arrow_type)


def portable_messages(lists: pa.Array) -> pa.Array:
    """Message lists as ``List(Json())``: one JSON object per message, with the keys it decodes to."""
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    messages = _arrow.flat(lists)
    if _arrow.MEMO_FIELD in messages.type.names:
        objects = _arrow.decoded(pc.struct_field(messages, _arrow.MEMO_FIELD))
    else:
        objects = _json.message_objects(messages)
    return _arrow.relist(lists, objects.cast(pa.json_()))


def portable_column(array: pa.Array) -> pa.Array:
    """One column with every message list (also inside a struct, as Fireworks' ``input``) made portable."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_dictionary(array.type):
        array = _arrow.decoded(array)
    if is_message_list(array.type):
        return portable_messages(array)
    if pa.types.is_struct(array.type) and any(is_message_list(f.type) for f in array.type):
        children = [portable_column(array.field(i)) for i in range(array.type.num_fields)]
        names = [f.name for f in array.type]
        return pa.StructArray.from_arrays(children, names=names, mask=array.is_null() if array.null_count else None)
    return array


def portable_table(table: pa.Table) -> pa.Table:
    """``table`` with built-in feature types only, and ``datasets``' feature metadata for them.

    Hidden columns (names starting with "__", the JSONL writer's memo) are dropped."""
    names = [n for n in table.column_names if not n.startswith("__")]
    columns = [portable_column(_arrow.column(table, name)) for name in names]
    out = pa.Table.from_arrays(columns, names=names)
    features = portable_features(out.schema)
    return out.cast(features.arrow_schema)


def portable_features(schema: pa.Schema) -> Features:
    """The built-in ``datasets`` features of a portable schema (a Json extension column is ``Json()``)."""
    return Features.from_arrow_schema(schema.remove_metadata())


def registered_feature_types(features: Any) -> dict[str, str]:
    """Feature types not built into ``datasets`` (name -> defining package); empty for portable features."""
    found: dict[str, str] = {}

    def walk(feature: object) -> None:
        if isinstance(feature, dict):
            for child in feature.values():
                walk(child)
        elif isinstance(feature, (list, tuple)):
            for child in feature:
                walk(child)
        elif hasattr(feature, "feature"):  # List, LargeList
            walk(feature.feature)
        elif not type(feature).__module__.startswith("datasets."):
            name = str(getattr(feature, "_type", type(feature).__name__))
            found[name] = type(feature).__module__.split(".")[0]

    walk(features)
    return found


__all__ = ["is_message_list", "portable_column", "portable_features", "portable_messages", "portable_table",
           "registered_feature_types"]
