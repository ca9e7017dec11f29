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
from whileai_datasets.errors import WriteError

#: errno values that mean "this file system has no room for the cache"
FULL = {errno.ENOSPC, errno.EDQUOT}


def cache_error(err: BaseException, cache_root: str) -> WriteError | None:
    """The ``WriteError`` for a full cache disk behind ``err`` (itself or its
    cause), or None when ``err`` is something else."""
    if isinstance(err, WriteError):
        return None  # already says what and where
    cause: BaseException | None = err
    for _ in range(32):  # a chain of causes is short; a cycle must not loop
        if cause is None or (isinstance(cause, OSError) and _files.os_errno(cause) in FULL):
            break
        cause = cause.__cause__ or cause.__context__
    if not isinstance(cause, OSError) or _files.os_errno(cause) not in FULL:
        return None
    folder = os.path.abspath(cache_root)
    filename = getattr(cause, "filename", None)
    where = folder if not filename or str(filename).startswith(folder) else os.path.dirname(str(filename))
    try:
        stat = os.statvfs(where)
        free = f"{stat.f_bavail * stat.f_frsize / 1e6:.1f} MB free now"
    except OSError:
        free = "free space unknown"
    error = WriteError(
        f"cannot write the datasets cache: {os.strerror(_files.os_errno(cause) or errno.ENOSPC).lower()} "
        f"({free}); the rows were not cached and no dataset was returned",
        location=where,
        hint="Free space there, or move the cache to a disk with room: set HF_DATASETS_CACHE=/path/with/room "
        "(or pass cache_dir= to load_dataset).",
    )
    error.errno = _files.os_errno(cause)
    return error
