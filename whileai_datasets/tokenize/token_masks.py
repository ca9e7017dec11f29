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

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import count
from typing import Any

import numpy as np
import pyarrow as pa

from whileai_datasets import option_names
from whileai_datasets._gc import gc_paused
from whileai_datasets._options import check_choice, check_count, check_flag
from whileai_datasets._typing import OnBadRow, Truncation
from whileai_datasets.chat_template.masks.dropped import NoteKind, dropped_output, partly_rendered, row_notes
from whileai_datasets.chat_template.masks.mask_check import check_row
from whileai_datasets.chat_template.masks.masking import MaskPlan, supervised_spans
from whileai_datasets.chat_template.masks.turn_edges import stop_tokens as model_stop_tokens
from whileai_datasets.chat_template.rendering.render import batch_inputs, marker_free
from whileai_datasets.chat_template.sandbox.budget import budget_scope
from whileai_datasets.columnar import _arrow
from whileai_datasets.columnar._arrow import require_batched
from whileai_datasets.columnar._batches import with_features
from whileai_datasets.columnar._parts import has_parts
from whileai_datasets.errors import RenderBudgetError, SchemaError, TemplateError
from whileai_datasets.tokenize.encode_queue import EncodeQueue, Ticket
from whileai_datasets.tokenize.notices import (
    BadMaskRowsWarning,
    BadMaskRowsWarning,
    PartialRenderWarning,
    SalvagedRowsWarning,
    UnsupervisedRowsWarning,
    bad_rows_warning,
    dropped_warning,
    partial_warning,
    salvaged_warning,
)
from whileai_datasets.tokenize.row_failures import Cause, RowFailures, Salvage, salvage_row, summary, tagged
from whileai_datasets.tokenize.span_masks import chunk_token_masks, spans_to_token_mask
from whileai_datasets.tokenize.template_input import InputForm, template_messages
from whileai_datasets.tokenize.token_columns import arrow_columns, numpy_columns, set_column
from whileai_datasets.tokenize.token_encode import PieceEncoder
from whileai_datasets.tokenize.token_rows import (
    Decoded,
    Pieces,
    batch_chunks,
    check_columns,
    decode_table,
    list_chunks,
    split_batch,
    turn_pieces,
)

__all__ = ["BadMaskRowsWarning", "PartialRenderWarning", "SalvagedRowsWarning", "Tokenize", "UnsupervisedRowsWarning",
           "spans_to_token_mask", "supervised_spans", "template_messages", "tokenize"]


Found = tuple[str, list[tuple[int, int]], str]  # a row's text, supervised spans and mask method
Notice = tuple[NoteKind, str]  # what a row that trains is named for (``dropped.row_notes``)
#: the row-failure cause of a mask violation that is a turn's own output the template does not render
_DROPPED_CAUSES: dict[str, Cause] = {"tool_calls": "template_drops_tool_calls", "content": "template_drops_content"}


@dataclass
class RowMask:
    """One row's tokens and mask, and what truncation cost."""

    input_ids: Any  # int32 array (or list) of token ids
    mask: np.ndarray  # int8, one per token
    truncated_tokens: int = 0
    supervised_lost: int = 0
    method: str = ""  # the mask method that gave this row's spans
    supervised: int = -1  # supervised tokens kept: counted from ``mask`` unless given (counted per chunk)

    def __post_init__(self) -> None:
        if self.supervised < 0:
            self.supervised = int(self.mask.sum())

    @property
    def assistant_masks(self) -> list[int]:
        return [int(flag) for flag in self.mask]


def _resolve_template(tokenizer: Any, template: Any) -> Any:
    """The template to render with, carrying the tokenizer's special tokens when it has none."""
    from whileai_datasets.chat_template import ChatTemplate

    if template is None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise SchemaError(
                f"no chat template: the tokenizer ({type(tokenizer).__name__}) has none and none was given",
                hint="Pass template=ChatTemplate.shipped('qwen2_5') (or a template string / file).",
            )
        return ChatTemplate.from_tokenizer(tokenizer)
    chat = template if isinstance(template, ChatTemplate) else ChatTemplate(str(template))
    tokens = getattr(tokenizer, "special_tokens_map", None)
    if not chat.special_tokens and tokens:
        chat = ChatTemplate(chat.text, name=chat.name, special_tokens=dict(tokens), budget=chat.budget)
    return chat


