"""String kernels the JSON writers share: escaping, quoting, joining per row.

Kept apart from ``_json`` (rows and messages) so that ``_parts`` (content
parts) can build its JSON with them while ``_json`` builds messages from both.
"""

from __future__ import annotations

from json.encoder import encode_basestring
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

_NEEDS_ESCAPE = r'["\\\x00-\x1f]'
NULL = pa.scalar(None, pa.string())


def plain(strings: Any) -> pa.Array:
    """One string array: chunks combined, a Json extension array as its storage."""
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    if isinstance(strings, pa.ExtensionArray):
        strings = strings.storage
    return strings


def escape(strings: pa.Array) -> pa.Array:
    """JSON-escaped text of each string, without the quotes (nulls stay null).

    Only strings holding a quote, a backslash or a control character are
    touched; they go through the C encoder of Python's ``json`` (one call per
    string, several times faster than a chain of Arrow replace passes). Each
    distinct string is escaped once (``by_value``)."""
    return by_value(_escape_values, strings)


def quote(strings: pa.Array) -> pa.Array:
    """JSON string literals of a string array (nulls stay null)."""
    return by_value(_quote_values, strings)


#: ``by_value`` works on the distinct strings when at most this share of them is distinct (0: never).
DISTINCT_SHARE = 0.5
_BY_VALUE_MIN_ROWS = 64


def by_value(texts_of: Any, strings: Any) -> pa.Array:
    """``texts_of(strings)`` computed on each distinct string once.

    Columns repeat values (a role, a tool-call id, a templated reply, a
    source row's field repeated per message): hashing the strings is several
    times cheaper than scanning and escaping them, so when at most
    ``DISTINCT_SHARE`` of them are distinct, ``texts_of`` runs on the
    distinct ones and a ``take`` spreads the results back (10 chunks of the
    100k-row benchmark export: 0.033 s in quoting against 0.070 s, profiled).
    Where most strings are distinct the hash is wasted: ~3 ms per 100k strings."""
    strings = plain(strings)
    if len(strings) < _BY_VALUE_MIN_ROWS or DISTINCT_SHARE <= 0:
        return texts_of(strings)
    encoded = pc.dictionary_encode(strings)
    if len(encoded.dictionary) > DISTINCT_SHARE * len(strings):
        return texts_of(strings)
    return texts_of(encoded.dictionary).take(encoded.indices)


def _escape_values(strings: pa.Array) -> pa.Array:
    needs = pc.fill_null(pc.match_substring_regex(strings, _NEEDS_ESCAPE), False)
    if not pc.any(needs).as_py():
        return strings
    escaped = pa.array(list(map(encode_basestring, pc.filter(strings, needs).to_pylist())), pa.string())
    return pc.replace_with_mask(strings, needs, pc.utf8_slice_codeunits(escaped, 1, -1))


def _quote_values(strings: pa.Array) -> pa.Array:
    return join('"', _escape_values(strings), '"')


def join(*parts: Any) -> pa.Array:
    """Concatenation per row; null when any part is null."""
    return pc.binary_join_element_wise(*parts, "")


def concat(*parts: Any) -> pa.Array:
    """Concatenation per row; a null part counts as empty."""
    return pc.binary_join_element_wise(*parts, "", null_handling="replace", null_replacement="")


def or_null(values: pa.Array) -> pa.Array:
    """Null values as the JSON text ``null``."""
    return pc.fill_null(values, "null") if values.null_count else values
