"""A repo this package published, read back as a source: ``namespace/name`` or ``hf://datasets/namespace/name``.

``whileai-datasets audit`` (and ``audit()``) take a Hub repo beside files and globs: its ``canonical``
config holds the rows as exported (``messages``, per-message ``loss_mask``), which the audit runs through
the export's pipeline and ``tokenize`` like any other canonical dataset. A bare ``namespace/name`` is
read as a repo only when no such local path exists and it does not end like a data file, so a mistyped
file name is not sent to the Hub.
"""

from __future__ import annotations

import os
import re
from typing import Any

from whileai_datasets import _storage
from whileai_datasets.errors import ExportFormatError
from whileai_datasets.hub.configs import CANONICAL

__all__ = ["HF_PREFIX", "hub_repo", "load_split", "resolve"]

HF_PREFIX = "hf://datasets/"
#: ``namespace/name``, with an optional ``@revision``.
_REPO = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?:@(?P<revision>[\w./-]+))?$")
#: Names that are files, not repos.
_FILE_ENDINGS = (".jsonl", ".json", ".ndjson", ".parquet", ".gz", ".bz2", ".xz", ".zst", ".lz4", ".arrow")


def hub_repo(source: Any) -> tuple[str, str | None] | None:
    """``(repo_id, revision)`` when ``source`` names a Hub dataset repo, else None (a local source)."""
    if not isinstance(source, (str, os.PathLike)):
        return None
    text = os.fspath(source)
    explicit = text.startswith(HF_PREFIX)
    if explicit:
        text = text[len(HF_PREFIX):]
    elif (_storage.is_uri(text) or os.path.exists(text) or text.lower().endswith(_FILE_ENDINGS)
          or any(c in text for c in "*?[")):
        return None
    match = _REPO.match(text)
    if match is None:
        if explicit:
            raise ExportFormatError(f"{os.fspath(source)!r} is not a Hub dataset address", location="source",
                                    hint=f"Write it as {HF_PREFIX}namespace/name (or namespace/name@revision).")
        return None
    return match["repo"], match["revision"]


def load_split(repo_id: str, *, config: str = CANONICAL, split: str = "train", revision: str | None = None) -> Any:
    """One split of one config of a Hub dataset repo as canonical rows: the split's files (as the repo's card
    lists them, found by ``datasets.load_dataset_builder``) read through the ``whileai/export`` builder, which
    turns the portable ``List(Json())`` messages back into typed ones. Cached by ``datasets``; the token is
    the usual one (``HF_TOKEN``, ``hf auth login``).

    Raises:
        ExportFormatError: the repo, config or split does not exist (or cannot be read), with what does.
    """
    import datasets
    from datasets.exceptions import DatasetNotFoundError

    from whileai_datasets.builders import registry

    where = f"{HF_PREFIX}{repo_id}" + (f"@{revision}" if revision else "")
    try:
        files = datasets.load_dataset_builder(repo_id, config, revision=revision).config.data_files
    except DatasetNotFoundError as err:
        raise ExportFormatError(
            f"no such local file, and no Hub dataset {repo_id!r} this token can read ({err})", location=where,
            hint="Pass an existing file or glob, or a repo this package published (log in with `hf auth login` "
                 "or set HF_TOKEN for a private one).") from err
    except ValueError as err:  # an unknown config: datasets names the ones there are
        raise ExportFormatError(f"cannot read config {config!r}: {err}", location=where,
                                hint="Pass --config (config=) naming one the repo has; the audit reads the rows "
                                     f"of its {CANONICAL!r} config.") from err
    if split not in (files or {}):
        raise ExportFormatError(f"config {config!r} has no split {split!r} (splits: {', '.join(files or {})})",
                                location=where, hint="Pass --split (split=) naming one of those.")
    registry.register()
    return datasets.load_dataset("whileai/export", data_files=list(files[split]), split="train")


def resolve(source: Any, *, config: str = CANONICAL, split: str = "train", revision: str | None = None) -> tuple[Any, str | None]:
    """``(rows, label)``: a Hub repo source loaded (its label names the repo, config and split), any other
    source as it is (label None)."""
    hub = hub_repo(source)
    if hub is None:
        return source, None
    label = f"{HF_PREFIX}{hub[0]}" + (f"@{revision or hub[1]}" if revision or hub[1] else "")
    return (load_split(hub[0], config=config, split=split, revision=revision or hub[1]),
            f"{label} (config {config!r}, split {split!r})")
