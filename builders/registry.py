"""The one place that touches ``datasets``' private module table.

``datasets`` has no plugin hook for builders. ``load_dataset(path)`` first
looks ``path`` up in ``datasets.packaged_modules._PACKAGED_DATASETS_MODULES``
(name -> (module path, source hash)), so adding ``"whileai/export"`` there makes
``load_dataset("whileai/export", data_files=...)`` resolve to our builder,
offline and streaming included. The hash covers the builder's and the
normalizer's source, so a changed builder rebuilds cached datasets.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect

import datasets
from packaging.version import Version

from whileai_datasets import _compat
from whileai_datasets.errors import UnsupportedVersionError

NAME = "whileai/export"
BUILDER_MODULE = "whileai_datasets.builders.whileai_export"
#: Modules whose source decides what the builder writes.
_HASHED_MODULES = (
    BUILDER_MODULE,
    "whileai_datasets.builders.config",
    "whileai_datasets.builders.inputs",
    "whileai_datasets.rows.conversations",
    "whileai_datasets.rows.file_kind",
    "whileai_datasets.rows.json_array",
    "whileai_datasets.rows.canonical",
    "whileai_datasets.rows.columns",
    "whileai_datasets.rows.leaks",
    "whileai_datasets.rows.parallel",
    "whileai_datasets.rows.normalize",
    "whileai_datasets.rows.reader",
    "whileai_datasets.rows.schema",
    "whileai_datasets.rows.features",
    "whileai_datasets.rows.content",
)
SUPPORTED = _compat.SUPPORTED["datasets"]


def _source_hash() -> str:
    digest = hashlib.sha256()
    for name in _HASHED_MODULES:
        digest.update(inspect.getsource(importlib.import_module(name)).encode("utf-8"))
    return digest.hexdigest()


def _table() -> dict[str, tuple[str, str]]:
    installed = Version(datasets.__version__)
    wanted = _compat.supported_range("datasets")
    try:
        from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES as table
    except ImportError as err:
        raise UnsupportedVersionError(
            f"datasets {installed} has no packaged-module table to register 'whileai/export' in",
            hint=f"Install {wanted}.",
        ) from err
    sample = next(iter(table.values()), None)
    if not isinstance(table, dict) or not (isinstance(sample, tuple) and len(sample) == 2):
        raise UnsupportedVersionError(
            f"datasets {installed} keeps its packaged-module table in a shape this package does not know",
            hint=f"Install {wanted}.",
        )
    return table


def register() -> None:
    """Make ``load_dataset("whileai/export", ...)`` find our builder. Idempotent."""
    table = _table()
    entry = (BUILDER_MODULE, _source_hash())
    if table.get(NAME) != entry:
        table[NAME] = entry


def is_registered() -> bool:
    return NAME in _table()
