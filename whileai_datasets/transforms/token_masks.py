"""The import path ``whileai_datasets.transforms.token_masks`` of earlier releases, kept working.

Tokenization is a stage of its own now (``whileai_datasets.tokenize``); this module
re-exports its public names so code written against the old path keeps running.
"""

from __future__ import annotations

from whileai_datasets.tokenize import (
    BadMaskRowsWarning,
    Tokenize,
    UnsupervisedRowsWarning,
    mask_report,
    spans_to_token_mask,
    tokenize,
)

__all__ = ["BadMaskRowsWarning", "Tokenize", "UnsupervisedRowsWarning", "mask_report", "spans_to_token_mask", "tokenize"]
