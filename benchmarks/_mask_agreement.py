"""Whether transformers' assistant mask of a patched template equals ours, on every probe it renders.

The check of ``tests/chat_template/test_patch.py`` (``_masks_agree``), for any template: a tokenizer
with one token per character (so offsets are characters) is given the patched template, and for every
probe conversation ``apply_chat_template(..., return_assistant_tokens_mask=True)`` must mark exactly the
tokens our generation spans overlap, the empty assistant message's probe included.
"""

from __future__ import annotations

from typing import Any


def char_tokenizer(chat_template: str) -> Any:
    import tokenizers
    import transformers

    model = tokenizers.models.WordLevel({"[UNK]": 0, "<s>": 1, "</s>": 2}, unk_token="[UNK]")
    backend = tokenizers.Tokenizer(model)
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex("."), behavior="isolated")
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>",
                                                     unk_token="[UNK]")
    tokenizer.chat_template = chat_template
    return tokenizer


def mask_disagreement(patched: Any) -> str | None:
    """The first probe where transformers' mask and ours differ (None: they agree everywhere)."""
    from whileai_datasets.chat_template import ChatTemplate
    from whileai_datasets.chat_template.analysis.probes import probe_set

    tokenizer = char_tokenizer(patched.text)
    ours_template = ChatTemplate.from_tokenizer(tokenizer)
    for probe in probe_set():
        try:
            out = tokenizer.apply_chat_template(probe.messages, tools=probe.tools, tokenize=True, return_dict=True,
                                                return_assistant_tokens_mask=True)
            rendered = ours_template.render(probe.messages, probe.tools)
        except Exception:  # noqa: BLE001, S112 - a conversation this template does not support
            continue
        offsets = tokenizer(rendered.text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        ours = [int(any(s < te and ts < e for s, e in rendered.generation_spans)) for ts, te in offsets]
        if list(out["assistant_masks"]) != ours:
            return probe.name
    return None
