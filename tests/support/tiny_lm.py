"""A tokenizer trained here and a randomly initialised causal LM built from a
config: the real transformers/TRL code paths, with no download."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from importlib.resources import files
from typing import Any

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]
#: The special tokens of other template families, and which of them are bos / eos / pad.
LLAMA3_TOKENS = {
    "special_tokens": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                       "<|eot_id|>", "<|eom_id|>", "<|python_tag|>", "<|finetune_right_pad_id|>"],
    "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "pad_token": "<|finetune_right_pad_id|>",
    "additional": ["<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|python_tag|>"],
}
LLAMA4_TOKENS = {
    "special_tokens": ["<|begin_of_text|>", "<|end_of_text|>", "<|header_start|>", "<|header_end|>", "<|eot|>",
                       "<|eom|>", "<|python_start|>", "<|python_end|>", "<|image|>", "<|finetune_right_pad|>"],
    "bos_token": "<|begin_of_text|>", "eos_token": "<|eot|>", "pad_token": "<|finetune_right_pad|>",
    "additional": ["<|header_start|>", "<|header_end|>", "<|eom|>", "<|python_start|>", "<|python_end|>"],
}
_DEEPSEEK = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>", "<｜User｜>", "<｜Assistant｜>",
             "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
             "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>", "<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>",
             "<｜tool▁sep｜>"]
DEEPSEEK_V3_TOKENS = {"special_tokens": _DEEPSEEK, "bos_token": _DEEPSEEK[0], "eos_token": _DEEPSEEK[1],
                      "pad_token": _DEEPSEEK[2], "additional": _DEEPSEEK[3:]}
MISTRAL_TOKENS = {
    "special_tokens": ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]",
                       "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"],
    "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<unk>",
    "additional": ["[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
                   "[/TOOL_RESULTS]"],
}

def trl_template(name: str) -> str:
    """A chat template that the installed trl package ships (``qwen2_5`` ...)."""
    return (files("trl") / "chat_templates" / f"{name}.jinja").read_text(encoding="utf-8")


def _fast_tokenizer(core: Any, chat_template: str, bos_token: str | None, eos_token: str, pad_token: str,
                    additional: Sequence[str] | None) -> Any:
    """``core`` (a trained ``tokenizers.Tokenizer``) as a transformers fast tokenizer with ``chat_template``."""
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token=bos_token,
        eos_token=eos_token,
        pad_token=pad_token,
        additional_special_tokens=list(SPECIAL_TOKENS[3:] if additional is None else additional),
    )
    tokenizer.chat_template = chat_template
    return tokenizer


def train_tokenizer(texts: Iterable[str], *, chat_template: str, vocab_size: int = 600,
                    special_tokens: Sequence[str] = SPECIAL_TOKENS, bos_token: str | None = None,
                    eos_token: str = "<|im_end|>", pad_token: str = "<|endoftext|>",
                    additional: Sequence[str] | None = None) -> Any:
    """A byte-level BPE fast tokenizer trained on ``texts``, with ``special_tokens``
    (ChatML's unless given, e.g. ``**LLAMA3_TOKENS``) and ``chat_template`` set."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(list(texts), trainer=trainer)
    return _fast_tokenizer(core, chat_template, bos_token, eos_token, pad_token, additional)


def train_sentencepiece_tokenizer(texts: Iterable[str], *, chat_template: str, vocab_size: int = 600,
                                  special_tokens: Sequence[str] = SPECIAL_TOKENS, bos_token: str | None = None,
                                  eos_token: str = "<|im_end|>", pad_token: str = "<|endoftext|>",
                                  additional: Sequence[str] | None = None, prepend_scheme: str = "first") -> Any:
    """A SentencePiece-style fast tokenizer trained on ``texts``: a Metaspace pre-tokenizer (spaces become
    ``▁``, not split on: merges run across words), BPE with byte fallback, as transformers converts
    Llama 2 / Mistral / Gemma tokenizers; special tokens and ``chat_template`` as ``train_tokenizer``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    core = Tokenizer(models.BPE(byte_fallback=True, unk_token=None))
    core.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme=prepend_scheme, split=False)
    core.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme=prepend_scheme, split=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(special_tokens), show_progress=False,
                                  max_token_length=16)
    core.train_from_iterator(list(texts), trainer=trainer)
    config = json.loads(core.to_str())  # the 256 byte-fallback tokens join the vocabulary, as in Llama 2's
    vocab = config["model"]["vocab"]
    for byte in range(256):
        vocab.setdefault(f"<0x{byte:02X}>", len(vocab))
    core = Tokenizer.from_str(json.dumps(config))
    return _fast_tokenizer(core, chat_template, bos_token, eos_token, pad_token, additional)


def tiny_causal_lm(vocab_size: int, seed: int = 0) -> Any:
    """A one-layer Qwen2-architecture model, randomly initialised."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
    )
    return Qwen2ForCausalLM(config)
