"""Tool-call argument checks on Arrow columns, without a Python loop over every call.

``arguments_info``: whether each tool call's arguments text parses to a JSON
object, and the JSON text of whileai's decoded arguments (the TRL encoding).
The common case (a one-line ``{...}`` text) is validated by Arrow's JSON
parser in one call; anything else, or a batch the parser refuses, goes
through Python's ``json`` exactly as whileai does.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from whileai_datasets.columnar import _arrow, _text
from whileai_datasets.columnar._json import lines_bytes
from whileai_datasets.rows.normalize import decode_arguments

#: One-line JSON object texts; only these go through Arrow's parser.
_OBJECT_CANDIDATE = r"^\{[^\x00-\x1f]*\}$"
_EMPTY_SCHEMA_OPTIONS = pa_json.ParseOptions(explicit_schema=pa.schema([]), unexpected_field_behavior="ignore")


def arguments_info(texts: pa.Array) -> tuple[np.ndarray, np.ndarray, pa.Array]:
    """For argument texts (OpenAI wire): ``(parses_to_dict, decodes_to_dict,
    trl_json)``: ``json.loads(text)`` is a dict; whileai's decoded arguments
    (up to three layers of string encoding unwrapped) are a dict; and the JSON
    text of those decoded arguments."""
    texts = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    if isinstance(texts, pa.ExtensionArray):
        texts = texts.storage
    if len(texts) >= 64 and _text.DISTINCT_SHARE > 0:  # unrolled samples repeat their calls: each checked once
        encoded = pc.dictionary_encode(texts, null_encoding="encode")
        if len(encoded.dictionary) <= _text.DISTINCT_SHARE * len(texts):
            parses, decodes, trl = _arguments_info(encoded.dictionary)
            index = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
            return parses[index], decodes[index], trl.storage.take(encoded.indices).cast(pa.json_())
    return _arguments_info(texts)


def _arguments_info(texts: pa.Array) -> tuple[np.ndarray, np.ndarray, pa.Array]:
    n = len(texts)
    candidate = _arrow.to_numpy_bool(pc.match_substring_regex(texts, _OBJECT_CANDIDATE))
    valid = np.zeros(n, dtype=bool)
    if candidate.any():
        picked = np.flatnonzero(candidate)
        if _arrow_parses_objects(texts.take(pa.array(picked))):
            valid[picked] = True
    parses = valid.copy()
    decodes = valid.copy()
    trl = texts
    rest = np.flatnonzero(~valid)
    if len(rest):
        values = texts.take(pa.array(rest)).to_pylist()
        trl_rest = []
        for j, text in zip(rest, values):
            parsed = _loads_or_none(text)
            parses[j] = isinstance(parsed, dict)
            decoded = decode_arguments(text)
            decodes[j] = isinstance(decoded, dict)
            trl_rest.append(json.dumps(decoded))  # ASCII: a lone surrogate survives as an escape
        mask = np.zeros(n, dtype=bool)
        mask[rest] = True
        trl = pc.replace_with_mask(texts, pa.array(mask), pa.array(trl_rest, pa.string()))
    return parses, decodes, trl.cast(pa.json_())


def _loads_or_none(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return None


def _arrow_parses_objects(texts: pa.Array) -> bool:
    """True when every text is one JSON object by Arrow's parser (which is
    then also Python's verdict for these one-line ``{...}`` texts)."""
    lines = pc.binary_join_element_wise(texts, "\n", "")
    raw = lines_bytes(lines)  # the texts' own buffer, no copy into Python
    try:
        table = pa_json.read_json(
            pa.BufferReader(pa.py_buffer(raw)),
            read_options=pa_json.ReadOptions(use_threads=False, block_size=max(1 << 20, len(raw) + 1)),
            parse_options=_EMPTY_SCHEMA_OPTIONS,
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return bool(table.num_rows == len(texts))
