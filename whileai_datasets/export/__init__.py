"""``export_dataset`` / ``export_preference``: whileai's export functions on Arrow.

The pipeline (sources -> transforms -> gates -> writer) and the reports it returns.
"""

from __future__ import annotations

from whileai_datasets.export.exporters import export_dataset, export_preference, export_training

__all__ = ["export_dataset", "export_preference", "export_training"]
