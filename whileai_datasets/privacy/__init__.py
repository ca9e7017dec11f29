"""Secrets and personal data in rows: found before publishing, counted by kind, never shown in full.

``scan(ds)`` counts them (``Findings``); ``refuse_secrets(ds)`` raises as ``publish`` does, for a push made with
``datasets``' own ``push_to_hub``; ``transforms.anonymize`` replaces them. ``rules`` holds one rule per kind.
"""

from __future__ import annotations

from whileai_datasets.privacy.gate import refuse_secrets, scan
from whileai_datasets.privacy.rules import PERSONAL_KINDS, SECRET_KINDS
from whileai_datasets.privacy.scanning import Findings

__all__ = ["PERSONAL_KINDS", "SECRET_KINDS", "Findings", "refuse_secrets", "scan"]
