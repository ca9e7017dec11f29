"""The one place that touches ``datasets``' private module table.

``datasets`` has no plugin hook for builders. ``load_dataset(path)`` first
looks ``path`` up in ``datasets.packaged_modules._PACKAGED_DATASETS_MODULES``
(name -> (module path, source hash)), so adding ``"whileai/export"`` there makes
``load_dataset("whileai/export", data_files=...)`` resolve to our builder,
offline and streaming included. The hash goes into the cache path of every
split built, so it covers every source that can decide what the builder
writes: each ``.py`` file of the installed package, its version included (any
of them may run while a split is built, and a hand-kept list goes stale). A
changed or upgraded package therefore rebuilds cached splits rather than
serving the old rows.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
from collections.abc import Iterator
from importlib.resources.abc import Traversable

import datasets
from packaging.version import Version

from whileai_datasets import _compat
from whileai_datasets.errors import UnsupportedVersionError

NAME = "whileai/export"
BUILDER_MODULE = "whileai_datasets.builders.whileai_export"
SUPPORTED = _compat.SUPPORTED["datasets"]


def _python_files(folder: Traversable, prefix: str = "") -> Iterator[tuple[str, Traversable]]:
    """Every ``.py`` file under ``folder`` as (path inside the package, file), linked folders followed."""
    for entry in folder.iterdir():
        if entry.is_dir() and entry.name != "__pycache__":
            yield from _python_files(entry, f"{prefix}{entry.name}/")
        elif entry.name.endswith(".py"):
            yield f"{prefix}{entry.name}", entry


@functools.cache
def source_hash(package: str = "whileai_datasets") -> str:
    """sha256 over every ``.py`` file of ``package`` (path and bytes; ``_version.py`` among them), once per
    process: about 150 files, a few milliseconds."""
    digest = hashlib.sha256()
    for path, entry in sorted(_python_files(importlib.resources.files(package)), key=lambda item: item[0]):
        data = entry.read_bytes()
        digest.update(f"{path} {len(data)}\n".encode())
        digest.update(data)
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
    entry = (BUILDER_MODULE, source_hash())
    if table.get(NAME) != entry:
        table[NAME] = entry
