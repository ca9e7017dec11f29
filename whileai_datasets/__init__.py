"""whileai-datasets: whileai agent rollouts as Hugging Face ``datasets``.

``import whileai_datasets`` registers the ``whileai/export`` builder, so::

    from datasets import load_dataset
    ds = load_dataset("whileai/export", data_files="run.jsonl", split="train")
"""

from __future__ import annotations

import warnings as _warnings

from whileai_datasets import _compat

_compat.check_supported()  # before anything imports datasets: a too-old one fails with the range, not an ImportError

with _warnings.catch_warnings():
    # register_feature is flagged experimental by datasets. Message stays registered so data saved by earlier
    # releases loads; nothing this package hands a user names it (built-in feature types only, issue 42).
    _warnings.filterwarnings("ignore", message=".*register_feature.*", category=UserWarning)
    from whileai_datasets.rows.features import Message

from whileai_datasets._options import TrainingOptions
from whileai_datasets._version import __version__ as __version__
from whileai_datasets.auditing import Audit, audit
from whileai_datasets.builders import registry as _registry
from whileai_datasets.builders.bad_rows import bad_rows
from whileai_datasets.builders.whileai_export import BadRowsWarning, WhileaiExportConfig
from whileai_datasets.chat_template import ChatTemplate, RenderBudget, TemplateReport
from whileai_datasets.errors import (
    DuplicateSystemWarning,
    ExportFormatError,
    NothingToTrainWarning,
    OptionError,
    PublishError,
    RenderBudgetError,
    SchemaError,
    TemplateError,
    UnreadKeysWarning,
    UnsupportedVersionError,
    WhileaiError,
    WriteError,
)
from whileai_datasets.export import export_dataset, export_preference, export_training, publish_rollouts
from whileai_datasets.hub import publish, split_by
from whileai_datasets.rows.schema import EXPORT_FEATURES, PREFERENCE_FEATURES, RAW_FEATURES
from whileai_datasets.tokenize import TrainerCutWarning, check_max_length, mask_report
from whileai_datasets.transforms.groups import stamp_groups

__all__ = [
    "Audit",
    "BadRowsWarning",
    "ChatTemplate",
    "DuplicateSystemWarning",
    "EXPORT_FEATURES",
    "ExportFormatError",
    "Message",
    "NothingToTrainWarning",
    "OptionError",
    "PREFERENCE_FEATURES",
    "PublishError",
    "RAW_FEATURES",
    "RenderBudget",
    "RenderBudgetError",
    "SchemaError",
    "TemplateError",
    "TemplateReport",
    "TrainerCutWarning",
    "TrainingOptions",
    "UnreadKeysWarning",
    "UnsupportedVersionError",
    "WhileaiError",
    "WhileaiExportConfig",
    "WriteError",
    "audit",
    "bad_rows",
    "check_max_length",
    "export_dataset",
    "export_preference",
    "export_training",
    "mask_report",
    "publish",
    "publish_rollouts",
    "split_by",
    "stamp_groups",
]

_registry.register()
