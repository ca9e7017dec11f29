"""What the card says about each config, measured on the published rows chunk by chunk.

Every function here takes one chunk of a config (and the source chunk it was built from) and
returns counts that add up over the chunks of a split: the card's facts are their sums, so a
publish never holds a split to measure it. The row count of every config is counted by the
publisher itself (``rows``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets.columnar import _arrow, _portable
from whileai_datasets.tokenize import token_masks
from whileai_datasets.tokenize.token_encode import encode_texts

_TOKENIZE_ROWS = 256  # rows rendered and tokenized per call


def marked(canonical: pa.Table) -> np.ndarray:
    """Per message of `canonical`: whether its `loss_mask` entry marks it."""
    flat = _arrow.flat(_arrow.column(canonical, "loss_mask"))
    return _arrow.to_numpy_bool(pc.not_equal(pc.fill_null(flat, 0), 0))


def row_marks(canonical: pa.Table) -> np.ndarray:
    """Per row: how many of its messages are marked."""
    lists = _arrow.column(canonical, "messages")
    return np.bincount(_arrow.parents(lists), weights=marked(canonical), minlength=canonical.num_rows)


def canonical_facts(_config: pa.Table, canonical: pa.Table) -> dict[str, int]:
    """Messages, assistant turns and marked turns of the canonical rows."""
    lists = _arrow.column(canonical, "messages")
    roles = pc.struct_field(_arrow.flat(lists), "role")
    return {"messages": len(roles), "assistant_turns": int(pc.sum(pc.equal(roles, "assistant")).as_py() or 0),
            "marked_turns": int(marked(canonical).sum()),
            "rows_without_marked_turn": int(np.sum(row_marks(canonical) == 0))}


def tokenized_facts(tokenized: pa.Table, _canonical: pa.Table) -> dict[str, int]:
    """Tokens and marked tokens of the tokenized rows."""
    ids, masks = _arrow.column(tokenized, "input_ids"), _arrow.column(tokenized, "assistant_masks")
    return {"tokens": len(_arrow.flat(ids)), "marked_tokens": int(pc.sum(_arrow.flat(masks)).as_py() or 0)}


@dataclass(frozen=True)
class CompletionTokens:
    """Tokens SFTTrainer's completion mask supervises on the default config, counted the way it does:
    render the prompt with the generation prompt and prompt + completion, tokenize both, and count
    the tokens after their common prefix (rendered with this package's sandboxed renderer)."""

    tokenizer: Any
    template: Any = None

    def __call__(self, trainer: pa.Table, _canonical: pa.Table) -> dict[str, int]:
        chat = token_masks.tokenize(self.tokenizer, self.template).chat
        rows = _decoded_rows(trainer)
        supervised = total = 0
        for start in range(0, len(rows), _TOKENIZE_ROWS):
            batch = rows[start:start + _TOKENIZE_ROWS]
            prompts = [chat.render(r["prompt"], tools=r.get("tools") or None, add_generation_prompt=True).text
                       for r in batch]
            wholes = [chat.render(r["prompt"] + r["completion"], tools=r.get("tools") or None).text for r in batch]
            for (p, _), (w, _) in zip(encode_texts(self.tokenizer, prompts), encode_texts(self.tokenizer, wholes)):
                supervised += len(w) - _common_prefix(p, w)
                total += len(w)
        return {"tokens": total, "supervised_tokens": supervised}


def _decoded_rows(table: pa.Table) -> list[dict[str, Any]]:
    names = [n for n in ("prompt", "completion", "tools") if n in table.column_names]
    features = _portable.portable_features(table.select(names).schema)
    return [features.decode_example(row) for row in table.select(names).to_pylist()]


def _common_prefix(left: list[int], right: list[int]) -> int:
    n = min(len(left), len(right))
    diff = np.flatnonzero(np.asarray(left[:n]) != np.asarray(right[:n]))
    return int(diff[0]) if len(diff) else n
