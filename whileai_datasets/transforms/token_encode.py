"""Batched encoding with character offsets, reusing the text between added tokens across rows.

A fast tokenizer splits its input at added tokens (``<|im_start|>``, ...) and
encodes each piece between them on its own. Chat rows repeat most such pieces:
the system prompt, the tool schemas, role headers, stock replies. So each
distinct piece is encoded once (one ``encode_batch`` per batch for the new
ones) and a row's ids and offsets are the concatenation of its pieces'.

That is exact only for tokenizers whose pieces really are independent: no
normalizer, pre-tokenizers that split locally, added tokens that match their
exact text (no ``lstrip``/``rstrip``/``single_word``/``normalized``). Anything
else is encoded whole. On top of that the first batch is also encoded whole
and compared; a difference turns the reuse off for good.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any

import numpy as np

from whileai_datasets.errors import SchemaError

#: Pre-tokenizers whose output on a piece does not depend on what surrounds the piece.
LOCAL_PRE_TOKENIZERS = frozenset({"ByteLevel", "Split", "Whitespace", "WhitespaceSplit", "Digits",
                                  "Punctuation", "BertPreTokenizer", "CharDelimiterSplit", "UnicodeScripts"})
MAX_PIECES = 200_000

Encoded = tuple[np.ndarray, np.ndarray]  # ids (int32), (n, 2) offsets (int64)


def _pre_tokenizers_local(config: Any) -> bool:
    if config is None:
        return True
    if config.get("type") == "Sequence":
        return all(_pre_tokenizers_local(item) for item in config.get("pretokenizers", []))
    return config.get("type") in LOCAL_PRE_TOKENIZERS


def piece_pattern(backend: Any) -> re.Pattern[str] | None:
    """A pattern matching the added tokens as the tokenizer does (None: pieces are not independent)."""
    try:
        config = json.loads(backend.to_str())
    except (AttributeError, ValueError, TypeError):
        return None
    if config.get("normalizer") is not None or not _pre_tokenizers_local(config.get("pre_tokenizer")):
        return None
    added = config.get("added_tokens") or []
    if any(t.get("lstrip") or t.get("rstrip") or t.get("single_word") or t.get("normalized") for t in added):
        return None
    contents = sorted({str(t["content"]) for t in added if t.get("content")}, key=len, reverse=True)
    return re.compile("|".join(re.escape(c) for c in contents)) if contents else None


class PieceEncoder:
    """Encodes texts through a ``tokenizers.Tokenizer``, each distinct piece once.

    Pickles as an empty encoder (so ``datasets`` hashes a transform holding
    it the same before and after use); it rebuilds itself on first use.
    """

    def __init__(self) -> None:
        self._backend: Any = None
        self._pattern: re.Pattern[str] | None = None
        self._pieces: dict[str, Encoded] = {}
        self._verified = False

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def encode(self, backend: Any, texts: list[str]) -> list[Encoded]:
        if backend is not self._backend:
            self.__init__()  # type: ignore[misc]
            self._backend, self._pattern = backend, piece_pattern(backend)
        if self._pattern is None:
            return [_as_arrays(e) for e in backend.encode_batch(texts, add_special_tokens=False)]
        out = self._by_pieces(texts)
        if not self._verified:
            whole = [_as_arrays(e) for e in backend.encode_batch(texts, add_special_tokens=False)]
            same = all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(out, whole))
            self._verified, self._pattern = True, (self._pattern if same else None)
            return whole
        return out

    def _split(self, text: str) -> tuple[list[int], list[str]]:
        """Starts and texts of the pieces of ``text``: added tokens and the text between them."""
        assert self._pattern is not None
        starts: list[int] = []
        pieces: list[str] = []
        position = 0
        for match in self._pattern.finditer(text):
            if match.start() > position:
                starts.append(position)
                pieces.append(text[position:match.start()])
            starts.append(match.start())
            pieces.append(match.group())
            position = match.end()
        if position < len(text):
            starts.append(position)
            pieces.append(text[position:])
        return starts, pieces

    def _by_pieces(self, texts: list[str]) -> list[Encoded]:
        split = [self._split(text) for text in texts]
        if len(self._pieces) > MAX_PIECES:
            self._pieces.clear()
        known = self._pieces
        new = list(dict.fromkeys(p for _, pieces in split for p in pieces if p not in known))
        added = [p for p in new if self._backend.token_to_id(p) is not None and self._pattern.fullmatch(p)]
        for piece in added:
            known[piece] = (np.array([self._backend.token_to_id(piece)], dtype=np.int32),
                            np.array([[0, len(piece)]], dtype=np.int64))
        plain = [p for p in new if p not in known]
        for piece, encoding in zip(plain, self._backend.encode_batch(plain, add_special_tokens=False)):
            known[piece] = _as_arrays(encoding)
        return [self._join(starts, pieces) for starts, pieces in split]

    def _join(self, starts: list[int], pieces: list[str]) -> Encoded:
        if not pieces:
            return np.zeros(0, dtype=np.int32), np.zeros((0, 2), dtype=np.int64)
        entries = [self._pieces[p] for p in pieces]
        ids = np.concatenate([e[0] for e in entries])
        shift = np.repeat(np.asarray(starts, dtype=np.int64), [len(e[0]) for e in entries])
        return ids, np.concatenate([e[1] for e in entries]) + shift[:, None]


def _as_arrays(encoding: Any) -> Encoded:
    return (np.array(encoding.ids, dtype=np.int32),
            np.array(encoding.offsets, dtype=np.int64).reshape(-1, 2))


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
        self._pending: list[Future[list[tuple[Any, np.ndarray]]]] = []

    def __enter__(self) -> EncodeQueue:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._pool.shutdown(wait=True, cancel_futures=error is not None)

    def submit(self, texts: list[str]) -> None:
        if texts:
            self._pending.append(self._pool.submit(encode_texts, self._tokenizer, texts, self._encoder))

    def results(self) -> list[tuple[Any, np.ndarray]]:
        """Every submitted text's (ids, offsets), in submission order (re-raises an encoding error)."""
        return [item for pending in self._pending for item in pending.result()]


def backend_of(tokenizer: Any) -> Any:
    """The ``tokenizers.Tokenizer`` to call directly: a raw one, or a transformers fast tokenizer's
    backend when it has no truncation or padding of its own (transformers would turn them off per call)."""
    if hasattr(tokenizer, "encode_batch") and not hasattr(tokenizer, "apply_chat_template"):
        return tokenizer
    backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    if backend is None or backend.truncation is not None or backend.padding is not None:
        return None
    return backend
