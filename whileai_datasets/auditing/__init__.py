"""The dataset-wide audit: what every row will train, counted before training.

``runner`` (``audit``: the export's pipeline and ``tokenize``, chunk by chunk, by ``counting``; on Ray,
``on_ray``: the same counting in actors, block by block, added up on the driver) over ``message_figures``
(what the messages themselves say), ``token_figures`` (what ``tokenize``'s columns say),
``template_drops`` (what the template leaves out, found by rendering) and ``locations`` (file and line
of the rows it names); ``report`` (``Audit``) and ``text`` present the result; ``tally`` holds the
flat-memory counters. It sits on top of export and hub, whose pipeline and trainer gaps it reuses.
"""

from __future__ import annotations

from whileai_datasets.auditing.audit_report import FINDINGS, GROUPS, Audit
from whileai_datasets.auditing.runner import audit

__all__ = ["FINDINGS", "GROUPS", "Audit", "audit"]
