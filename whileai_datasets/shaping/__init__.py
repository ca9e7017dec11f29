"""Canonical rows shaped into training rows, chunk by chunk, and written.

The machinery both engines share: the chunk pipeline over the transforms (``pipeline``), whileai's
checks and gates (``refusals``), the export's report (``reports``) and its loss facts (``loss_facts``),
the writer (``writer``, ``direct_file``) and the rule that an output may not be an input
(``overwrite``). ``export_dataset`` (``whileai_datasets.export``) and the Ray engine both run it.
"""

__all__: list[str] = []  # what a user calls is export_dataset and audit; these are their shared parts
