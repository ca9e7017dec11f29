"""Batched encoding with character offsets, reusing the long text between added tokens across rows.

A fast tokenizer splits its input at added tokens (``<|im_start|>``, ...) and
encodes each piece between them on its own. Chat rows repeat some long pieces:
the system prompt, the tool schemas, stock replies. So each such piece is
encoded once and the rest of a row in as few runs as those pieces leave (one
``encode_batch`` per batch); a row's ids and offsets are the concatenation of
its parts'.

That is exact only for tokenizers whose pieces really are independent (read from
the tokenizer's configuration in ``token_lengths.py``): no
normalizer but Unicode normal forms (applied piece by piece), pre-tokenizers
that split locally, added tokens that match their exact text (no
``lstrip``/``rstrip``/``single_word``/``normalized``). Anything else is
encoded whole. On top of that the first batch is also encoded whole
and compared; a difference turns the reuse off for good.

For the same tokenizers with a byte-level BPE model (GPT-2's, Llama 3's,
Qwen's), an ASCII text's offsets follow from its ids alone: every token
stands for a known number of bytes, so a token's end is the running sum of
the lengths before it. Such texts are encoded without offsets
(``encode_batch_fast``: less work in Rust, and one list of ids instead of a
list of tuples to convert under the GIL); a text whose lengths do not add up
to its own length, and every text that is not ASCII, is encoded with offsets.
The first batch's check compares these offsets too.

SentencePiece-style tokenizers as transformers converts them (Llama 2, Mistral,
Gemma: a ``Metaspace`` pre-tokenizer, or a normalizer replacing spaces with
``\u2581``; BPE with byte fallback, or Unigram) get both too. Each character of
an ASCII text is one character of a token (a space is the ``\u2581``, a
character outside the vocabulary one ``<0xNN>`` token), so offsets are running
sums of the tokens' lengths there as well; where a ``\u2581`` was prepended (the
start of a text or piece, by ``prepend_scheme``), the lengths add up to one more
than the text and that text's offsets are read from the encoder. A
``prepend_scheme="first"`` marks only a piece at the start of the whole text, so
a reused piece is encoded behind an added token (then dropped) and a piece at
the start of a text is never reused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import accumulate, chain, pairwise
from typing import Any

import numpy as np

from whileai_datasets.errors import SchemaError
from whileai_datasets.tokenize.token_lengths import byte_lengths, piece_pattern, prepend_first, shield_token

__all__ = ["EncodeJob", "Encoded", "PieceEncoder", "backend_of", "byte_lengths", "encode_texts", "piece_pattern",
           "prepend_first"]

MAX_PIECES = 20_000  # reused pieces kept (each at least REUSED_CHARS long)
#: Hashes of long pieces met once, before the set starts over: about 90 bytes each (the int and its slot), so
#: 9 MB at most. Each row of unique texts adds a few (its long user messages and tool results), so a repeat
#: is caught within some tens of thousands of rows; a cap of 1,000,000 let a long run's memory grow by ~90 MB
#: before it levelled (an audit's peak: 449 MB at 100k rows, 562 MB at 1M).
MAX_SEEN = 100_000
#: Shorter pieces are encoded within their run, never on their own: one more encoder entry and row part
#: cost more than encoding a piece this short again (a second pass over the same unique rows cost 1.1-1.4x
#: the first with 64; with 256 about the same, and a system prompt with tool schemas is still reused).
REUSED_CHARS = 256

Encoded = tuple[np.ndarray, np.ndarray]  # ids (int32), (n, 2) offsets (int64)


@dataclass(eq=False)
class _Slot:
    """A reused piece's encoding, filled in when the job that encodes it first is finished (jobs finish in
    order, so every later job that planned with the piece finds it there)."""

    encoded: Encoded | None = None


Part = tuple[int, "Encoded | _Slot | None"]  # (start in its text, a known piece, a piece on its way, or a run)


@dataclass(eq=False)
class EncodeJob:
    """One chunk of texts to encode: planned and finished on the caller's thread (``PieceEncoder.plan`` and
    ``finish``, all the Python work), run on any thread (``run``: the Rust calls alone, without the GIL).

    ``units`` are what the tokenizer encodes: the fresh pieces first (``fresh``), then the runs (or the
    texts themselves when ``rows`` is None); each goes to ``fast`` (no offsets: they follow from the ids)
    or to ``slow`` (the encoder's own offsets), at the index ``route`` gives (``~i`` for slow).
    """

    backend: Any
    fast: list[str]
    slow: list[str]
    route: list[int]
    rows: list[list[Part]] | None
    fresh: list[tuple[str, _Slot]]
    fast_out: list[Any] = field(default_factory=list)
    slow_out: list[Any] = field(default_factory=list)

    def run(self) -> EncodeJob:
        backend = self.backend
        if self.fast:  # tokenizers < 0.21 has no encode_batch_fast: its offsets are then computed, unread
            self.fast_out = getattr(backend, "encode_batch_fast", backend.encode_batch)(self.fast,
                                                                                        add_special_tokens=False)
        if self.slow:
            self.slow_out = backend.encode_batch(self.slow, add_special_tokens=False)
        return self

    def release(self) -> tuple[list[Any], list[Any]]:
        """The tokenizer's encodings, handed over (the job keeps none), once ``finish`` has read them."""
        spent = self.fast_out, self.slow_out
        self.fast_out, self.slow_out = [], []
        return spent


class PieceEncoder:
    """Encodes texts through a ``tokenizers.Tokenizer``, each long repeated piece once.

    A text is cut into pieces at the added tokens. A piece of at least
    ``REUSED_CHARS`` characters met a second time (the system prompt, the tool
    schemas, a stock reply) is encoded on its own once and reused from then on;
    everything between such pieces, the short pieces included (role headers,
    the added tokens themselves), is encoded as one run. So a row costs one
    ``encode_batch`` entry per run, not per piece, whatever the template's
    number of turns: the Python-side work per row stays small while the Rust
    encoder (which runs without the GIL) does the rest.

    ``encode`` does it all at once; ``plan``, ``EncodeJob.run`` and ``finish``
    are its three steps, for a caller that runs the middle one on another
    thread (``EncodeQueue``). Not thread-safe: ``plan`` and ``finish`` belong to
    one thread, and jobs are finished in the order they were planned.

    Pickles as an empty encoder (so ``datasets`` hashes a transform holding
    it the same before and after use); it rebuilds itself on first use.
    """

    def __init__(self) -> None:
        self._backend: Any = None
        self._pattern: re.Pattern[str] | None = None
        self._pieces: dict[str, Encoded] = {}
        self._pending: dict[str, _Slot] = {}  # pieces planned in a job not finished yet
        self._seen: set[int] = set()  # hashes of the long pieces met once
        self._lengths: np.ndarray | None = None  # characters per token id: offsets from the ids
        self._shield: str | None = None  # an added token that keeps a reused piece off offset 0 (prepend "first")
        self._verified = False

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def checked(self, backend: Any) -> bool:
        """Whether ``backend``'s first batch has been checked (until then, ``encode`` every batch whole)."""
        return backend is self._backend and (self._verified or self._pattern is None)

    def forget_pending(self) -> None:
        """Drop the pieces of jobs that will not be finished (their batch failed)."""
        self._pending.clear()

    def _settle(self, backend: Any) -> None:
        if backend is self._backend:
            return
        self.__init__()  # type: ignore[misc]
        self._backend, self._pattern, self._lengths = backend, piece_pattern(backend), byte_lengths(backend)
        self._shield = shield_token(backend) if self._pattern is not None and prepend_first(backend) else None
        if self._pattern is not None and prepend_first(backend) and self._shield is None:
            self._pattern = None

    def encode(self, backend: Any, texts: list[str]) -> list[Encoded]:
        """(ids, offsets) of each text; the first batch is also encoded whole and compared (``verify``)."""
        out = self.finish(self.plan(backend, texts).run())
        return out if self._verified or self._pattern is None else self._verify(texts, out)

    def _verify(self, texts: list[str], out: list[Encoded]) -> list[Encoded]:
        """The first batch: pieces (and offsets from lengths) against whole encodes; a difference turns the
        lengths off, then the pieces."""
        whole = [_as_arrays(e) for e in self._backend.encode_batch(texts, add_special_tokens=False)]
        same = all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(out, whole))
        if not same and self._lengths is not None:  # the pieces may hold: try them with the encoder's offsets
            self._lengths = None
            self._pieces.clear()
            self._pending.clear()
            out = self.finish(self.plan(self._backend, texts).run())
            same = all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(out, whole))
        self._verified, self._pattern = True, (self._pattern if same else None)
        return whole

    def plan(self, backend: Any, texts: list[str]) -> EncodeJob:
        """The job that encodes ``texts``: cut into reused pieces and runs (the pieces met a second time are
        encoded in it first)."""
        self._settle(backend)
        if self._pattern is None:
            return EncodeJob(backend, [], list(texts), [~i for i in range(len(texts))], None, [])
        if len(self._pieces) > MAX_PIECES:
            self._pieces.clear()
        if len(self._seen) > MAX_SEEN:
            self._seen.clear()
        fresh: dict[str, _Slot] = {}
        runs: list[str] = []
        rows = [self._parts(text, fresh, runs) for text in texts]
        shield = self._shield
        units = [shield + piece for piece in fresh] if shield is not None else list(fresh)
        fast: list[str] = []
        slow: list[str] = []
        route = []
        by_lengths = self._lengths is not None
        for unit in chain(units, runs):
            if by_lengths and unit.isascii():  # one character per byte
                route.append(len(fast))
                fast.append(unit)
            else:
                route.append(~len(slow))
                slow.append(unit)
        return EncodeJob(backend, fast, slow, route, rows, list(fresh.items()))

    def _parts(self, text: str, fresh: dict[str, _Slot], runs: list[str]) -> list[Part]:
        """``text`` as parts (see ``Part``); its runs go to ``runs``, the pieces met a second time to ``fresh``."""
        assert self._pattern is not None
        known, pending, seen = self._pieces, self._pending, self._seen
        parts: list[Part] = []
        run = 0  # where the current run started
        pieces = self._pattern.split(text)  # text, added token, text, ..., text: the pattern captures the tokens
        ends = list(accumulate(map(len, pieces)))
        shielded = self._shield is not None
        for k in range(0, len(pieces), 2):  # the text between two added tokens
            piece = pieces[k]
            if len(piece) < REUSED_CHARS:
                continue
            end = ends[k]
            start = end - len(piece)
            if shielded and start == 0:
                continue
            ref: Encoded | _Slot | None = known.get(piece)
            if ref is None:
                ref = pending.get(piece)
            if ref is None:
                key = hash(piece)
                if key not in seen:
                    seen.add(key)
                    continue
                ref = pending[piece] = fresh[piece] = _Slot()
            if start > run:
                parts.append((run, None))
                runs.append(text[run:start])
            parts.append((start, ref))
            run = end
        if run < len(text) or not parts:
            parts.append((run, None))
            runs.append(text[run:])
        return parts

    def finish(self, job: EncodeJob) -> list[Encoded]:
        """Each text's (ids, offsets) from its job's encodings (run); the job's fresh pieces are kept."""
        fast = self._fast_arrays(job) if job.fast else []
        slow = [_as_arrays(e) for e in job.slow_out]
        encoded = [fast[i] if i >= 0 else slow[~i] for i in job.route]
        if job.rows is None:
            return encoded
        shield = len(self._shield) if self._shield is not None else 0
        for (piece, slot), (ids, offsets) in zip(job.fresh, encoded):
            if shield:  # encoded behind the shield, which is dropped
                ids, offsets = ids[1:], offsets[1:] - shield
            slot.encoded = self._pieces[piece] = ids.copy(), offsets.copy()  # not views: pins no batch's arrays
            self._pending.pop(piece, None)
        ran = iter(encoded[len(job.fresh):])
        return _join_rows([[(start, next(ran) if ref is None else ref.encoded if type(ref) is _Slot else ref)
                            for start, ref in row] for row in job.rows])  # type: ignore[misc]

    def _fast_arrays(self, job: EncodeJob) -> list[Encoded]:
        """The fast units' arrays; a unit whose lengths do not spell it is encoded again with offsets."""
        assert self._lengths is not None
        out = _offsets_from_lengths(self._lengths, job.fast, job.fast_out)
        rest = [i for i, item in enumerate(out) if item is None]
        for i, encoding in zip(rest, job.backend.encode_batch([job.fast[i] for i in rest], add_special_tokens=False)):
            out[i] = _as_arrays(encoding)
        return out  # type: ignore[return-value]


