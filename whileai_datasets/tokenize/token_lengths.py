"""What a tokenizer's configuration says about encoding it piece by piece and about its offsets.

``PieceEncoder`` (``token_encode.py``) encodes the text between added tokens on
its own only when ``piece_pattern`` finds the pieces independent, and computes
offsets from the ids alone where ``byte_lengths`` gives each token's length in
characters of an ASCII text (byte-level BPE; SentencePiece-style Metaspace or
space-mark normalizers). Both read the tokenizer's JSON configuration; both
answer None for anything they do not know to hold.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

#: Pre-tokenizers whose output on a piece does not depend on what surrounds the piece.
LOCAL_PRE_TOKENIZERS = frozenset({"ByteLevel", "Split", "Whitespace", "WhitespaceSplit", "Digits",
                                  "Punctuation", "BertPreTokenizer", "CharDelimiterSplit", "UnicodeScripts"})
#: Pre-tokenizers that keep every character of their input (a ``Split`` or ``Punctuation`` unless it removes).
KEEPING_PRE_TOKENIZERS = frozenset({"ByteLevel", "Split", "Digits", "Punctuation", "UnicodeScripts"})
UNICODE_FORMS = frozenset({"NFC", "NFD", "NFKC", "NFKD"})
SPACE_MARK = "\u2581"  # SentencePiece's stand-in for a space


def _pre_tokenizers_local(config: Any) -> bool:
    """Each piece between added tokens is pre-tokenized on its own (a ``Metaspace`` too: it prepends per
    piece, or only to the piece at offset 0, which ``PieceEncoder`` keeps at the start of its text)."""
    if config is None:
        return True
    if config.get("type") == "Sequence":
        return all(_pre_tokenizers_local(item) for item in config.get("pretokenizers", []))
    return config.get("type") in LOCAL_PRE_TOKENIZERS or config.get("type") == "Metaspace"


def _config(backend: Any) -> dict[str, Any] | None:
    try:
        config = json.loads(backend.to_str())
    except (AttributeError, ValueError, TypeError):
        return None
    return config if isinstance(config, dict) else None


def _components(config: Any, key: str) -> list[dict[str, Any]]:
    """A pre-tokenizer, decoder or post-processor config, flattened out of its ``Sequence``s."""
    if not isinstance(config, dict):
        return []
    if config.get("type") == "Sequence":
        return [part for item in config.get(key, []) for part in _components(item, key)]
    return [config]


def _space_normalizer(part: dict[str, Any]) -> bool:
    """SentencePiece's normalizers as transformers converts them: spaces replaced by ``\u2581`` (Gemma,
    Llama 2), a ``\u2581`` prepended to each piece (Llama 2's legacy form). Both keep one character per
    character of an ASCII text (the prepended one aside, which the length check catches)."""
    if part.get("type") == "Replace":
        return (part.get("pattern") or {}).get("String") == " " and part.get("content") == SPACE_MARK
    return part.get("type") == "Prepend" and part.get("prepend") == SPACE_MARK


def _normalizer_unicode(config: Any) -> bool:
    """No normalizer, only Unicode normal forms (Qwen's NFC), or SentencePiece's space marks: the
    tokenizer normalizes each piece between added tokens on its own, so pieces stay independent."""
    return all(part.get("type") in UNICODE_FORMS or _space_normalizer(part)
               for part in _components(config, "normalizers"))


def prepend_first(backend: Any) -> bool:
    """A ``Metaspace`` with ``prepend_scheme="first"``: only a piece at offset 0 of the text gets its mark."""
    config = _config(backend) or {}
    return any(part.get("type") == "Metaspace" and part.get("prepend_scheme", "always") == "first"
               for part in _components(config.get("pre_tokenizer"), "pretokenizers"))


def piece_pattern(backend: Any) -> re.Pattern[str] | None:
    """A pattern matching the added tokens as the tokenizer does, captured (so ``split`` keeps them; None:
    pieces are not independent)."""
    config = _config(backend)
    if config is None:
        return None
    if not _normalizer_unicode(config.get("normalizer")) or not _pre_tokenizers_local(config.get("pre_tokenizer")):
        return None
    added = config.get("added_tokens") or []
    if any(t.get("lstrip") or t.get("rstrip") or t.get("single_word") or t.get("normalized") for t in added):
        return None
    contents = sorted({str(t["content"]) for t in added if t.get("content")}, key=len, reverse=True)
    return re.compile("(" + "|".join(re.escape(c) for c in contents) + ")") if contents else None


def byte_lengths(backend: Any) -> np.ndarray | None:
    """Characters of an ASCII text per token id, for a tokenizer whose tokens spell their text one
    character per character and that reports untrimmed offsets: byte-level BPE, or SentencePiece-style
    (``Metaspace`` or space-mark normalizers; BPE or Unigram). None for any other: its offsets are read
    from the encoder."""
    config = _config(backend)
    if config is None or piece_pattern(backend) is None:
        return None
    parts = _components(config.get("pre_tokenizer"), "pretokenizers")
    if any(part.get("type") not in KEEPING_PRE_TOKENIZERS | {"Metaspace"}
           or str(part.get("behavior", "")).lower() == "removed" for part in parts):
        return None  # a pre-tokenizer that drops characters (whitespace, a delimiter): lengths would not add up
    if any(part.get("type") == "ByteLevel" for part in parts):
        lengths = _byte_level_lengths(backend, config, parts)
    else:
        lengths = _sentencepiece_lengths(backend, config, parts)
    if lengths is None:
        return None
    for added in config.get("added_tokens") or []:
        lengths[added["id"]] = len(str(added["content"]).encode("utf-8"))  # ASCII texts: bytes are characters
    return lengths


def _vocab_lengths(backend: Any) -> tuple[dict[str, int], np.ndarray]:
    vocab = backend.get_vocab(with_added_tokens=True)
    lengths = np.full(max(vocab.values(), default=-1) + 1, -1, dtype=np.int64)
    for token, index in vocab.items():
        lengths[index] = len(token)
    return vocab, lengths


def _byte_level_lengths(backend: Any, config: dict[str, Any], parts: list[dict[str, Any]]) -> np.ndarray | None:
    """Byte-level BPE: one character of a token per byte of text."""
    if (config.get("model") or {}).get("type") != "BPE" or any(
            part.get("type") == "ByteLevel" and part.get("add_prefix_space") for part in parts):
        return None
    if any(part.get("type") == "Metaspace" for part in parts):
        return None
    for part in _components(config.get("post_processor"), "processors"):
        if part.get("type") == "ByteLevel" and part.get("trim_offsets", True):
            return None  # offsets with the leading space left out
    return _vocab_lengths(backend)[1]


def _sentencepiece_lengths(backend: Any, config: dict[str, Any], parts: list[dict[str, Any]]) -> np.ndarray | None:
    """SentencePiece-style: a token's characters are the text's, the space mark standing for a space and a
    byte-fallback token for one ASCII character (the only kind a byte of an ASCII text can be)."""
    model = config.get("model") or {}
    marks = [part for part in parts if part.get("type") == "Metaspace"]
    normalized = [part for part in _components(config.get("normalizer"), "normalizers") if _space_normalizer(part)]
    if not marks and not normalized:
        return None
    if any(part.get("replacement") != SPACE_MARK for part in marks):
        return None
    if model.get("type") == "BPE":
        if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
            return None  # tokens that spell more than their text
    elif model.get("type") != "Unigram":
        return None
    vocab, lengths = _vocab_lengths(backend)
    if model.get("byte_fallback", model.get("type") == "Unigram"):
        for byte in range(128):
            index = vocab.get(f"<0x{byte:02X}>")
            if index is not None:
                lengths[index] = 1
    for byte in range(128, 256):  # never in an ASCII text; marked unknown so no sum can use them
        index = vocab.get(f"<0x{byte:02X}>")
        if index is not None:
            lengths[index] = -1
    unknown = model.get("unk_token") if model.get("type") == "BPE" else None
    if model.get("type") == "Unigram" and model.get("unk_id") is not None:
        lengths[int(model["unk_id"])] = -1
    if unknown is not None and unknown in vocab:
        lengths[vocab[unknown]] = -1  # covers a character of unknown length
    return lengths


def shield_token(backend: Any) -> str | None:
    """An added token that encodes as itself alone, to put in front of a piece."""
    config = _config(backend) or {}
    for added in config.get("added_tokens") or []:
        content = str(added.get("content") or "")
        if content and backend.encode(content, add_special_tokens=False).ids == [added["id"]]:
            return content
    return None
