"""A row as a person reads it: its rendered text in runs of trained and untrained characters.

``show-mask`` prints one such view and the audit's HTML report shows its worst rows the same
way, so both are built here, from the same spans and token offsets ``tokenize`` trains on: a
character is trained when a supervised token covers it, and where ``max_length`` cuts the row,
``cut`` is the first character the trainer never sees.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa

from whileai_datasets import option_names
from whileai_datasets.tokenize.long_values import cap_untrained, reach_chars
from whileai_datasets.tokenize.token_encode import encode_texts
from whileai_datasets.tokenize.token_masks import Tokenize, spans_to_token_mask
from whileai_datasets.tokenize.token_rows import decode_table

__all__ = ["MaskView", "ThinkMeasure", "mask_view", "table_views", "think_in_render"]

#: A think block of a message's content: its inner text (to the end of the content when it is not closed).
_THINK_BLOCK = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.IGNORECASE | re.DOTALL)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
GREEN, DIM, RED, RESET = "\x1b[30;42m", "\x1b[2m", "\x1b[31m", "\x1b[0m"
#: Where a view marks the ``max_length`` cut.
CUT_MARK = "✂ max_length"
#: A run longer than this is shown by its ends (a 5 MB tool output is not printed whole).
LONG_RUN = 4000
_ENDS = 800


def shown(text: str) -> str:
    """``text``, or its two ends around a note of what is left out when it is longer than ``LONG_RUN``."""
    if len(text) <= LONG_RUN:
        return text
    left = len(text) - 2 * _ENDS
    return (f"{text[:_ENDS]}\n[... {left:,} characters not shown; a tool output this long can be cut before "
            f"training with {cap_option()} ...]\n{text[-_ENDS:]}")


def cap_option() -> str:
    """The tool-output cap as the user passes it here (``--max-tool-output-chars N`` in the command line)."""
    return option_names.spell("max_tool_output_chars") + (" N" if option_names.in_command_line() else "N")


@dataclass
class MaskView:
    """A rendered row as runs of (text, supervised), its counts, and where ``max_length`` cuts it.

    ``tokens`` and ``supervised`` count what the trainer sees (after the cut); ``cut`` is the
    character offset of the first token past ``max_length`` (None when the row fits), and
    ``supervised_cut`` the supervised tokens the cut drops.
    """

    runs: list[tuple[str, bool]]
    tokens: int
    supervised: int
    cut: int | None = None
    tokens_cut: int = 0
    supervised_cut: int = 0
    #: characters of an untrained content past what ``max_length`` can reach, not read (``long_values``)
    unread: int = 0

    def pieces(self) -> list[tuple[str, bool, bool]]:
        """(text, supervised, past the cut) runs: the runs split at ``cut``."""
        out: list[tuple[str, bool, bool]] = []
        at = 0
        for text, sup in self.runs:
            end = at + len(text)
            if self.cut is not None and at < self.cut < end:
                out += [(text[: self.cut - at], sup, False), (text[self.cut - at:], sup, True)]
            else:
                out.append((text, sup, self.cut is not None and at >= self.cut))
            at = end
        return out

    def terminal(self, colour: bool = True) -> str:
        parts: list[str] = []
        for text, sup, lost in self.pieces():
            if lost and (not parts or not parts[-1].startswith("\n" + CUT_MARK)):
                parts.append(f"\n{CUT_MARK} (the trainer sees nothing below)\n")
            text = shown(text)
            if not colour:
                parts.append(f"[[{text}]]" if sup and not lost else text)
            else:
                parts.append(f"{RED if lost else GREEN if sup else DIM}{text}{RESET}")
        return "".join(parts)

    def html_fragment(self) -> str:
        """The runs as ``<span>``s (``sup`` trained, ``ctx`` context, ``cut`` past ``max_length``)."""
        parts: list[str] = []
        for text, sup, lost in self.pieces():
            if lost and not any('class="cutmark"' in p for p in parts):
                parts.append(f'<span class="cutmark">{html.escape(CUT_MARK)}</span>')
            kind = "cut" if lost else "sup" if sup else "ctx"
            parts.append(f'<span class="{kind}">{html.escape(shown(text))}</span>')
        return f"<pre>{''.join(parts)}</pre>"

    def summary(self) -> str:
        share = self.supervised / self.tokens if self.tokens else 0.0
        text = (f"{self.tokens} tokens, {self.supervised} supervised ({share:.0%}); "
                f"the naive messages route would train all {self.tokens}")
        if self.cut is not None:
            text += f"; max_length cut {self.tokens_cut} tokens ({self.supervised_cut} supervised)"
        if self.unread:
            text += (f"; {self.unread:,} characters of an untrained value past max_length's reach were not read "
                     f"(not counted in the cut; training still encodes them: cap them with {cap_option()})")
        return text


VIEW_CSS = ("body{font-family:ui-monospace,monospace} pre{white-space:pre-wrap}"
            ".sup{background:#b7f5c4} .ctx{color:#777} .cut{color:#b00;text-decoration:line-through}"
            ".cutmark{display:block;color:#b00;font-weight:bold;margin:.3em 0}")


def _view(text: str, spans: list[tuple[int, int]], ids: Any, offsets: np.ndarray,
          max_length: int | None) -> MaskView:
    mask = spans_to_token_mask(offsets, spans)
    trained = offsets[np.asarray(mask, dtype=bool)]  # a character is trained when a trained token covers it
    depth = np.zeros(len(text) + 1, dtype=np.int64)
    np.add.at(depth, trained[:, 0], 1)
    np.add.at(depth, trained[:, 1], -1)
    chars = np.cumsum(depth[:-1]) > 0
    runs: list[tuple[str, bool]] = []
    if len(text):
        edges = np.flatnonzero(np.diff(chars.astype(np.int8))) + 1
        bounds = [0, *edges.tolist(), len(text)]
        runs = [(text[a:b], bool(chars[a])) for a, b in pairwise(bounds)]
    total, supervised = len(ids), int(mask.sum())
    if max_length is None or total <= max_length:
        return MaskView(runs, total, supervised)
    kept = int(mask[:max_length].sum())
    return MaskView(runs, max_length, kept, cut=int(offsets[max_length][0]), tokens_cut=total - max_length,
                    supervised_cut=supervised - kept)


def mask_view(transform: Tokenize, row: dict[str, Any], max_length: int | None = None) -> MaskView:
    """The runs of supervised and unsupervised text of one canonical row (a ``ds[i]`` dict)."""
    text, spans = transform.row_spans(row["messages"], row.get("tools") or None, row["loss_mask"])
    (ids, offsets), = encode_texts(transform.tokenizer, [text])
    return _view(text, spans, ids, offsets, max_length)


def table_views(transform: Tokenize, table: pa.Table, max_length: int | None = None) -> list[MaskView]:
    """One view per row of an Arrow table of canonical rows (``messages``, ``tools``, ``loss_mask``), each row
    rendered and checked as ``tokenize`` does it, row by row (``Tokenize._found``): with ``transform.salvage``, a
    row the template cannot take whole shows the prefix it trains, and ``transform.failures.salvaged`` names it
    (by its position in ``table``).

    Raises:
        TemplateError: the template cannot render or mask a row (and salvage trains no prefix of it).
    """
    table, unread = cap_untrained(table, reach_chars(transform.tokenizer, max_length))  # what trains is the same
    messages, tools, masks = decode_table(table, "messages", {})
    transform.failures.take()
    transform.failures.take_salvaged()
    found = []
    for position, (m, t, k) in enumerate(zip(messages, tools, masks)):
        spans = transform._found(m, t or None, k, position, position, False)
        if spans is None:
            raise transform.failures.take()[-1].error
        found.append(spans[:2])
    encoded = encode_texts(transform.tokenizer, [text for text, _ in found])
    return [replace(_view(text, spans, ids, offsets, max_length), unread=int(n))
            for (text, spans), (ids, offsets), n in zip(found, encoded, unread)]


def think_in_render(messages: Sequence[dict[str, Any]], mask: Sequence[int], text: str,
                    spans: Sequence[tuple[int, int]]) -> tuple[int, int, int]:
    """What of a row's ``<think>`` blocks trains, measured on its render, not on an option: (assistant
    messages with a think block, those whose every block is inside a supervised span, those that lose a
    block: left out of the render, or rendered untrained in a turn whose ``loss_mask`` is 1). ``messages``
    are as the template was handed them; a block with nothing inside is not looked for."""
    holding = trained = lost = 0
    cursor = 0
    for message, flag in zip(messages, mask):
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, str) or not _THINK_OPEN.search(content):
            continue
        inner = [found.strip() for found in _THINK_BLOCK.findall(content)]
        if not inner:
            continue
        holding += 1
        states = []
        for piece in (piece for piece in inner if piece):
            at = text.find(piece, cursor)
            at = text.find(piece) if at < 0 else at
            if at < 0:
                states.append("missing")
                continue
            cursor = at + len(piece)
            inside = any(start <= at and cursor <= end for start, end in spans)
            states.append("trained" if inside else "context")
        if states and all(state == "trained" for state in states):
            trained += 1
        elif "missing" in states or (flag and "context" in states):
            lost += 1
    return holding, trained, lost


@dataclass
class ThinkMeasure:
    """``Tokenize(on_render=...)``: per row of a call, ``think_in_render`` of its render, by its position."""

    found: dict[int, tuple[int, int, int]] = field(default_factory=dict)

    def __call__(self, position: int, messages: Sequence[dict[str, Any]], mask: Sequence[int], text: str,
                 spans: Sequence[tuple[int, int]]) -> None:
        if _THINK_OPEN.search(text):
            counts = think_in_render(messages, mask, text, spans)
            if counts[0]:  # a row split into pieces (``truncation="split_turns"``) adds up its pieces' counts
                before = self.found.get(position, (0, 0, 0))
                self.found[position] = tuple(a + b for a, b in zip(before, counts))  # type: ignore[assignment]

    def take(self, rows: int) -> np.ndarray:
        """The counts of the last call's ``rows`` rows (rows not rendered: zeros), one row each, and forget them."""
        out = np.zeros((rows, 3), dtype=np.int64)
        for position, counts in self.found.items():
            out[position] = counts
        self.found = {}
        return out
