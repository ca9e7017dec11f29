"""Rows a trainer cannot train exactly as marked, found column-wise, per trainer and per shape.

Nothing here changes or drops a row: the configs hold every row as it is, and this report says
which of them a given trainer will read differently (found by reading each trainer's pinned
release: LLaMA-Factory 0.9.5 ``data/converter.py`` / ``formatter.py``, ms-swift 4.6
``template/base.py``, axolotl 0.19 ``prompt_strategies/chat_template.py``):

* LLaMA-Factory (``sharegpt``; counted in its rows, one per marked turn): its sharegpt converter
  needs strict alternation (user or observation, then gpt or function_call) and skips, with only
  a warning, a row with two assistant turns in a row or any other break (a user message after a
  user message, a system message after the first, a conversation that opens with the model);
  text written beside tool calls is rendered directly before LLaMA-Factory's own tool-call format
  (Qwen2.5's and Qwen3's templates put a newline between, Llama 3.1's leaves the text out; measured
  in tests/trainers); reasoning and content parts are not carried.
* ms-swift (``messages``; counted in conversations): two assistant turns in a row are merged
  into one with no separator, and text beside a tool call is rendered without the newline
  Qwen2.5's template writes before ``<tool_call>`` (its hermes agent template adds none).
* axolotl (``messages``): an empty marked assistant turn (no text, no tool calls) spans no
  tokens in its render diff, so nothing of it is trained, not even its end-of-turn token.

``chunk_gaps(canonical, where, offset=0)`` counts one chunk; ``merge_gaps`` adds chunks up;
``shift_rows`` moves a chunk's locations once its place in the split is known; ``gap_facts``
gives the same counts as flat integers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from whileai_datasets.columnar import _arrow
from whileai_datasets.hub.trainer_formats import marked_messages, merged_turns, rows_with_marks

LLAMA_FACTORY, MS_SWIFT, AXOLOTL = "llama-factory", "ms-swift", "axolotl"
#: Per trainer, each shape it cannot express exactly and what the trainer does with it.
EFFECTS: dict[str, dict[str, str]] = {
    LLAMA_FACTORY: {
        "consecutive_assistant_turns": "two assistant turns in a row: LLaMA-Factory skips the row (strict "
                                       "alternation) with only a warning, so that turn is not trained",
        "broken_alternation": "another break of user/assistant alternation (two user messages in a row, a system "
                              "message after the first, a conversation that opens with the model): LLaMA-Factory "
                              "skips the row with only a warning",
        "text_beside_tool_call": "text beside tool calls: LLaMA-Factory renders (and trains) it directly before "
                                 "its own tool-call format, unlike the model's chat template (Qwen2.5's and "
                                 "Qwen3's put a newline between, Llama 3.1's leaves the text out)",
        "reasoning_content": "reasoning_content is not carried: LLaMA-Factory reads reasoning only inline, "
                             "in its template's own thought words",
        "content_parts": "content parts (images, other media): only the message text is carried",
    },
    MS_SWIFT: {
        "consecutive_assistant_turns": "two assistant turns in a row: ms-swift merges them into one turn with "
                                       "no separator (no end-of-turn between them)",
        "text_beside_tool_call": "text beside a tool call: ms-swift renders it without the newline Qwen2.5's "
                                 "chat template writes before <tool_call>",
    },
    AXOLOTL: {
        "empty_marked_turn": "an empty marked assistant turn (no text, no tool calls): axolotl trains nothing "
                             "of it, not even its end-of-turn token",
    },
}
#: The config each trainer reads, and what one counted row is.
TRAINER_CONFIGS = {LLAMA_FACTORY: ("sharegpt", "rows (one per marked turn)"),
                   MS_SWIFT: ("messages", "conversations"), AXOLOTL: ("messages", "conversations")}


class _Chunk:
    """The per-message columns every check reads, computed once per chunk."""

    def __init__(self, canonical: pa.Table, where: str, offset: int) -> None:
        self.where, self.offset = where, offset
        self.lists = _arrow.message_column(canonical, "messages")
        self.flat = _arrow.flat(self.lists)
        self.parent = _arrow.parents(self.lists)
        self.starts = _arrow.offsets_of(_arrow.lengths(self.lists))[:-1]
        self.position = np.arange(len(self.flat), dtype=np.int64) - self.starts[self.parent]
        self.marked = marked_messages(canonical, where)
        self.trained_row = rows_with_marks(canonical, self.marked) > 0
        role = pc.struct_field(self.flat, "role")
        self.assistant = _arrow.to_numpy_bool(pc.equal(role, "assistant"))
        self.system = _arrow.to_numpy_bool(pc.equal(role, "system"))
        self.calls = np.asarray(pc.fill_null(pc.list_value_length(pc.struct_field(self.flat, "tool_calls")), 0))
        content = pc.struct_field(self.flat, "content")
        self.text = _arrow.to_numpy_bool(pc.greater(pc.fill_null(pc.utf8_length(content), 0), 0))
        self.reasoning = self._present("reasoning_content")
        self.parts = self._present("parts")

    def _present(self, name: str) -> np.ndarray:
        if name not in self.flat.type.names:
            return np.zeros(len(self.flat), dtype=bool)
        return ~_arrow.null_mask(pc.struct_field(self.flat, name))

    def after_same(self, flags: np.ndarray) -> np.ndarray:
        """Messages flagged whose previous message in the same row is flagged too."""
        out = np.zeros(len(flags), dtype=bool)
        out[1:] = flags[1:] & flags[:-1] & (self.position[1:] > 0)
        return out

    def location(self, message: int) -> str:
        row = int(self.parent[message])
        return f"{self.where}, row {self.offset + row}, messages[{int(self.position[message])}]"


def chunk_gaps(canonical: pa.Table, where: str, *, offset: int = 0) -> dict[str, dict[str, dict[str, Any]]]:
    """Per trainer, per shape: how many of the trainer's rows have it (``rows``) and the first
    one's location (``first``, None when none), for one chunk of canonical rows. ``offset`` is
    the chunk's first row in its split, for the locations."""
    chunk = _Chunk(canonical, where, offset)
    beside = chunk.assistant & chunk.text & (chunk.calls > 0)
    doubled = chunk.after_same(chunk.assistant)
    empty = chunk.marked & ~chunk.text & (chunk.calls == 0) & ~chunk.reasoning & ~chunk.parts
    conversation = {"consecutive_assistant_turns": doubled, "text_beside_tool_call": beside}
    return {
        LLAMA_FACTORY: _sharegpt_gaps(chunk, {**conversation, "reasoning_content": chunk.reasoning,
                                              "content_parts": chunk.parts}),
        MS_SWIFT: {name: _by_conversation(chunk, flags) for name, flags in conversation.items()},
        AXOLOTL: {"empty_marked_turn": _by_conversation(chunk, empty)},
    }


