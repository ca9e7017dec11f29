"""What the builder says when the ``datasets`` cache cannot be written.

``load_dataset`` writes every split as Arrow files under the cache folder
(``HF_DATASETS_CACHE``, ``~/.cache/huggingface/datasets`` by default) before
anything can be read. When that disk fills up, ``datasets`` wraps the
``OSError`` in its bare ``DatasetGenerationError: An error occurred while
generating the dataset``; this turns it into a ``WriteError`` naming the
cache folder, the free space left and how to move the cache.
"""

from __future__ import annotations

import errno
import os

from whileai_datasets import _files
from whileai_datasets.errors import WriteError, causes

#: errno values that mean "this file system has no room for the cache"
FULL = {errno.ENOSPC, errno.EDQUOT}


def cache_error(err: BaseException, cache_root: str) -> WriteError | None:
    """The ``WriteError`` for a full cache disk behind ``err`` (itself or a
    cause in its chain: datasets re-wraps an ``OSError`` as "Cannot find
    data file"), or None when ``err`` is something else. One this function
    made earlier in the chain is returned as it is."""
    cause = next((c for c in causes(err) if isinstance(c, WriteError)
                  or (isinstance(c, OSError) and _files.os_errno(c) in FULL)), None)
    if isinstance(cause, WriteError):
        return cause if cause is not err and _files.os_errno(cause) in FULL else None
    if not isinstance(cause, OSError) or _files.os_errno(cause) not in FULL:
        return None
    folder = os.path.abspath(cache_root)
    filename = getattr(cause, "filename", None)
    where = folder if not filename or str(filename).startswith(folder) else os.path.dirname(str(filename))
    error = WriteError(
        f"cannot write the datasets cache: {os.strerror(_files.os_errno(cause) or errno.ENOSPC).lower()} while "
        "writing the Arrow files of the split; the partial files were removed and no dataset was returned",
        location=where,
        hint="Free space there, or move the cache to a disk with room: set HF_DATASETS_CACHE=/path/with/room "
        "(or pass cache_dir= to load_dataset).",
    )
    error.errno = _files.os_errno(cause)
    error.__cause__ = cause  # the file system's own error, not datasets' wrappers around it
    return error