def _offsets_from_lengths(lengths: np.ndarray, texts: list[str], encodings: list[Any]) -> list[Encoded | None]:
    """Each text's ids and offsets (running sums of its tokens' lengths), or None where the lengths do not
    spell the text (a token of unknown length, a mark the tokenizer prepended). All texts at once: one
    array of every id, so the numpy calls are per batch, not per text."""
    counts = np.fromiter(map(len, encodings), np.int64, len(encodings))
    ids = np.fromiter(chain.from_iterable(e.ids for e in encodings), np.int32, int(counts.sum()))
    sizes = lengths[ids]
    bounds = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=bounds[1:])
    ends = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(sizes, out=ends[1:])
    unknown = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(sizes <= 0, out=unknown[1:])
    spelled = np.diff(ends[bounds]) == np.fromiter(map(len, texts), np.int64, len(texts))
    good = (spelled & (np.diff(unknown[bounds]) == 0)).tolist()
    starts = ends[:-1] - np.repeat(ends[bounds[:-1]], counts)  # each token's start within its own text
    offsets = np.stack((starts, starts + sizes), axis=1)
    edges = bounds.tolist()
    return [(ids[a:b], offsets[a:b]) if ok else None for (a, b), ok in zip(pairwise(edges), good)]


def _join_rows(rows: list[list[tuple[int, Encoded]]]) -> list[Encoded]:
    """Each row's parts ((start, (ids, offsets)) in text order) as one (ids, offsets), the offsets moved by
    their part's start: one concatenation for all rows, each row's result a view of it."""
    parts = [part for row in rows for part in row]
    if not parts:
        return [(np.zeros(0, np.int32), np.zeros((0, 2), np.int64)) for _ in rows]
    sizes = np.fromiter((len(e[0]) for _, e in parts), np.int64, len(parts))
    ids = np.concatenate([e[0] for _, e in parts]).astype(np.int32, copy=False)
    shift = np.repeat(np.fromiter((start for start, _ in parts), np.int64, len(parts)), sizes)
    offsets = np.concatenate([e[1] for _, e in parts]).reshape(-1, 2) + shift[:, None]
    part_edges = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(sizes, out=part_edges[1:])
    edges = part_edges[np.cumsum([0] + [len(row) for row in rows])].tolist()
    return [(ids[a:b], offsets[a:b]) for a, b in pairwise(edges)]