def _by_conversation(chunk: _Chunk, flags: np.ndarray) -> dict[str, Any]:
    """Conversations of the ``messages`` config (rows with a marked turn) with a flagged message."""
    hits = np.flatnonzero(flags & chunk.trained_row[chunk.parent])
    rows = np.unique(chunk.parent[hits])
    return {"rows": len(rows), "first": chunk.location(int(hits[0])) if len(hits) else None}


def _sharegpt_gaps(chunk: _Chunk, flags: Mapping[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """Sharegpt rows (one per marked turn: its history up to it) holding a flagged message, and
    rows whose merged turns break LLaMA-Factory's alternation (a row with two assistant turns in
    a row counts there, not again as another break)."""
    turn = np.flatnonzero(chunk.marked)
    begin = chunk.starts[chunk.parent[turn]]
    doubled, broken = _alternation(chunk)
    out = {name: _span_hits(chunk, flagged, begin, turn) for name, flagged in flags.items()
           if name != "consecutive_assistant_turns"}
    out["consecutive_assistant_turns"] = _span_hits(chunk, doubled, begin, turn)
    out["broken_alternation"] = _span_hits(chunk, broken, begin, turn, unless=doubled)
    return {name: out[name] for name in EFFECTS[LLAMA_FACTORY]}


def _span_hits(chunk: _Chunk, flags: np.ndarray, begin: np.ndarray, end: np.ndarray,
               unless: np.ndarray | None = None) -> dict[str, Any]:
    """How many spans ``[begin, end]`` of messages hold a flagged one (and none flagged
    ``unless``), and where the first such message is."""
    hit = _span_count(flags, begin, end) > 0
    if unless is not None:
        hit &= _span_count(unless, begin, end) == 0
    if not hit.any():
        return {"rows": 0, "first": None}
    first = int(np.argmax(hit))
    at = int(begin[first] + np.argmax(flags[begin[first]:end[first] + 1]))
    return {"rows": int(hit.sum()), "first": chunk.location(at)}


def _span_count(flags: np.ndarray, begin: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per span ``[begin, end]``: how many of its messages are flagged."""
    total = np.concatenate([[0], np.cumsum(flags, dtype=np.int64)])
    counts: np.ndarray = total[end + 1] - total[begin]
    return counts


def _alternation(chunk: _Chunk) -> tuple[np.ndarray, np.ndarray]:
    """Per message: it is a second assistant turn in a row; it otherwise breaks the alternation
    LLaMA-Factory's sharegpt converter checks on the merged turns (each flag on the message that
    opens the offending turn)."""
    leading = chunk.system & (chunk.position == 0)
    turns = merged_turns(chunk.flat, chunk.parent, chunk.position, leading)
    tags = turns.values.field("from")
    response = _arrow.to_numpy_bool(pc.is_in(tags, pa.array(["gpt", "function_call"])))
    prompt = _arrow.to_numpy_bool(pc.is_in(tags, pa.array(["human", "observation"])))
    turn_row = np.repeat(np.arange(len(turns.row_start)), np.diff(np.append(turns.row_start, len(tags))))
    slot = np.arange(len(tags)) - turns.row_start[turn_row] if len(tags) else np.zeros(0, np.int64)
    wrong = np.where(slot % 2 == 0, ~prompt, ~response)
    twice = np.zeros(len(tags), dtype=bool)
    twice[1:] = response[1:] & response[:-1] & (slot[1:] > 0)
    opener = np.full(len(tags), -1, dtype=np.int64)
    kept = np.flatnonzero(~leading)
    first_of_turn = kept[np.append(True, turns.index[kept][1:] != turns.index[kept][:-1])] if len(kept) else kept
    opener[turns.index[first_of_turn]] = first_of_turn
    doubled = np.zeros(len(chunk.flat), dtype=bool)
    broken = np.zeros(len(chunk.flat), dtype=bool)
    doubled[opener[twice]] = True
    broken[opener[wrong & ~twice]] = True
    return doubled, broken


def gap_facts(built: pa.Table, source: pa.Table) -> dict[str, int]:
    """``chunk_gaps`` of the canonical chunk as flat counts ("trainer/shape" -> rows), for a publisher
    that sums per-chunk integer facts (locations need ``chunk_gaps`` with the chunk's offset)."""
    found = chunk_gaps(source, "chunk")
    return {f"{trainer}/{shape}": hit["rows"] for trainer, shapes in found.items() for shape, hit in shapes.items()}


def shift_rows(gaps: Mapping[str, Mapping[str, Mapping[str, Any]]], by: int) -> dict[str, dict[str, dict[str, Any]]]:
    """``chunk_gaps`` of a chunk measured with ``offset=0``, its locations moved ``by`` rows: for a
    chunk whose first row in its split is known only after it was measured (a Ray block)."""
    return {trainer: {shape: {**hit, "first": _shifted(hit["first"], by)} for shape, hit in shapes.items()}
            for trainer, shapes in gaps.items()}


def _shifted(location: str | None, by: int) -> str | None:
    """A ``_Chunk.location`` with its row number (the last ", row N," in it) moved ``by`` rows."""
    if location is None or not by:
        return location
    head, marker, tail = location.rpartition(", row ")
    row, rest = tail.split(",", 1)
    return f"{head}{marker}{int(row) + by},{rest}"


def merge_gaps(parts: Iterable[Mapping[str, Mapping[str, Mapping[str, Any]]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Chunks' (or splits') gaps added up: counts summed, the first location kept."""
    merged: dict[str, dict[str, dict[str, Any]]] = {
        trainer: {shape: {"rows": 0, "first": None} for shape in shapes} for trainer, shapes in EFFECTS.items()}
    for part in parts:
        for trainer, shapes in part.items():
            for shape, found in shapes.items():
                into = merged[trainer][shape]
                into["rows"] += int(found["rows"])
                into["first"] = into["first"] or found["first"]
    return merged


def trainer_report(gaps: Mapping[str, Mapping[str, Mapping[str, Any]]],
                   rows: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """What publish returns (and ``--json`` prints) per trainer: the config, its rows, and each shape
    found with its count, first location and effect. ``rows`` is rows per config name."""
    report = {}
    for trainer, (config, unit) in TRAINER_CONFIGS.items():
        found = {shape: {**hit, "effect": EFFECTS[trainer][shape]}
                 for shape, hit in gaps[trainer].items() if hit["rows"]}
        report[trainer] = {"config": config, "rows": int(rows.get(config, 0)), "unit": unit,
                           "exact": not found, "inexact": found}
    return report
