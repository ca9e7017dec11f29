"""Per-message loss masks to token-level masks a trainer applies.

whileai's ``loss_mask`` is one 0/1 per message, and no trainer reads it: TRL's
``SFTTrainer`` labels every token of a ``messages`` row unless it is handed a
token-level ``assistant_masks`` column. Here each row is rendered once with
its chat template (character spans per message and per ``{% generation %}``
block), tokenized once with offsets, and a token is supervised when its
characters fall inside a generation span of a message whose ``loss_mask`` is
1. So "final", unrolled and hand-edited masks all survive to the labels.

A template without a generation block is patched first
(``ChatTemplate.with_generation``), so only the assistant's own output (its
content, tool calls and end-of-turn marker; never the role header) is trained.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from whileai_datasets.errors import SchemaError
from whileai_datasets.rows.features import message_from_storage


class UnsupervisedRowsWarning(UserWarning):
    """Rows with no supervised token were dropped from a tokenized batch."""


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


def template_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Canonical messages as HF chat templates want them: tool-call arguments
    as dicts (templates render them with ``| tojson``; a JSON string would be
    quoted twice). Arguments that do not decode to a value stay text."""
    out = []
    for message in messages:
        calls = message.get("tool_calls")
        if calls:
            message = dict(message)
            message["tool_calls"] = [_call_with_dict_arguments(call) for call in calls]
        out.append(message)
    return out


def _call_with_dict_arguments(call: dict[str, Any]) -> dict[str, Any]:
    function = dict(call.get("function") or {})
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            function["arguments"] = json.loads(arguments)
        except ValueError:
            pass  # left as text on purpose: the round-trip gate reports it
    return {**call, "function": function}


@dataclass
class RowMask:
    """One row's tokens and mask, and what truncation cost."""

    input_ids: list[int]
    assistant_masks: list[int]
    truncated_tokens: int = 0
    supervised_lost: int = 0

    @property
    def supervised(self) -> int:
        return int(sum(self.assistant_masks))


def supervised_spans(rendered: Any, loss_mask: Sequence[int]) -> list[tuple[int, int]]:
    """The generation spans of the messages whose loss_mask entry is 1."""
    spans: list[tuple[int, int]] = []
    for index, flag in enumerate(loss_mask):
        if flag:
            spans.extend(rendered.generation_spans_of(index))
    return sorted(spans)


@dataclass
class TokenizedBatch:
    """What ``tokenize`` computed for a batch, before rows are dropped."""

    rows: list[RowMask] = field(default_factory=list)

    def keep(self) -> list[int]:
        return [i for i, row in enumerate(self.rows) if row.supervised > 0]


def _batch_messages(batch: Any, column: str) -> tuple[list[list[dict[str, Any]]], list[Any], list[list[int]]]:
    """(messages, tools, loss masks) of a batch, decoded, whichever kind it is."""
    if isinstance(batch, pa.Table):
        if column not in batch.column_names or "loss_mask" not in batch.column_names:
            raise SchemaError(
                f"the batch has no {column!r} and 'loss_mask' columns (it has {batch.column_names})",
                hint="Tokenize canonical rows (load_dataset('whileai/export', ...)), before any wire shape.",
            )
        messages = [[message_from_storage(m) for m in row] for row in batch.column(column).to_pylist()]
        tools_column = batch.column("tools").to_pylist() if "tools" in batch.column_names else [None] * batch.num_rows
        tools = [json.loads(t) if isinstance(t, str) else t for t in tools_column]
        masks = batch.column("loss_mask").to_pylist()
        return messages, tools, masks
    if column not in batch or "loss_mask" not in batch:
        raise SchemaError(
            f"the batch has no {column!r} and 'loss_mask' columns (it has {sorted(batch)})",
            hint="Tokenize canonical rows (load_dataset('whileai/export', ...)), before any wire shape.",
        )
    n = len(batch[column])
    tools = batch.get("tools") or [None] * n
    return list(batch[column]), list(tools), list(batch["loss_mask"])