def _as_arrays(encoding: Any) -> Encoded:
    ids = encoding.ids
    # the (start, end) tuples read flat: a third of the time np.array spends taking the nested list apart
    offsets = np.fromiter(chain.from_iterable(encoding.offsets), np.int64, 2 * len(ids))
    return np.fromiter(ids, np.int32, len(ids)), offsets.reshape(-1, 2)


def encode_texts(tokenizer: Any, texts: list[str], encoder: PieceEncoder | None = None) -> list[tuple[Any, np.ndarray]]:
    """(ids, (n, 2) character offsets) per text, in one batched call. Takes a
    transformers fast tokenizer or a ``tokenizers.Tokenizer``; ``encoder``
    reuses the pieces between added tokens across rows (``token_encode.py``)."""
    backend = backend_of(tokenizer)
    if backend is not None:
        return (encoder or PieceEncoder()).encode(backend, texts)
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


def backend_of(tokenizer: Any) -> Any:
    """The ``tokenizers.Tokenizer`` to call directly: a raw one, or a transformers fast tokenizer's
    backend when it has no truncation or padding of its own (transformers would turn them off per call)."""
    if hasattr(tokenizer, "encode_batch") and not hasattr(tokenizer, "apply_chat_template"):
        return tokenizer
    backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    if backend is None or backend.truncation is not None or backend.padding is not None:
        return None
    return backend
