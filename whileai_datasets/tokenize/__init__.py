"""Chat template to tokens: ``input_ids`` with the token-level masks a trainer applies.

``token_columns`` (the output columns as Arrow arrays) and ``token_encode`` (batch
encoding with offsets, on a thread; ``token_lengths`` reads what the tokenizer's
configuration allows it) under ``token_masks`` (``tokenize``: render with
spans, encode, map spans to tokens, check every row); ``report`` (``mask_report``)
reads the result; ``trainer_fit`` (``check_max_length``) checks a trainer's own ``max_length``
against it. It sits below the transforms so ``transforms.tokenize`` can name it.
"""

from __future__ import annotations

from whileai_datasets.tokenize.mask_totals import mask_report
from whileai_datasets.tokenize.token_masks import (
    BadMaskRowsWarning,
    PartialRenderWarning,
    Tokenize,
    UnsupervisedRowsWarning,
    spans_to_token_mask,
    tokenize,
)
from whileai_datasets.tokenize.trainer_fit import TrainerCutWarning, check_max_length

__all__ = ["BadMaskRowsWarning", "PartialRenderWarning", "Tokenize", "TrainerCutWarning", "UnsupervisedRowsWarning",
           "check_max_length", "mask_report", "spans_to_token_mask", "tokenize"]
