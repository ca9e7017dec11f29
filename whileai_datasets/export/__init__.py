"""``export_dataset`` / ``export_preference`` / ``publish_rollouts``: whileai's export functions on Arrow,
on either engine (``engine="ray"``).

What a source is read into (``sources``), and the front of each export; the pipeline, its gates, its
report and the writer they share with the Ray engine are in ``whileai_datasets.shaping``.
"""

from __future__ import annotations

from whileai_datasets.export.exporters import export_dataset, export_preference, export_training
from whileai_datasets.export.rollouts import publish_rollouts

__all__ = ["export_dataset", "export_preference", "export_training", "publish_rollouts"]
