"""``unroll``: one sample per assistant turn, as whileai's ``_unroll``.

An N-turn conversation becomes N samples; the k-th holds the messages up to
and including the k-th assistant turn, with loss on that turn alone. Each
sample carries ``unroll`` ``{"turn": k, "turns": N}`` and
``lineage.unrolled_from`` ``{"prompt_sha1", "rollout_index"[, "scenario_id"]}``
(the source row's prompt hash, rollout index, and scenario id when it has
one), merged into the row's lineage. A conversation with no assistant turn is
one sample as it stands. Every other column is repeated per sample.

A turn the row's ``loss_mask`` already masks (its own training flags: ``weight: 0``, ``loss: false``,
a ``loss_mask`` of its own) ends no sample: it is context for the later ones, never trained. On rows
whose mask marks every assistant turn (the builder's default) this is whileai's ``_unroll`` exactly.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets._typing import Batch
from whileai_datasets.columnar import _arrow, _json

UNROLL_TYPE = pa.struct([("turn", pa.int64()), ("turns", pa.int64())])
_EMPTY_OBJECT = r"^\s*\{\s*\}\s*$"


def prompt_sha1(prompts: pa.Array) -> pa.Array:
    """``sha1(prompt or "")[:12]`` per row, hashing each distinct prompt once."""
    encoded = pc.dictionary_encode(pc.fill_null(prompts, ""))
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    digests = [hashlib.sha1(text.encode("utf-8")).hexdigest()[:12] for text in encoded.dictionary.to_pylist()]
    return pa.array(digests, pa.string()).take(encoded.indices)


def unrolled_from(table: pa.Table) -> pa.Array:
    """The JSON text of each row's ``lineage.unrolled_from``."""
    sha = prompt_sha1(_arrow.optional(table, "prompt", pa.string()))
    index = _arrow.optional(table, "rollout_index", pa.int64())
    index_text = pc.fill_null(_json.encode(index), "null")
    scenario = _arrow.optional(table, "scenario_id", pa.string())
    has_scenario = pc.fill_null(pc.not_equal(scenario, ""), False)
    scenario_part = pc.if_else(
        has_scenario, pc.binary_join_element_wise(', "scenario_id": ', _json.quote(scenario), ""), ""
    )
    return pc.binary_join_element_wise(
        '{"prompt_sha1": "', sha, '", "rollout_index": ', index_text, scenario_part, "}", ""
    )


def merge_lineage(lineage: pa.Array, source: pa.Array) -> pa.Array:
    """``dict(lineage or {}) | {"unrolled_from": source}`` as JSON text, per row.

    Objects are merged on their text; a lineage that already names
    ``unrolled_from`` or is not an object goes through ``json`` (rare)."""
    text = lineage.storage if isinstance(lineage, pa.ExtensionArray) else lineage
    text = pc.utf8_trim_whitespace(text)
    empty = pc.or_kleene(text.is_null(), pc.match_substring_regex(text, _EMPTY_OBJECT))
    empty = pc.fill_null(empty, True)
    plain = pc.and_(pc.starts_with(text, "{"), pc.invert(pc.match_substring(text, '"unrolled_from"')))
    plain = pc.fill_null(plain, False)
    fresh = pc.binary_join_element_wise('{"unrolled_from": ', source, "}", "")
    body = pc.utf8_slice_codeunits(text, 0, -1)
    merged = pc.binary_join_element_wise(body, ', "unrolled_from": ', source, "}", "")
    out = pc.if_else(empty, fresh, _arrow.if_else(plain, merged, pa.scalar(None, pa.string())))
    odd = np.flatnonzero(~_arrow.to_numpy_bool(pc.or_(empty, plain)))
    if len(odd):
        texts = text.take(pa.array(odd)).to_pylist()
        sources = source.take(pa.array(odd)).to_pylist()
        fixed = []
        for raw, src in zip(texts, sources):
            value = dict(json.loads(raw) or {})
            value["unrolled_from"] = json.loads(src)
            fixed.append(json.dumps(value))
        mask = np.zeros(len(text), dtype=bool)
        mask[odd] = True
        out = pc.replace_with_mask(out, pa.array(mask), pa.array(fixed, pa.string()))
    return out.cast(pa.json_())