def dropped_warning(dropped: int, total: int) -> None:
    if dropped:
        warnings.warn(
            f"dropped {dropped} of {total} rows in this batch: no token of theirs is supervised "
            "(no assistant turn with loss, or truncation cut it off). Training on an all-masked row "
            "teaches nothing and skews the loss average.",
            UnsupervisedRowsWarning,
            stacklevel=3,
        )


def _resolve_template(tokenizer: Any, template: Any) -> Any:
    """The template to render with, patched when it has no generation block."""
    from whileai_datasets.chat_template import ChatTemplate

    if template is None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise SchemaError(
                f"no chat template: the tokenizer ({type(tokenizer).__name__}) has none and none was given",
                hint="Pass template=ChatTemplate.shipped('qwen2_5') (or a template string / file).",
            )
        chat = ChatTemplate.from_tokenizer(tokenizer)
    elif isinstance(template, ChatTemplate):
        chat = template
    else:
        chat = ChatTemplate(str(template))
    if not chat.inspect().has_generation_block:
        chat = chat.with_generation()
    return chat


def _encode(tokenizer: Any, texts: list[str]) -> list[tuple[list[int], np.ndarray]]:
    """(ids, (n, 2) character offsets) per text, in one batched call. Takes a
    transformers fast tokenizer or a ``tokenizers.Tokenizer``."""
    if hasattr(tokenizer, "encode_batch") and not hasattr(tokenizer, "apply_chat_template"):
        encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
        return [(list(e.ids), np.asarray(e.offsets, dtype=np.int64).reshape(-1, 2)) for e in encodings]
    if not getattr(tokenizer, "is_fast", False):
        raise SchemaError(
            f"{type(tokenizer).__name__} gives no character offsets (a slow tokenizer)",
            hint="Load the fast tokenizer (AutoTokenizer.from_pretrained(..., use_fast=True)).",
        )
    out = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    return [
        (list(ids), np.asarray(offsets, dtype=np.int64).reshape(-1, 2))
        for ids, offsets in zip(out["input_ids"], out["offset_mapping"])
    ]


@dataclass(frozen=True)
class Tokenize:
    """Render, tokenize and mask each row: ``input_ids``, ``attention_mask`` and
    ``assistant_masks`` that TRL's ``SFTTrainer`` applies.

    Args:
        tokenizer: A transformers fast tokenizer or a ``tokenizers.Tokenizer``.
        template: A ``ChatTemplate``, template text, or None for the
            tokenizer's own; patched with ``with_generation()`` when it has no
            generation block.
        max_length: Cut rows to this many tokens; the cut is counted per row
            (``tokens_truncated``, ``supervised_tokens_truncated``).
        column: The canonical messages column.
    Returns:
        The batch without the rows that have no supervised token left, plus
        ``input_ids``, ``attention_mask``, ``assistant_masks``, ``num_tokens``,
        ``num_supervised_tokens`` and the two truncation counts.
    Example:
        >>> ds = ds.map(wai_transforms.tokenize(tok), batched=True)  # doctest: +SKIP
    """

    tokenizer: Any
    template: Any = None
    max_length: int | None = None
    column: str = "messages"
    chat: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_length is not None and self.max_length < 1:
            raise SchemaError(f"max_length must be at least 1, got {self.max_length}", hint="Pass a positive number or None.")
        object.__setattr__(self, "chat", _resolve_template(self.tokenizer, self.template))

    def rows(self, messages: list[list[dict[str, Any]]], tools: list[Any], masks: list[list[int]]) -> list[RowMask]:
        """One ``RowMask`` per conversation: one render and one tokenization each."""
        rendered = [
            self.chat.render(template_messages(m), tools=t or None) for m, t in zip(messages, tools)
        ]
        encoded = _encode(self.tokenizer, [r.text for r in rendered])
        out = []
        for chat, (ids, offsets), mask in zip(rendered, encoded, masks):
            token_mask = spans_to_token_mask(offsets, supervised_spans(chat, mask))
            out.append(self._truncate(ids, token_mask))
        return out

    def _truncate(self, ids: list[int], mask: np.ndarray) -> RowMask:
        limit = self.max_length
        if limit is None or len(ids) <= limit:
            return RowMask(ids, mask.tolist())
        return RowMask(ids[:limit], mask[:limit].tolist(), len(ids) - limit, int(mask[limit:].sum()))

    def __call__(self, batch: Any, indices: list[int] | None = None) -> Any:
        messages, tools, masks = _batch_messages(batch, self.column)
        rows = self.rows(messages, tools, masks)
        keep = [i for i, row in enumerate(rows) if row.supervised > 0]
        dropped_warning(len(rows) - len(keep), len(rows))
        kept = [rows[i] for i in keep]
        columns = {
            "input_ids": [r.input_ids for r in kept],
            "attention_mask": [[1] * len(r.input_ids) for r in kept],
            "assistant_masks": [r.assistant_masks for r in kept],
            "num_tokens": [len(r.input_ids) for r in kept],
            "num_supervised_tokens": [r.supervised for r in kept],
            "tokens_truncated": [r.truncated_tokens for r in kept],
            "supervised_tokens_truncated": [r.supervised_lost for r in kept],
        }
        if isinstance(batch, pa.Table):
            table = batch.take(pa.array(keep, pa.int64())) if len(keep) != batch.num_rows else batch
            for name, values in columns.items():
                table = _set_column(table, name, pa.array(values, _COLUMN_TYPES[name]))
            return table
        out = {name: [values[i] for i in keep] for name, values in batch.items()}
        out.update(columns)
        return out


