"""The JSON text of rows on Arrow columns, without a Python loop over them.

``encode_rows`` builds the JSON text of every row of a wire table with string
kernels: escaping, joining fragments, skipping absent keys (``_arguments``
checks tool-call arguments).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets.columnar import _arrow, _lines, _parts
from whileai_datasets.columnar._text import NULL as _NULL
from whileai_datasets.columnar._text import concat as _concat
from whileai_datasets.columnar._text import escape as escape
from whileai_datasets.columnar._text import join as _join
from whileai_datasets.columnar._text import or_null as _or_null
from whileai_datasets.columnar._text import plain as _plain
from whileai_datasets.columnar._text import quote as quote

# ---------------------------------------------------------------- JSON text
#
# Every Arrow string op copies its output, and a JSONL file of unrolled rows is
# hundreds of MB, so the text is assembled with as few passes as possible: a
# value is escaped once, a message object is one join, a row is one join that
# already ends in "\n", and the file is written straight from its buffer.

def encode(array: Any) -> pa.Array:
    """The JSON text of every value of ``array`` (null where the value is null)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    arrow_type = array.type
    if isinstance(arrow_type, pa.JsonType):
        return array.storage
    if pa.types.is_dictionary(arrow_type):
        return encode(array.dictionary).take(array.indices)
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return quote(array)
    if pa.types.is_boolean(arrow_type):
        return pc.if_else(array, "true", "false")
    if pa.types.is_integer(arrow_type):
        return pc.cast(array, pa.string())
    if pa.types.is_floating(arrow_type):
        return _floats(array)
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        if pa.types.is_struct(arrow_type.value_type) and "role" in arrow_type.value_type.names:
            return _join("[", message_items(array), "]")
        inner = _or_null(encode(_arrow.flat(array)))
        return _join("[", pc.binary_join(_arrow.relist(array, inner), ", "), "]")
    if pa.types.is_struct(arrow_type):
        parts: list[Any] = ["{"]
        for i, fld in enumerate(arrow_type):
            parts += [
                ("" if i == 0 else ", ") + json.dumps(fld.name) + ": ",
                _or_null(encode(pc.struct_field(array, fld.name))),
            ]
        text = _join(*parts, "}")
        return _arrow.if_else(array.is_null(), _NULL, text) if array.null_count else text
    if pa.types.is_null(arrow_type):
        return pa.nulls(len(array), pa.string())
    raise TypeError(f"no JSON encoding for Arrow type {arrow_type}")


def _floats(array: pa.Array) -> pa.Array:
    """JSON numbers of a float column that read back as floats: Arrow writes an
    integral value as ``1``, which a reader types as an integer where whileai
    (``json.dumps``) wrote ``1.0``, so such texts get their ``.0``. Other values
    may differ from Python's digits in form (``1e-7`` for ``1e-07``), never in value."""
    text = pc.cast(array, pa.string())
    integral = pc.fill_null(pc.match_substring_regex(text, r"^-?[0-9]+$"), False)
    if pc.any(integral).as_py():
        text = pc.if_else(integral, pc.binary_join_element_wise(text, ".0", ""), text)
    if pc.any(pc.invert(pc.fill_null(pc.is_finite(array), True))).as_py():
        text = pc.if_else(pc.is_nan(array), "NaN", text)
        text = pc.if_else(pc.and_(pc.is_inf(array), pc.greater(array, 0)), "Infinity", text)
        text = pc.if_else(pc.and_(pc.is_inf(array), pc.less(array, 0)), "-Infinity", text)
    return text


def message_items(lists: pa.Array) -> pa.Array:
    """Per row, its message objects joined with ", " (the inside of the JSON
    array; null for a null list). A message struct may carry its own JSON in a
    ``__json`` field (computed before ``unroll`` repeated it), used as is."""
    messages = _arrow.flat(lists)
    if _arrow.MEMO_FIELD in messages.type.names:
        objects = _arrow.decoded(pc.struct_field(messages, _arrow.MEMO_FIELD))
    else:
        objects = message_objects(messages)
    return pc.binary_join(_arrow.relist(lists, objects), ", ")


