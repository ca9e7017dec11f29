"""A tokenizer trained here and a randomly initialised causal LM built from a
config: the real transformers/TRL code paths, with no download."""

from __future__ import annotations

from collections.abc import Iterable
from importlib.resources import files
from typing import Any

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]


def trl_template(name: str) -> str:
    """A chat template that the installed trl package ships (``qwen2_5`` ...)."""
    return (files("trl") / "chat_templates" / f"{name}.jinja").read_text(encoding="utf-8")


def train_tokenizer(texts: Iterable[str], *, chat_template: str, vocab_size: int = 600) -> Any:
    """A byte-level BPE fast tokenizer trained on ``texts``, with ChatML
    special tokens and ``chat_template`` set."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(list(texts), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[3:],
    )
    tokenizer.chat_template = chat_template
    return tokenizer


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