_COLUMN_TYPES = {
    "input_ids": pa.list_(pa.int32()),
    "attention_mask": pa.list_(pa.int8()),
    "assistant_masks": pa.list_(pa.int8()),
    "num_tokens": pa.int32(),
    "num_supervised_tokens": pa.int32(),
    "tokens_truncated": pa.int32(),
    "supervised_tokens_truncated": pa.int32(),
}


def _set_column(table: pa.Table, name: str, array: pa.Array) -> pa.Table:
    if name in table.column_names:
        return table.set_column(table.column_names.index(name), name, array)
    return table.append_column(name, array)


def tokenize(tokenizer: Any, template: Any = None, max_length: int | None = None, *, column: str = "messages") -> Tokenize:
    """The ``Tokenize`` transform, for ``ds.map(tokenize(tok), batched=True)``."""
    return Tokenize(tokenizer, template, max_length, column)


def mask_report(tokenized: Any, source_rows: int | None = None) -> dict[str, Any]:
    """Totals of a tokenized dataset: tokens, supervised tokens, what the naive
    ``messages`` route would supervise (every token), truncation, and the rows
    dropped for having no supervised token (given the source's row count)."""
    table = tokenized.with_format("arrow")[:] if hasattr(tokenized, "with_format") else tokenized
    import pyarrow.compute as pc

    def total(name: str) -> int:
        if name not in table.column_names:
            if table.num_rows == 0:  # every row was dropped: datasets adds no columns to an empty result
                return 0
            raise SchemaError(f"no {name!r} column", hint="Report on the output of wai_transforms.tokenize.")
        return int(pc.sum(table[name]).as_py() or 0)

    tokens, supervised = total("num_tokens"), total("num_supervised_tokens")
    report: dict[str, Any] = {
        "rows": table.num_rows,
        "tokens": tokens,
        "supervised_tokens": supervised,
        "naive_supervised_tokens": tokens,
        "naive_over_masked": (tokens / supervised) if supervised else None,
        "rows_truncated": int(pc.sum(pc.greater(table["tokens_truncated"], 0)).as_py() or 0) if table.num_rows else 0,
        "tokens_truncated": total("tokens_truncated"),
        "supervised_tokens_truncated": total("supervised_tokens_truncated"),
    }
    if source_rows is not None:
        report["rows_dropped_unsupervised"] = source_rows - table.num_rows
    return report