def unroll_table(
    table: pa.Table, column: str = "messages", *, source: pa.Array | None = None, lineage_by_row: bool = False
) -> pa.Table:
    """``table`` unrolled; see the module docstring. ``source`` is each row's
    ``unrolled_from`` JSON when the table no longer has the columns it comes
    from (``unrolled_from(canonical_table)``). ``lineage_by_row`` gives
    ``lineage`` as a dictionary array over the source rows' lineage texts (for
    the JSONL writer: the samples of a row share one text, never copied)."""
    lists = _arrow.message_column(table, column)
    n_rows = len(lists)
    lens = _arrow.lengths(lists)
    row_start = _arrow.offsets_of(lens)
    messages = _arrow.flat(lists)
    assistant = _arrow.to_numpy_bool(pc.equal(pc.struct_field(messages, "role"), "assistant"))
    if "loss_mask" in table.column_names:  # a turn its row's own flags mask ends no sample
        marked = _arrow.flat(_arrow.column(table, "loss_mask"))
        if len(marked) == len(assistant):  # (else not one entry per message: the mask is rebuilt anyway)
            assistant &= _arrow.to_numpy_bool(pc.not_equal(marked, 0))
    turn_index = np.flatnonzero(assistant)
    turn_row = _arrow.parents(lists)[turn_index]
    turns = np.bincount(turn_row, minlength=n_rows).astype(np.int64)
    per_row = np.maximum(turns, 1)
    sample_start = _arrow.offsets_of(per_row)
    n_samples = int(sample_start[-1])
    sample_row = np.repeat(np.arange(n_rows, dtype=np.int64), per_row)

    rank = np.arange(len(turn_index), dtype=np.int64) - _arrow.offsets_of(turns)[turn_row]
    slot = sample_start[turn_row] + rank
    is_turn = np.zeros(n_samples, dtype=bool)
    is_turn[slot] = True
    size = lens[sample_row].copy()
    size[slot] = turn_index - row_start[turn_row] + 1
    turn = np.zeros(n_samples, dtype=np.int64)
    turn[slot] = rank + 1

    size_offsets = _arrow.offsets_of(size)
    take = np.repeat(row_start[sample_row] - size_offsets[:-1], size) + np.arange(int(size_offsets[-1]), dtype=np.int64)
    null_rows = lists.is_null().take(pa.array(sample_row)) if lists.null_count else None
    new_lists = _arrow.build_list(size_offsets, messages.take(pa.array(take)), mask=null_rows)
    mask = np.zeros(len(take), dtype=np.int8)
    mask[size_offsets[1:][is_turn] - 1] = 1
    new_mask = _arrow.build_list(size_offsets, pa.array(mask, pa.int8()), mask=null_rows)

    unroll = pa.StructArray.from_arrays(
        [pa.array(turn, pa.int64()), pa.array(turns[sample_row], pa.int64())],
        fields=list(UNROLL_TYPE),
        mask=pa.array(~is_turn),
    )
    out = table.take(pa.array(sample_row))
    out = _arrow.set_column(out, column, new_lists)
    out = _arrow.set_column(out, "loss_mask", new_mask)
    out = _arrow.set_column(out, "unroll", unroll)
    if turns.any():
        lineage = row_lineage(table, turns, unrolled_from(table) if source is None else source)
        if lineage_by_row:
            lineage = pa.DictionaryArray.from_arrays(pa.array(sample_row.astype(np.int32)), lineage)
        else:
            lineage = lineage.take(pa.array(sample_row))
        out = _arrow.set_column(out, "lineage", lineage)
    return out


def row_lineage(table: pa.Table, turns: np.ndarray, source: pa.Array) -> pa.Array:
    """Per source row, the lineage its samples carry: merged with
    ``unrolled_from`` where the row has an assistant turn, else as it was."""
    lineage = _arrow.optional(table, "lineage", pa.json_())
    merged = merge_lineage(lineage, source)
    kept = lineage.storage if isinstance(lineage, pa.ExtensionArray) else lineage
    return pc.if_else(pa.array(turns > 0), merged.storage, kept).cast(pa.json_())


@dataclass(frozen=True)
class Unroll:
    """One sample per assistant turn: the conversation up to that turn, loss on it alone.

    Changes the number of rows, so it needs ``batched=True``.

    Args:
        column: Column holding ``List(Message)``.
    Returns:
        The unrolled batch: ``messages`` and ``loss_mask`` per sample, ``unroll``
        ``{turn, turns}`` (null on a conversation with no assistant turn) and
        ``lineage.unrolled_from``; other columns repeated per sample.
    Raises:
        SchemaError: called one example at a time, or ``column`` is not a message list.
    Example:
        >>> from whileai_datasets import transforms as wai_transforms
        >>> ds = ds.with_format("arrow").map(wai_transforms.unroll, batched=True)  # doctest: +SKIP
    """

    column: str = "messages"

    def __call__(self, batch: Batch, indices: list[int] | None = None) -> Batch:
        _arrow.require_batched(batch, "unroll")
        table = _arrow.as_table(batch)
        return _arrow.like(batch, unroll_table(table, self.column))


#: The ``Unroll()`` instance: ``ds.map(unroll, batched=True)``.
unroll = Unroll()
