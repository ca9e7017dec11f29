"""Character spans to token masks: a token is supervised when its characters overlap a supervised span."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["chunk_token_masks", "spans_to_token_mask"]


def spans_to_token_mask(offsets: np.ndarray, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """1 for each token whose characters overlap one of ``spans``.

    ``offsets`` is the tokenizer's ``(n, 2)`` character offsets; ``spans`` are
    ``(start, end)`` pairs, sorted and disjoint. Empty tokens (start == end) are
    never supervised. Vectorised: one binary search per token.
    """
    mask = np.zeros(len(offsets), dtype=np.int8)
    if not len(spans) or not len(offsets):
        return mask
    bounds = np.asarray(spans, dtype=np.int64)
    starts, ends = offsets[:, 0], offsets[:, 1]
    # the first span that ends after the token starts
    j = np.searchsorted(bounds[:, 1], starts, side="right")
    inside = j < len(bounds)
    j = np.minimum(j, len(bounds) - 1)
    hit = inside & (bounds[j, 0] < ends) & (ends > starts)
    mask[hit] = 1
    return mask


def chunk_token_masks(offsets: Sequence[np.ndarray], spans: Sequence[Sequence[tuple[int, int]]],
                      lengths: Sequence[int]) -> tuple[list[np.ndarray], list[int]]:
    """``spans_to_token_mask`` of many rows at once: one binary search over the whole chunk; and each row's
    number of supervised tokens.

    Row ``r``'s offsets and spans are moved to ``r``'s own stretch of one long
    axis (the rows' text ``lengths`` plus one apart), so every row's spans stay
    sorted, disjoint and out of reach of the other rows' tokens; the masks come
    back as views of one array, one per row.
    """
    if not len(offsets):
        return [], []
    counts = np.fromiter(map(len, offsets), np.int64, len(offsets))
    span_counts = np.fromiter(map(len, spans), np.int64, len(spans))
    stretch = np.zeros(len(offsets), dtype=np.int64)
    np.cumsum(np.asarray(lengths[:-1], dtype=np.int64) + 1, out=stretch[1:])
    tokens = np.concatenate(offsets).reshape(-1, 2) + np.repeat(stretch, counts)[:, None]
    flat = [span for row in spans for span in row]
    bounds = (np.asarray(flat, dtype=np.int64).reshape(-1, 2) + np.repeat(stretch, span_counts)[:, None])
    mask = spans_to_token_mask(tokens, bounds)
    edges = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=edges[1:])
    running = np.zeros(len(mask) + 1, dtype=np.int64)
    np.cumsum(mask, out=running[1:])
    return np.split(mask, edges[1:-1]), np.diff(running[edges]).tolist()
