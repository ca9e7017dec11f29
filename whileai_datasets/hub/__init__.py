"""Publishing to the Hugging Face Hub: ``publish``, the dataset card, ``split_by``."""

from __future__ import annotations

from whileai_datasets.hub.publishing import PublishResult, publish
from whileai_datasets.hub.splits import HoldOut, split_by

__all__ = ["HoldOut", "PublishResult", "publish", "split_by"]
