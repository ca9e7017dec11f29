"""Huge untrained values, read only as far as ``max_length`` can reach: the audit and show-mask stay bounded.

A message that carries no loss (a tool output, a pasted log) and whose content alone holds more characters
than ``max_length`` tokens can spell surely fills the rest of the row: every token after its start is past
the cut or one of its own, and its own tokens are never supervised. So what trains (the supervised tokens
within ``max_length``) is the same when such a content is cut to ``reach_chars``: the tokens before it are
unchanged, the cut content still holds at least ``max_length`` tokens, and the supervised tokens after it
are lost either way. The audit and show-mask count such rows from the cut content (``cap_untrained``): a
5 MB tool output costs them about as much as an ordinary row. What they report past the cut (the tokens
before ``max_length``, the tokens cut) then counts the content's characters past the reach as not encoded.
``tokenize`` itself encodes every row whole: its ``input_ids`` are what trains.

The reach is ``max_length`` times the most characters one token spells (``token_lengths.byte_lengths``:
byte-level BPE and SentencePiece-style tokenizers), doubled; a tokenizer whose token lengths are not known
has no reach, and its rows are counted whole.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets.columnar import _arrow
from whileai_datasets.tokenize.token_encode import backend_of, byte_lengths

__all__ = ["cap_untrained", "reach_chars"]

#: No content shorter than this is cut, whatever the reach (a cut row must save real work).
MIN_REACH = 100_000


def reach_chars(tokenizer: Any, max_length: int | None) -> int | None:
    """The characters past which an untrained content cannot change what trains at ``max_length`` (None:
    no ``max_length``, or a tokenizer whose characters per token are not known)."""
    if max_length is None:
        return None
    backend = backend_of(tokenizer)
    lengths = byte_lengths(backend) if backend is not None else None
    if lengths is None or not len(lengths):
        return None
    return max(MIN_REACH, 2 * int(max_length) * int(lengths.max()))


def cap_untrained(rows: pa.Table, reach: int | None) -> tuple[pa.Table, np.ndarray]:
    """``rows`` (canonical: ``messages`` and ``loss_mask``) with every untrained string content longer than
    ``reach`` cut to its first ``reach`` characters, and per row the characters cut (0 where none)."""
    cut = np.zeros(rows.num_rows, dtype=np.int64)
    if reach is None or "messages" not in rows.column_names or "loss_mask" not in rows.column_names:
        return rows, cut
    column = _arrow.column(rows, "messages")
    flat = _arrow.flat(column)
    content = pc.struct_field(flat, "content")
    if not len(flat) or not (pa.types.is_string(content.type) or pa.types.is_large_string(content.type)):
        return rows, cut
    chars = np.asarray(pc.fill_null(pc.utf8_length(content), 0).to_numpy(zero_copy_only=False), np.int64)
    flags = np.asarray(_arrow.flat(_arrow.column(rows, "loss_mask")).to_numpy(zero_copy_only=False))
    if len(flags) != len(chars):  # a loss_mask that does not match its messages: the check refuses the row
        return rows, cut
    long = (chars > reach) & (flags == 0)
    if not long.any():
        return rows, cut
    np.add.at(cut, _arrow.parents(column)[long], chars[long] - reach)
    shortened = _arrow.if_else(pa.array(long), pc.utf8_slice_codeunits(content, 0, reach), content)
    messages = _arrow.relist(column, _arrow.replace_fields(flat, content=shortened))
    return _arrow.set_column(rows, "messages", messages), cut