@dataclass(frozen=True)
class Tokenize:
    """Render, tokenize and mask each row: ``input_ids``, ``attention_mask`` and
    ``assistant_masks`` that TRL's ``SFTTrainer`` applies.

    Args:
        tokenizer: A transformers fast tokenizer or a ``tokenizers.Tokenizer``.
        template: A ``ChatTemplate``, template text, or None for the
            tokenizer's own. Its mask method (``ChatTemplate.mask_plan()``):
            its own generation blocks, blocks added by ``with_generation()``,
            or per-turn rendering where no structural patch fits.
        max_length: Cut rows to this many tokens; the cut is counted per row
            (``tokens_truncated``, ``supervised_tokens_truncated``).
        truncation: Where a longer row is cut: ``"cut"`` (at ``max_length``), ``"whole_turns"``
            (after the last trained span that ends within ``max_length``: the longest prefix that ends on a
            complete turn, so no turn trains half written; a long agent session keeps its whole turns), or
            ``"split_turns"``: a longer row becomes several rows, split before its user turns, each repeating
            the row's leading system messages and its tools, and holding as many whole turns as fit (a piece
            still too long is cut as ``"whole_turns"`` cuts; a row with one user turn is one piece). The other
            columns are repeated on each piece; the split rows are rendered twice.
        column: The canonical messages column.
        on_bad_row: Every row's supervised text is checked against its
            messages (each loss-carrying assistant content supervised, no
            masked content supervised). ``"raise"`` (default) raises on the
            first row that fails, or that the template cannot render;
            ``"skip"`` drops it, warns with the count, and counts it in
            ``bad_rows_dropped`` (see ``mask_report``).
        keep_unsupervised: Keep the rows that have no supervised token (with
            ``num_supervised_tokens`` 0) instead of dropping them with an
            ``UnsupervisedRowsWarning``: for a report that counts them
            (``whileai_datasets.audit``), not for a trainer.
        salvage: A row the template cannot take whole (one assistant turn it refuses, or renders
            without the turn's output) trains what the template takes of it instead of being dropped
            (``row_failures.salvage_row``): parallel calls serialized into one call per turn for a template
            that takes one, a trained turn the template renders only partly kept as context (loss 0), else
            its longest prefix that ends with a loss-carrying assistant turn and passes
            (``failures.salvaged`` names each such row, its cause, the turns kept and cut and each step).
        stop_tokens: The tokens the model stops on. One the template writes
            right after a turn (GLM-4.x writes no end-of-turn marker: the model
            stops on the next opener, ``<|observation|>`` or ``<|user|>``) is
            trained with the turn. None (default): the tokenizer's eos token
            and the eos ids of the ``generation_config.json`` beside its files.
    Returns:
        The batch without the rows that have no supervised token left (unless
        ``keep_unsupervised``), plus
        ``input_ids``, ``attention_mask``, ``assistant_masks``, ``num_tokens``,
        ``num_supervised_tokens``, the two truncation counts, ``mask_method``
        and ``bad_rows_dropped``.
    Raises:
        TemplateError: a row's mask fails the check (naming the row, the
            message and the template line), or the template cannot render it.
    Example:
        >>> ds = ds.map(wai_transforms.tokenize(tok), batched=True)  # doctest: +SKIP
    """

    tokenizer: Any
    template: Any = None
    max_length: int | None = None
    column: str = "messages"
    on_bad_row: OnBadRow = "raise"
    keep_unsupervised: bool = False
    stop_tokens: tuple[str, ...] | None = None
    truncation: Truncation = "cut"
    #: called with (position in the call, the messages as the template was handed them, their loss mask,
    #: the rendered text, its supervised spans) for each row rendered: what the audit measures on the render
    #: (``views.ThinkMeasure``)
    on_render: Any = field(default=None, repr=False, compare=False)
    salvage: bool = False
    #: also find, for a row that fails, what ``salvage`` would train of it (``Failure.salvage``): the audit's
    measure_salvage: bool = field(default=False, repr=False)
    chat: Any = field(default=None, init=False, repr=False, compare=False)
    plan: MaskPlan = field(default=None, init=False, repr=False, compare=False)  # type: ignore[assignment]
    #: what the template reads (``template_input``): every row reaches it through ``template_messages``
    form: InputForm = field(default=None, init=False, repr=False, compare=False)  # type: ignore[assignment]
    encoder: PieceEncoder = field(default_factory=PieceEncoder, init=False, repr=False, compare=False)
    #: the rows of the last call the template could not render or mask, with their causes (``row_failures``)
    failures: RowFailures = field(default_factory=RowFailures, init=False, repr=False, compare=False)
    #: the rows of the last call that train but are named (``row_failures.NOTES``): a partial render, a turn
    #: run into the next
    notices: RowFailures = field(default_factory=RowFailures, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_count(self.max_length, "max_length", minimum=1)
        check_choice(self.on_bad_row, "on_bad_row", OnBadRow)
        check_flag(self.salvage, "salvage")
        check_choice(self.truncation, "truncation", Truncation)
        plan = _resolve_template(self.tokenizer, self.template).mask_plan()
        stops = model_stop_tokens(self.tokenizer, plan.probe_render()) if self.stop_tokens is None \
            else tuple(self.stop_tokens)
        plan = replace(plan, stop_tokens=stops)
        object.__setattr__(self, "plan", plan)
        object.__setattr__(self, "form", InputForm.of(plan))
        object.__setattr__(self, "chat", plan.template)

    def row_spans(self, messages: list[dict[str, Any]], tools: Any, mask: list[int],
                  row: int | None = None) -> tuple[str, list[tuple[int, int]]]:
        """One row's rendered text and supervised character spans, checked.

        Raises:
            TemplateError: the spans fail the check (see ``chat_template.mask_check``).
        """
        text, spans, _ = self.checked_spans(messages, tools, mask, row)
        return text, spans

    def checked_spans(self, messages: list[dict[str, Any]], tools: Any, mask: list[int],
                      row: int | None = None, *, shaped: bool = False) -> tuple[str, list[tuple[int, int]], str]:
        """``row_spans`` plus the method that gave them.

        A row whose generation blocks fail the check is measured again by
        per-turn rendering; that result is used (and reported as ``"turns"``)
        when it passes. ``shaped``: ``messages`` already are ``template_messages(row, plan)`` (the one
        renderer input, ``template_input``); otherwise they are made so here.
        """
        shaped_messages = messages if shaped else template_messages(messages, self.form)
        text, spans, method, _ = self._checked(shaped_messages, tools, mask, row)
        return text, spans, method

    def _checked(self, shaped: list[dict[str, Any]], tools: Any, mask: list[int], row: int | None,
                 context: frozenset[int] = frozenset()) -> tuple[str, list[tuple[int, int]], str, list[Notice]]:
        """The row's text, spans and method, and what it trains with that is not what the model wrote
        (``Notice``); ``shaped`` is the one renderer input (``template_messages``). ``context``: turns salvage
        keeps as context because the template renders them partly (named as that, not as a partial history)."""
        rerender = self.plan.rerender(tools or None)
        try:
            rendered, spans = self.plan.render_row(shaped, tools or None, mask)
        except TemplateError as err:
            return (*self._untracked(shaped, tools, mask, err, rerender), [])
        dropped = dropped_output(rendered, shaped, mask, spans_known=self.plan.tracking_exact, rerender=rerender,
                                 history=True)
        violation = check_row(rendered, shaped, mask, spans, spans_known=self.plan.tracking_exact, dropped=dropped)
        named = [d for d in dropped if d.message not in context] if context else dropped
        if violation is None:
            return rendered.text, spans, self.plan.method, row_notes(rendered, shaped, mask, named)
        if self.plan.method != "turns":
            again, turn_spans = self.plan.render_row(shaped, tools or None, mask, method="turns")
            if check_row(again, shaped, mask, turn_spans, dropped=dropped) is None:
                return again.text, turn_spans, "turns", row_notes(again, shaped, mask, named)
        error = self._violation_error(violation, shaped, tools, row)
        error.turn = violation.message  # type: ignore[attr-defined]  # what salvage adapts (``salvage_row``)
        error.partial = _partial_turns(shaped, mask, dropped)  # type: ignore[attr-defined]
        raise error

    def _untracked(self, shaped: list[dict[str, Any]], tools: Any, mask: list[int],
                   err: TemplateError, rerender: Any) -> tuple[str, list[tuple[int, int]], str]:
        """Per-turn rendering over plain renders, for a row the tracked render failed on.

        A template can trip over the span markers on one row only (it measures or
        edits captured text); a row the template itself cannot render raises ``err``.
        """
        try:
            rendered, spans = self.plan.render_row(shaped, tools or None, mask, method="turns", tracked=False)
        except TemplateError:
            raise err from None
        if check_row(rendered, shaped, mask, spans, spans_known=False, rerender=rerender) is not None:
            raise err
        return rendered.text, spans, "turns"

    def _violation_error(self, violation: Any, shaped: list[dict[str, Any]], tools: Any,
                         row: int | None) -> TemplateError:
        where = "" if row is None else f"row {row}, "
        number = violation.line
        if violation.at is not None:
            number = self.plan.content_line(shaped, tools or None, violation.at) or number
        line = f":{number}" if number else ""
        return tagged(TemplateError(
            f"{where}messages[{violation.message}] ({violation.role}): {violation.problem} "
            f"(mask method {self.plan.method!r}, and per-turn rendering does not find it either)",
            location=f"{(self.plan.original or self.plan.template).name}{line}",
            hint="The template renders this message in a way no mask method follows; report the "
                 f"template and the row, or pass {option_names.spell('on_bad_row', 'skip')} to drop such rows."),
            _DROPPED_CAUSES.get(violation.dropped or "", "mask_mismatch"))

    def rows(self, messages: list[list[dict[str, Any]]], tools: list[Any], masks: list[list[int]],
             indices: Sequence[int] | None = None, *, messages_clean: bool = False) -> list[RowMask | None]:
        """One ``RowMask`` per conversation (None: dropped under ``on_bad_row='skip'``).

        Rows are rendered in chunks; each chunk's texts are encoded on a
        background thread while the next chunk renders (``EncodeQueue``).
        ``messages_clean``: no text of ``messages`` holds a span-marker
        character (checked on the Arrow batch, ``marker_free``).
        """
        with gc_paused():
            return self._chunk_rows(list_chunks(messages, tools, masks), indices, messages_clean)

    def _chunk_rows(self, chunks: Iterable[Decoded], indices: Sequence[int] | None,
                    messages_clean: bool, shaped: bool = False) -> list[RowMask | None]:
        """``rows`` over decoded chunks: chunk k+1 is decoded and rendered while chunk k is encoded, and each
        chunk's masks are made as soon as its encoding is done. ``shaped``: the chunks' messages are
        ``template_messages`` already, their null keys dropped (``token_rows.decode_table``), so they reach the
        template as they are (``batch_inputs(messages_prepared=True)``)."""
        out: list[RowMask | None] = []
        self.failures.take()  # only this call's failures are kept
        self.failures.take_salvaged()
        self.notices.take()
        pending: deque[tuple[list[Found | None], Ticket | None]] = deque()

        def finish() -> None:
            found, ticket = pending.popleft()
            encoded = queue.result(ticket) if ticket is not None else []
            rendered = [item for item in found if item is not None]
            masks, supervised = chunk_token_masks([e[1] for e in encoded], [item[1] for item in rendered],
                                                  [len(item[0]) for item in rendered])
            made = iter(zip(encoded, masks, supervised, rendered))
            for item in found:
                if item is None:
                    out.append(None)
                    continue
                (ids, _), mask, count_, (_, _, method) = next(made)
                out.append(self._truncate(ids, mask, count_, method))

        position = 0
        with EncodeQueue(self.tokenizer, self.encoder) as queue, \
                batch_inputs(messages_clean=messages_clean, messages_prepared=shaped):
            for messages, tools, masks in chunks:
                found = [self._found(m, t, k, p, indices[p] if indices is not None else p, shaped)
                         for p, m, t, k in zip(count(position), messages, tools, masks)]
                position += len(found)
                pending.append((found, queue.submit([f[0] for f in found if f is not None])))
                while pending and (pending[0][1] is None or pending[0][1].done()):
                    finish()
            while pending:
                finish()
        if self.on_bad_row == "raise" and self.failures.items:
            raise self._failed(len(out))
        return out

    def _failed(self, total: int) -> TemplateError:
        """The error for a call whose rows failed (``on_bad_row="raise"``): the first failure, then how many
        rows of the call fail and why."""
        failures = self.failures.take()
        first = _at_row(failures[0].error, failures[0].row)
        said = summary(failures, total)
        hint = (f"{first.hint} " if first.hint else "") + (
            f"With {option_names.spell('on_bad_row', 'skip')} the other rows train; whileai_datasets.audit counts "
            "the failing rows of a whole dataset by cause.")
        error = type(first)(f"{first.problem}; {said}", location=first.location, hint=hint)
        error.__cause__ = failures[0].error.__cause__ or failures[0].error
        return error

    def _found(self, messages: list[dict[str, Any]], tools: Any, mask: list[int], position: int, row: int,
               shaped: bool) -> tuple[str, list[tuple[int, int]], str] | None:
        """``checked_spans`` of one row; None for a row the template cannot render or mask (counted in
        ``failures``; with ``on_bad_row="raise"`` the call raises once every row of it is tried)."""
        try:
            with budget_scope(self.chat.budget):  # per row: one row over the budget spoils no other
                shaped_messages = messages if shaped else template_messages(messages, self.form)
                found = self._checked(shaped_messages, tools, mask, row)
            return self._rendered(found, shaped_messages, mask, position, row)
        except RenderBudgetError as err:
            if self.on_bad_row == "raise":  # a time budget per row: stop at once rather than wait on every row
                raise _at_row(err, row) from None
            self.failures.add(position, row, err)
        except TemplateError as err:
            salvaged = self._salvage(messages, tools, mask, row, shaped, err) if self.salvage or self.measure_salvage \
                else None
            if salvaged is not None and self.salvage:
                found, given, flags, said = salvaged
                self.failures.add_salvaged(position, row, err, said)
                return self._rendered(found, given, flags, position, row)
            self.failures.add(position, row, err, None if salvaged is None else salvaged[3])
        return None

    def _rendered(self, found: tuple[str, list[tuple[int, int]], str, list[Notice]], messages: list[dict[str, Any]],
                  mask: list[int], position: int, row: int) -> Found:
        """A row's render that trains: measured (``on_render``), its notices named; as ``Found``."""
        text, spans, method, notes = found
        if self.on_render is not None:
            self.on_render(position, messages, mask, text, spans)
        for kind, said in notes:
            self.notices.add(position, row, tagged(TemplateError(f"row {row}, {said}"), kind))
        return text, spans, method

    def _salvage(self, messages: list[dict[str, Any]], tools: Any, mask: list[int], row: int, shaped: bool,
                 err: TemplateError) -> tuple[Any, list[dict[str, Any]], list[int], Salvage] | None:
        """What ``salvage`` trains of a row that fails whole (``row_failures.salvage_row``): the row adapted to
        what the template takes, or its longest prefix that passes; None where nothing of it trains."""
        given = messages if shaped else template_messages(messages, self.form)

        def check(form: list[dict[str, Any]], flags: list[int], context: frozenset[int]) -> Any:
            with budget_scope(self.chat.budget):
                return self._checked(form, tools, flags, row, context)

        return salvage_row(given, mask, err, check)

    def _truncate(self, ids: Any, mask: np.ndarray, supervised: int, method: str) -> RowMask:
        limit = self.max_length
        if limit is None or len(ids) <= limit:
            return RowMask(ids, mask, method=method, supervised=supervised)
        if self.truncation != "cut":  # after the last trained span that ends within the limit
            trained = np.asarray(mask[: limit + 1], bool)
            ends = np.flatnonzero(trained[:limit] & ~np.append(trained[1:], False)[:limit])
            limit = int(ends[-1]) + 1 if len(ends) else 0
        lost = int(mask[limit:].sum())
        return RowMask(ids[:limit], mask[:limit], len(ids) - limit, lost, method, supervised - lost)

    def _batch_rows(self, batch: Any, indices: list[int] | None) -> list[RowMask | None]:
        arrow = isinstance(batch, pa.Table)
        chunks = batch_chunks(batch, self.column, self.form, indices)
        clean = arrow and marker_free(batch.column(self.column))
        with gc_paused():
            return self._chunk_rows(chunks, indices, messages_clean=clean, shaped=arrow)

    def _split(self, batch: Any, indices: list[int] | None) -> tuple[Any, list[int] | None, list[int]]:
        """``batch`` with its rows longer than ``max_length`` split at their turns (``split_batch``), the
        dataset's indices of its rows, and the position in ``batch`` each row came from."""
        with self._rendering_to(None):
            rows = self._batch_rows(batch, indices)
            split = self._pieces(batch, rows)
        return split_batch(batch, self.column, split, indices)

    @contextmanager
    def _rendering_to(self, hook: Any) -> Iterator[None]:
        """``on_render`` replaced by ``hook`` for a while (None: renders that measure, not count), when set."""
        given = self.on_render
        if given is not None:
            object.__setattr__(self, "on_render", hook)
        try:
            yield
        finally:
            object.__setattr__(self, "on_render", given)

    def _pieces(self, batch: Any, rows: list[RowMask | None]) -> dict[int, Pieces]:
        """Where each row cut by ``max_length`` splits (``token_rows.turn_pieces``): a piece fits when its
        render, the leading messages and its turns, is at most ``max_length`` tokens."""
        long = [i for i, row in enumerate(rows) if row is not None and row.truncated_tokens]
        taken = batch.select([self.column, "loss_mask", *(["tools"] if "tools" in batch.column_names else [])]
                             ).take(pa.array(long, pa.int64())) if isinstance(batch, pa.Table) else None
        messages, tools, masks = (decode_table(taken, self.column, {}) if taken is not None else
                                  ([batch[self.column][i] for i in long], [batch.get("tools", [None] * len(rows))[i]
                                   for i in long], [batch["loss_mask"][i] for i in long]))

        def fits(row: int, head: int, start: int, end: int) -> bool:
            piece = messages[row][:head] + messages[row][start:end]
            mask = masks[row][:head] + masks[row][start:end]
            found = self._chunk_rows(list_chunks([piece], [tools[row]], [mask]), None, messages_clean=False)[0]
            return found is not None and found.truncated_tokens == 0

        return {source: turn_pieces(messages[row], lambda head, start, end, row=row: fits(row, head, start, end))
                for row, source in enumerate(long)}

    def __call__(self, batch: Any, indices: list[int] | None = None) -> Any:
        require_batched(batch, "tokenize")  # rows left with no supervised token are dropped
        check_columns(batch, self.column)
        parts = _table_with_parts(batch, self.column)
        if parts is not None:  # decoded, the column mixes text and lists: datasets could not write it back
            return with_features(self(parts, indices))
        if self.truncation == "split_turns" and self.max_length is not None:
            batch, indices, source = self._split(batch, indices)
            given = self.on_render  # counted by the position of the row a piece came from
            with self._rendering_to(lambda position, *found: given(source[position], *found)):
                rows = self._batch_rows(batch, indices)
        else:
            rows = self._batch_rows(batch, indices)
        bad = sum(row is None for row in rows)
        keep = [i for i, row in enumerate(rows) if row is not None and (self.keep_unsupervised or row.supervised > 0)]
        bad_rows_warning(bad, len(rows), indices, self.failures.items)
        salvaged_warning(self.failures.salvaged, len(rows))
        partial_warning(len(rows), self.notices.items)
        if not self.keep_unsupervised:
            dropped_warning(rows, indices)
        kept = [row for row in (rows[i] for i in keep) if row is not None]
        if isinstance(batch, pa.Table):
            table = batch.take(pa.array(keep, pa.int64())) if len(keep) != batch.num_rows else batch
            for name, array in arrow_columns(kept, bad, self.max_length).items():
                table = set_column(table, name, array)
            return table
        out: dict[str, Any] = {name: [values[i] for i in keep] for name, values in batch.items()}
        out.update(numpy_columns(kept, bad, self.max_length))
        return out


def _table_with_parts(batch: Any, column: str) -> pa.Table | None:
    """The Arrow rows under a plain-formatted ``LazyBatch`` whose messages hold content parts, else None."""
    table = getattr(batch, "pa_table", None) if type(batch).__name__ == "LazyBatch" else None
    if not isinstance(table, pa.Table) or column not in table.column_names:
        return None
    messages = _arrow.flat(table.column(column))
    return table if pa.types.is_struct(messages.type) and has_parts(messages).any() else None


def _partial_turns(shaped: list[dict[str, Any]], mask: list[int], dropped: Sequence[Any]) -> list[int]:
    """The trained turns the render keeps part of and lacks the rest of (``dropped.partly_rendered``), all of
    them at once: what salvage keeps as context (``row_failures.salvage_row``)."""
    turns = sorted({d.message for d in dropped if d.trained and mask[d.message]})
    return [turn for turn in turns if partly_rendered(shaped[turn], [d for d in dropped if d.message == turn])]


def _at_row(err: TemplateError, row: int) -> TemplateError:
    """``err`` with the row named (render failures name only the template line)."""
    if err.problem.startswith("row "):
        return err
    return type(err)(f"row {row}: {err.problem}", location=err.location, hint=err.hint)


def tokenize(tokenizer: Any, template: Any = None, max_length: int | None = None, *, column: str = "messages",
             on_bad_row: OnBadRow = "raise", keep_unsupervised: bool = False,
             stop_tokens: Sequence[str] | None = None, salvage: bool = False,
             truncation: Truncation = "cut") -> Tokenize:
    """The ``Tokenize`` transform, for ``ds.map(tokenize(tok), batched=True)``."""
    stops = None if stop_tokens is None else tuple(stop_tokens)
    return Tokenize(tokenizer, template, max_length, column, on_bad_row, keep_unsupervised, stops,
                    truncation=truncation, salvage=salvage)
