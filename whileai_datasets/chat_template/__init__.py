"""Chat templates: parse in a sandbox, inspect, add generation blocks, render with spans.

    >>> from whileai_datasets.chat_template import ChatTemplate
    >>> template = ChatTemplate.from_file("tokenizer_config.json")   # doctest: +SKIP
    >>> template.inspect().has_generation_block                      # doctest: +SKIP
    False
    >>> training = template.with_generation()                        # doctest: +SKIP
    >>> training.render(messages).generation_spans                   # doctest: +SKIP
    [(84, 102)]
"""

from __future__ import annotations

from whileai_datasets.chat_template.analysis.unpatchable import Unpatchable
from whileai_datasets.chat_template.inspect import (
    GenerationBlockInfo,
    ProbeStatus,
    TemplateReport,
)
from whileai_datasets.chat_template.rendering.spans import GenerationBlock, RenderedChat
from whileai_datasets.chat_template.sandbox.budget import RenderBudget
from whileai_datasets.chat_template.template import ChatTemplate

__all__ = [
    "ChatTemplate",
    "GenerationBlock",
    "GenerationBlockInfo",
    "ProbeStatus",
    "RenderBudget",
    "RenderedChat",
    "TemplateReport",
    "Unpatchable",
]