def message_run(lists: pa.Array) -> _lines.Run:
    """``message_items`` of non-null message lists as a ``_lines.Run``: the
    memoized texts referenced by index, not copied per row."""
    messages = _arrow.flat(lists)
    offsets = np.asarray(lists.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    offsets = offsets - offsets[0]
    if _arrow.MEMO_FIELD not in messages.type.names:
        return _lines.Run(offsets, message_objects(messages))
    memo = pc.struct_field(messages, _arrow.MEMO_FIELD)
    if pa.types.is_dictionary(memo.type) and not memo.indices.null_count:
        index = np.asarray(memo.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        return _lines.Run(offsets, memo.dictionary, index)
    return _lines.Run(offsets, _arrow.decoded(memo))


def memoize_messages(lists: pa.Array, *, drop_content: bool = False) -> pa.Array:
    """Message lists whose structs carry their own JSON object text
    (``_arrow.MEMO_FIELD``), so rows that repeat a message do not encode it again.
    The memo is a dictionary array over the messages' texts: repeating a
    message (``unroll``'s take) copies an index, and the JSONL writer reads
    the text where it is. ``drop_content`` nulls the content and the other
    fields the memo already holds (all but ``role`` and ``tool_calls``, which
    the report reads), so repeating the messages does not copy them (only the
    JSONL writer reads them after)."""
    messages = _arrow.flat(lists)
    if _arrow.MEMO_FIELD in messages.type.names:
        return lists
    objects = message_objects(messages)
    memo = pa.DictionaryArray.from_arrays(pa.array(np.arange(len(objects), dtype=np.int32)), objects)
    children = [messages.field(i) for i in range(messages.type.num_fields)] + [memo]
    if drop_content:
        for at, fld in enumerate(messages.type):
            if fld.name not in _KEPT_WITH_MEMO:
                children[at] = pa.nulls(len(messages), fld.type)
    fields = list(messages.type) + [pa.field(_arrow.MEMO_FIELD, memo.type)]
    mask = messages.is_null() if messages.null_count else None
    return _arrow.relist(lists, pa.StructArray.from_arrays(children, fields=fields, mask=mask))


#: Message fields ``memoize_messages(drop_content=True)`` keeps: what the report counts.
_KEPT_WITH_MEMO = frozenset(("role", "tool_calls"))


def message_objects(messages: pa.Array) -> pa.Array:
    """The JSON object of each message, with the keys ``Message`` decodes to:
    content parts as the content array, a null ``reasoning_content`` /
    ``tool_calls`` / ``name`` / ``tool_call_id`` absent, ``extra`` merged in."""
    names = messages.type.names
    content = _or_null(_parts.content_json(messages, quote(pc.struct_field(messages, "content"))))
    parts: list[Any] = ['{"role": ', _or_null(quote(pc.struct_field(messages, "role"))), ', "content": ', content]
    if "reasoning_content" in names:
        reasoning = pc.struct_field(messages, "reasoning_content")
        if reasoning.null_count < len(reasoning):
            parts.append(_join(', "reasoning_content": ', quote(reasoning)))
    if "tool_calls" in names:
        calls = pc.struct_field(messages, "tool_calls")
        if calls.null_count < len(calls):
            parts.append(_join(', "tool_calls": ', _calls(calls)))
    for key in ("name", "tool_call_id"):
        if key in names:
            values = pc.struct_field(messages, key)
            if values.null_count < len(values):
                parts.append(_join(f", {json.dumps(key)}: ", quote(values)))
    if "extra" in names:
        extra = pc.struct_field(messages, "extra")
        if extra.null_count < len(extra):
            parts.append(_join(", ", _extra_members(extra)))
    parts.append("}")
    return _concat(*parts)


def _extra_members(extra: pa.Array) -> pa.Array:
    """An ``extra`` object's members (its text without the braces), null when empty."""
    text = _plain(extra)
    inner = pc.utf8_trim_whitespace(pc.replace_substring_regex(text, r"(?s)^\s*\{(.*)\}\s*$", r"\1"))
    return _arrow.if_else(pc.equal(inner, ""), _NULL, inner)


def _calls(calls: pa.Array) -> pa.Array:
    flat_calls = _arrow.flat(calls)
    function = pc.struct_field(flat_calls, "function")
    arguments = pc.struct_field(function, "arguments")
    arguments_text = arguments.storage if isinstance(arguments, pa.ExtensionArray) else quote(arguments)
    function_text = _join(
        '{"name": ',
        _or_null(quote(pc.struct_field(function, "name"))),
        ', "arguments": ',
        _or_null(arguments_text),
        "}",
    )
    if function.null_count:
        function_text = pc.if_else(function.is_null(), "null", function_text)
    objects = _join(
        '{"id": ',
        _or_null(quote(pc.struct_field(flat_calls, "id"))),
        ', "type": ',
        _or_null(quote(pc.struct_field(flat_calls, "type"))),
        ', "function": ',
        function_text,
        "}",
    )
    return _join("[", pc.binary_join(_arrow.relist(calls, objects), ", "), "]")


#: A hidden column of pre-rendered members (``", \"key\": value, ..."``) and
#: the schema metadata key listing the columns they stand for.
MEMBERS_COLUMN = "__members"
MEMBERS_COVER = b"whileai_datasets.members_cover"


def render_members(table: pa.Table, names: list[str], *, keep_null: dict[str, str | bool] | None = None) -> pa.Array:
    """``", \"key\": value"`` for each of ``names`` per row (absent keys left
    out; "" when none is present): members written once per source row and
    repeated by ``take`` (``unroll``) instead of encoded per sample."""
    keep_null = keep_null or {}
    parts: list[Any] = []
    for name in names:
        if keep_null.get(name) is False or keep_null.get(name) is None:
            if table.column(name).null_count == table.num_rows:
                continue
        key, *values = _member(table, name, keep_null.get(name, False))
        if _has_nulls(values):
            parts.append(_join(", " + key, *values))  # absent on some rows: key and value go together
        else:
            parts.extend([", " + key, *values])  # present on every row: straight into the one join
    if not any(isinstance(p, pa.Array) for p in parts):
        return pa.array(["".join(parts)] * table.num_rows, pa.string())
    return _concat(*parts)


def encode_rows(table: pa.Table, *, keep_null: dict[str, str | bool] | None = None) -> pa.Array:
    """One JSON object text per row, each ending in "\n". A null value leaves
    its key out, unless ``keep_null[column]`` is True (always written) or
    names another column (written as ``null`` where that column is not null).
    Columns whose names start with "__" are not keys; ``MEMBERS_COLUMN``
    (members rendered earlier) is spliced in, and the columns the schema
    metadata says it covers are skipped."""
    keep_null = keep_null or {}
    covered = set(json.loads((table.schema.metadata or {}).get(MEMBERS_COVER, b"[]")))
    names = [
        n
        for n in table.column_names
        if not n.startswith("__")
        and n not in covered
        and (keep_null.get(n) is not False and n in keep_null or table.column(n).null_count < table.num_rows)
    ]
    lazy = MEMBERS_COLUMN in table.column_names  # unrolled samples: their texts repeat, referenced by index
    members = [_member(table, name, keep_null.get(name, False), lazy=lazy) for name in names]
    if MEMBERS_COLUMN in table.column_names and members and not _has_nulls(members[0]):
        members.append(["", _lines.reference(_arrow.column(table, MEMBERS_COLUMN))])  # already has its ", "
        return _assemble(table.num_rows, members, raw_last=True)
    if MEMBERS_COLUMN in table.column_names:
        members.append(["", pc.utf8_slice_codeunits(_arrow.decoded(_arrow.column(table, MEMBERS_COLUMN)), 2)])
    if not members:
        return pa.array(["{}\n"] * table.num_rows, pa.string())
    if _has_nulls(members[0]):  # the first key is absent on some rows: separators by join
        texts = [_lines.text_of([key, *values]) for key, *values in members]
        texts = [_arrow.if_else(pc.equal(t, ""), _NULL, t) for t in texts]
        return _join("{", pc.binary_join_element_wise(*texts, ", ", null_handling="skip"), "}\n")
    return _assemble(table.num_rows, members)


def _assemble(n_rows: int, members: list[list[Any]], *, raw_last: bool = False) -> pa.Array:
    """``{`` members ``}\n`` in one join (``_lines.assemble`` where texts are
    referenced); the first member is present on every row."""
    parts: list[Any] = ["{"]
    last = len(members) - 1
    for i, (key, *values) in enumerate(members):
        if raw_last and i == last:
            parts.extend(values)
            continue
        key = key if i == 0 else ", " + key
        if _has_nulls([key, *values]):
            parts.append(_absent_where_null([key, *values]))  # key and value go together
        else:
            parts.extend([key, *values])  # present on every row: no intermediate copy
    parts.append("}\n")
    if not any(isinstance(p, (_lines.Ref, _lines.Run)) for p in parts):
        return _concat(*parts)  # every text once per row already: one join is as cheap
    return _lines.assemble(n_rows, parts)


def _absent_where_null(pieces: list[Any]) -> Any:
    """One member's pieces joined, null where one is null. Pieces that refer
    to the same texts (a dictionary column's values) are joined there, once
    per value instead of once per row."""
    refs = [p for p in pieces if isinstance(p, _lines.Ref)]
    if refs and all(isinstance(p, (str, _lines.Ref)) for p in pieces) and all(r.index is refs[0].index for r in refs):
        return _lines.Ref(_join(*[p.texts if isinstance(p, _lines.Ref) else p for p in pieces]), refs[0].index)
    return _lines.text_of(pieces)


def _has_nulls(pieces: list[Any]) -> bool:
    return any(
        (isinstance(p, pa.Array) and p.null_count) or (isinstance(p, _lines.Ref) and p.texts.null_count)
        for p in pieces
    )


def _member(table: pa.Table, name: str, rule: str | bool, *, lazy: bool = False) -> list[Any]:
    """``["\"key\": ", value text pieces...]``; the pieces are null where the key is absent.
    ``lazy`` pieces may be ``_lines`` references (for ``_lines.assemble``)."""
    column = _arrow.column(table, name)
    key = json.dumps(name) + ": "
    if _is_message_list(column.type) and not column.null_count:
        return [key, "[", message_run(column) if lazy else message_items(column), "]"]
    if lazy and _is_int_list(column.type) and not column.null_count:
        run = _int_run(column)
        if run is not None:
            return [key, "[", run, "]"]
    constant = _arrow.constant(column)
    if constant is not None:  # one value on every row: spliced in, never repeated in memory
        return [key, encode(constant)[0].as_py()]
    if lazy and rule is False and pa.types.is_dictionary(column.type) and not column.indices.null_count:
        return [key, _lines.reference(pa.DictionaryArray.from_arrays(column.indices, encode(column.dictionary)))]
    values = encode(column)
    if rule is True:
        values = _or_null(values)
    elif isinstance(rule, str) and rule in table.column_names:
        present = _arrow.column(table, rule).is_valid()
        values = pc.if_else(present, _or_null(values), values)
    return [key, values]


def _is_int_list(arrow_type: pa.DataType) -> bool:
    return pa.types.is_list(arrow_type) and pa.types.is_integer(arrow_type.value_type)


def _int_run(lists: pa.Array) -> _lines.Run | None:
    """Integer lists (a per-sample ``loss_mask``) as a ``_lines.Run`` over the
    texts of their few distinct values; None when a value is null."""
    values = _arrow.flat(lists)
    if values.null_count:
        return None
    encoded = pc.dictionary_encode(values)
    offsets = np.asarray(lists.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    index = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    return _lines.Run(offsets - offsets[0], pc.cast(encoded.dictionary, pa.string()), index)


def _is_message_list(arrow_type: pa.DataType) -> bool:
    return (
        pa.types.is_list(arrow_type)
        and pa.types.is_struct(arrow_type.value_type)
        and "role" in arrow_type.value_type.names
    )


def lines_bytes(lines: pa.Array) -> bytes | memoryview:
    """The bytes of rows' texts that already end in "\n", straight from the buffer."""
    if not len(lines):
        return b""
    if lines.null_count:
        raise ValueError("a row has no JSON text")
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32, count=len(lines) + 1, offset=lines.offset * 4)
    return memoryview(lines.buffers()[2])[int(offsets[0]) : int(offsets[-1])]
