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
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import accumulate, chain, pairwise
from types import TracebackType
from typing import Any

import numpy as np

from whileai_datasets.errors import SchemaError
from whileai_datasets.tokenize.token_lengths import byte_lengths, piece_pattern, prepend_first, shield_token

__all__ = ["EncodeQueue", "Encoded", "PieceEncoder", "backend_of", "byte_lengths", "encode_texts", "piece_pattern",
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

    Pickles as an empty encoder (so ``datasets`` hashes a transform holding
    it the same before and after use); it rebuilds itself on first use.
    """

    def __init__(self) -> None:
        self._backend: Any = None
        self._pattern: re.Pattern[str] | None = None
        self._pieces: dict[str, Encoded] = {}
        self._seen: set[int] = set()  # hashes of the long pieces met once
        self._lengths: np.ndarray | None = None  # characters per token id: offsets from the ids
        self._shield: str | None = None  # an added token that keeps a reused piece off offset 0 (prepend "first")
        self._verified = False

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def encode(self, backend: Any, texts: list[str]) -> list[Encoded]:
        if backend is not self._backend:
            self.__init__()  # type: ignore[misc]
            self._backend, self._pattern, self._lengths = backend, piece_pattern(backend), byte_lengths(backend)
            self._shield = shield_token(backend) if self._pattern is not None and prepend_first(backend) else None
            if self._pattern is not None and prepend_first(backend) and self._shield is None:
                self._pattern = None
        if self._pattern is None:
            return [_as_arrays(e) for e in backend.encode_batch(texts, add_special_tokens=False)]
        out = self._by_pieces(texts)
        if not self._verified:
            whole = [_as_arrays(e) for e in backend.encode_batch(texts, add_special_tokens=False)]
            same = all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(out, whole))
            if not same and self._lengths is not None:  # the pieces may hold: try them with the encoder's offsets
                self._lengths = None
                self._pieces.clear()
                out = self._by_pieces(texts)
                same = all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(out, whole))
            self._verified, self._pattern = True, (self._pattern if same else None)
            return whole
        return out

    def _segments(self, text: str, fresh: dict[str, None]) -> list[tuple[int, str | None, int]]:
        """``text`` as (start, reused piece, 0) and (start, None, end) runs to encode; repeats go to ``fresh``."""
        assert self._pattern is not None
        known, seen = self._pieces, self._seen
        segments: list[tuple[int, str | None, int]] = []
        run = 0  # where the current run started
        parts = self._pattern.split(text)  # text, added token, text, ..., text: the pattern captures the tokens
        ends = list(accumulate(map(len, parts)))
        shielded = self._shield is not None
        for k in range(0, len(parts), 2):  # the text between two added tokens
            piece = parts[k]
            if len(piece) < REUSED_CHARS:
                continue
            end = ends[k]
            start = end - len(piece)
            if shielded and start == 0:
                continue
            if piece not in known:
                key = hash(piece)
                if key not in seen:
                    seen.add(key)
                    continue
                fresh[piece] = None
            if start > run:
                segments.append((run, None, start))
            segments.append((start, piece, 0))
            run = end
        if run < len(text) or not segments:
            segments.append((run, None, len(text)))
        return segments

    def _by_pieces(self, texts: list[str]) -> list[Encoded]:
        if len(self._pieces) > MAX_PIECES:
            self._pieces.clear()
        if len(self._seen) > MAX_SEEN:
            self._seen.clear()
        fresh: dict[str, None] = {}
        plans = [self._segments(text, fresh) for text in texts]
        runs = [text[start:end] for text, plan in zip(texts, plans) for start, piece, end in plan if piece is None]
        pieces = list(fresh)
        for piece, (ids, offsets) in zip(pieces, self._encode_pieces(pieces)):
            self._pieces[piece] = ids.copy(), offsets.copy()  # not views: a kept piece pins no batch's arrays
        ran = iter(self._encode(runs))
        known = self._pieces
        return _join_rows([[(start, known[piece] if piece is not None else next(ran)) for start, piece, _ in plan]
                           for plan in plans])

    def _encode_pieces(self, pieces: list[str]) -> list[Encoded]:
        """Reused pieces, each as it encodes after an added token (behind the shield, which is then dropped)."""
        shield = self._shield
        if shield is None:
            return self._encode(pieces)
        return [(ids[1:], offsets[1:] - len(shield)) for ids, offsets in self._encode([shield + p for p in pieces])]

    def _encode(self, texts: list[str]) -> list[Encoded]:
        """(ids, offsets) of each text: from the ids alone where the byte lengths allow, else the encoder's."""
        lengths, backend = self._lengths, self._backend
        if lengths is None:
            return [_as_arrays(e) for e in backend.encode_batch(texts, add_special_tokens=False)]
        out: list[Encoded | None] = [None] * len(texts)
        plain = [i for i, text in enumerate(texts) if text.isascii()]  # one character per byte
        fast = getattr(backend, "encode_batch_fast", backend.encode_batch)  # tokenizers < 0.21: offsets unread
        encodings = fast([texts[i] for i in plain], add_special_tokens=False)
        for i, encoded in zip(plain, _offsets_from_lengths(lengths, [texts[i] for i in plain], encodings)):
            out[i] = encoded  # None: a token of no known length, this text's offsets are read from the encoder
        rest = [i for i, item in enumerate(out) if item is None]
        for i, encoding in zip(rest, backend.encode_batch([texts[i] for i in rest], add_special_tokens=False)):
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


class EncodeQueue:
    """Encodes chunks of texts on one background thread, in order, while the caller renders the next chunk.

    The tokenizer's Rust code runs without the GIL, so on two cores a batch's
    encoding overlaps its Jinja rendering instead of following it. One thread
    keeps the ``PieceEncoder`` (which is not thread-safe) to one user at a time;
    it lives only inside ``with`` (none is left running when ``datasets`` forks
    its workers).
    """

    def __init__(self, tokenizer: Any, encoder: PieceEncoder) -> None:
        self._tokenizer, self._encoder = tokenizer, encoder
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="wai-encode")

    def __enter__(self) -> EncodeQueue:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._pool.shutdown(wait=True, cancel_futures=error is not None)

    def submit(self, texts: list[str]) -> Future[list[Encoded]] | None:
        """Queue ``texts`` for encoding; the future of their (ids, offsets) (None for no text)."""
        if not texts:
            return None
        return self._pool.submit(encode_texts, self._tokenizer, texts, self._encoder)


def backend_of(tokenizer: Any) -> Any:
    """The ``tokenizers.Tokenizer`` to call directly: a raw one, or a transformers fast tokenizer's
    backend when it has no truncation or padding of its own (transformers would turn them off per call)."""
    if hasattr(tokenizer, "encode_batch") and not hasattr(tokenizer, "apply_chat_template"):
        return tokenizer
    backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    if backend is None or backend.truncation is not None or backend.padding is not None:
        return None
    return backend
