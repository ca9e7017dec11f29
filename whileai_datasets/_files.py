"""Files and folders written for a user, replaced whole or not at all.

Every output the package writes (exports, Ray part directories, patched
templates, HTML pages, the demo's Parquet) goes through :class:`Replacement`:

1. a temp file (or folder) of its own in the target's folder, created
   exclusively (``mkstemp`` / ``mkdtemp``), so two writers never share one;
2. once written, its data is flushed to the device (``fsync``), then, under a
   lock on the folder, it is renamed over the target in one step and the
   folder is flushed too, so after "done" a power loss leaves the old file or
   the whole new one;
3. on any failure the temp is removed and the error names the target, the
   cause and what was left (:func:`write_error`).

Two writers to one path: the target's identity (device, inode, mtime, size) is
noted when a writer starts, and the rename happens only if it is unchanged.
The first to finish replaces the target; the other finds it changed, discards
its own output and says so. So one complete output is left, never a mix, and
each writer knows whether its own is the one left.

A temp's name carries its owner (pid, boot and host), so one a kill left
behind (``kill -9``, the OOM killer) is removed the next time its target is
written, and only once that process is gone: ``sweep`` skips live owners,
other machines (a shared file system) and names it did not make.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator

from whileai_datasets.errors import ExportFormatError, WriteError

#: A URI's scheme (``s3://``, ``gs://``, ``https://``): not a path on this machine.
_URI = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+)://")

#: What a temp's name carries after its prefix: ``<pid>-<boot>-<host>-`` (``owner_tag``).
_OWNER = re.compile(r"(?P<pid>\d+)-(?P<boot>[0-9a-f]{8})-(?P<host>[0-9a-f]{8})-")
#: The file's identity while nobody writes it: device, inode, mtime, size.
Identity = tuple[int, int, int, int]


def _boot() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip().replace("-", "")[:8]
    except OSError:  # not Linux: no boot id, pids are compared alone
        return "0" * 8


def _host() -> str:
    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]


_BOOT, _HOST = _boot(), _host()


def owner_tag(pid: int | None = None) -> str:
    """``<pid>-<boot>-<host>-``: what a temp name says about its writer
    (``boot`` and ``host`` are short hashes)."""
    return f"{os.getpid() if pid is None else pid}-{_BOOT}-{_HOST}-"


def owner_gone(tag: str) -> bool:
    """Whether the process a name's tag (``owner_tag``, at the start of
    ``tag``) belongs to is gone: same host, and another boot or no such pid.
    Anything else (another host, a live pid, no tag) counts as in use."""
    found = _OWNER.match(tag)
    if found is None or found["host"] != _HOST:
        return False
    if found["boot"] != _BOOT:
        return True
    try:
        os.kill(int(found["pid"]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def sweep(folder: str, prefix: str) -> list[str]:
    """Remove the entries of ``folder`` named ``prefix`` + an owner tag
    (``owner_tag``) whose owner is gone, files and folders; returns their paths."""
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        if not (name.startswith(prefix) and owner_gone(name[len(prefix) :])):
            continue
        path = os.path.join(folder, name)
        with contextlib.suppress(FileNotFoundError):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
            removed.append(path)
    return removed


def _identity(path: str) -> Identity | None:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return (stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size)


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_path(path: str) -> None:
    """Flush a file's (or a folder's entries') data to the device."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in (errno.EINVAL, errno.EBADF):  # some file systems cannot sync a folder
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def _folder_lock(folder: str) -> Iterator[None]:
    """An exclusive lock on ``folder`` (``flock`` on the folder itself: no
    lock file is left behind) while a rename and its check run."""
    try:
        import fcntl
    except ImportError:  # Windows: the identity check alone
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as err:  # a file system without locks (some NFS setups): the identity check alone
            if err.errno not in (errno.ENOLCK, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF):
                raise
        yield
    finally:
        os.close(fd)  # releases the lock


def refuse_uri(path: str | os.PathLike[str]) -> None:
    """Raise when ``path`` is a URI (``s3://bucket/key``): read as a local path, it names a file that is not
    there, and written as one it would make an ``s3:/bucket`` folder tree in the working directory.

    Raises:
        ExportFormatError: naming the scheme and what to do instead.
    """
    found = _URI.match(os.fspath(path))
    if found:
        raise ExportFormatError(
            f"{found['scheme']}:// URIs are not written by this writer: expected a path on this machine",
            location=os.fspath(path),
            hint="Write to a local path; export_dataset and the Ray export take an output URI themselves "
                 "(written locally, then uploaded).",
        )


class Replacement:
    """A temp file (or, with ``folder=True``, a temp folder) beside ``target``
    that :meth:`commit` renames over it, or :meth:`discard` removes."""

    def __init__(self, target: str | os.PathLike[str], *, folder: bool = False) -> None:
        refuse_uri(target)
        self.target = os.path.abspath(os.fspath(target))
        self.folder = os.path.dirname(self.target)
        self.is_folder = folder
        name = os.path.basename(self.target)
        try:
            os.makedirs(self.folder, exist_ok=True)
            self.swept = sweep(self.folder, f".{name}.whileai-")
            self.before = _identity(self.target)
            prefix = f".{name}.whileai-{owner_tag()}"
            if folder:
                self.path = tempfile.mkdtemp(dir=self.folder, prefix=prefix, suffix=".tmp")
                self.fd: int | None = None
            else:
                self.fd, self.path = tempfile.mkstemp(dir=self.folder, prefix=prefix, suffix=".tmp")
                os.fchmod(self.fd, 0o666 & ~_umask())  # mkstemp makes 0600; an output gets the usual mode
        except OSError as err:
            raise write_error(self.target, err, written=0, existed=os.path.exists(self.target)) from err
        self.done = False

    def take_fd(self) -> int:
        """The temp file's descriptor, now the caller's to close."""
        fd, self.fd = self.fd, None
        if fd is None:
            raise ValueError(f"the descriptor of {self.path} was already taken")
        return fd

    def commit(self) -> str:
        """Flush the temp to the device and rename it over the target (unless
        another writer replaced the target since this one started); returns
        the target's path.

        Raises:
            WriteError: the flush or the rename failed, or the target changed
                while this writer ran; the temp is removed and the target is
                as it was.
        """
        try:
            self._close_fd()
            fsync_path(self.path)
            with _folder_lock(self.folder):
                now = _identity(self.target)
                if now != self.before:
                    raise _replaced_error(self.target, self.before)
                if self.is_folder and now is not None:
                    _swap_folders(self.path, self.target)
                else:
                    os.replace(self.path, self.target)
                self.done = True
        except WriteError:
            raise
        except OSError as err:
            raise self.failed(err) from err
        finally:
            if not self.done:
                self.discard()
        try:
            fsync_path(self.folder)  # the rename itself reaches the device
        except OSError as err:
            raise WriteError(
                f"the file was replaced, but its folder could not be flushed to the device ({err.strerror})",
                location=self.target,
                hint="The new file is in place; a power loss now could bring the old one back.",
            ) from err
        return self.target

    def failed(self, err: OSError, *, written: int = 0) -> WriteError:
        """The error for ``err``, the temp removed. ``written``: the bytes the
        writer had handed on (the temp's size counts when it is larger)."""
        if isinstance(err, WriteError):
            self.discard()
            return err
        size = max(written, self._size())
        self.discard()
        return write_error(self.target, err, written=size, existed=self.before is not None)

    def discard(self) -> None:
        """Remove the temp (never the target); safe to call again."""
        self._close_fd()
        if self.done:
            return
        with contextlib.suppress(FileNotFoundError):
            if self.is_folder:
                shutil.rmtree(self.path)
            else:
                os.unlink(self.path)

    def _close_fd(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)

    def _size(self) -> int:
        if not self.is_folder:
            return _identity(self.path)[3] if os.path.exists(self.path) else 0  # type: ignore[index]
        total = 0
        for root, _, names in os.walk(self.path):
            total += sum(os.path.getsize(os.path.join(root, name)) for name in names)
        return total


def replace_with(target: str | os.PathLike[str], write: Callable[[str], object]) -> str:
    """``target`` written whole by ``write(temp_path)`` (a writer that opens
    the path itself, e.g. ``pyarrow.parquet.write_table``); returns its path.

    Raises:
        WriteError: as ``Replacement.commit``; the temp is removed.
    """
    replacement = Replacement(target)
    try:
        os.close(replacement.take_fd())
        write(replacement.path)
        return replacement.commit()
    except WriteError:
        raise
    except OSError as err:
        raise replacement.failed(err) from err
    finally:
        replacement.discard()


def write_text(target: str | os.PathLike[str], text: str) -> str:
    """``target`` replaced whole by ``text`` (UTF-8); returns its path."""
    data = text.encode("utf-8")

    def write(path: str) -> None:
        with open(path, "wb") as handle:
            handle.write(data)

    return replace_with(target, write)


def _swap_folders(new: str, target: str) -> None:
    """Put the folder ``new`` at ``target`` (an existing folder): exchanged in
    one step where Linux offers it (``renameat2``), else moved aside, moved in
    and removed; the old folder is removed either way."""
    if _exchange(new, target):
        shutil.rmtree(new, ignore_errors=True)  # it holds the old folder now
        return
    aside = new + ".old"
    os.rename(target, aside)
    try:
        os.rename(new, target)
    except OSError:
        os.rename(aside, target)
        raise
    shutil.rmtree(aside, ignore_errors=True)


def _exchange(first: str, second: str) -> bool:
    """Swap two paths atomically with ``renameat2(RENAME_EXCHANGE)``; False
    where the system has no such call."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(first), at_fdcwd, os.fsencode(second), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), second)


def _replaced_error(target: str, before: Identity | None) -> WriteError:
    then = "did not exist" if before is None else "was another file"
    err = WriteError(
        f"not replaced: another writer replaced this file while this one ran (it {then} when this one "
        "started); that writer's file was left in place and this one's output was discarded",
        location=target,
        hint="Run one export per output path at a time, or give each its own output path.",
    )
    err.errno = errno.EEXIST
    return err


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size:,} bytes"


_HINTS = {
    errno.ENOSPC: "Free space on the file system that holds {folder} ({free} free now), or write to another one.",
    errno.EDQUOT: "Your disk quota on {folder} is used up: free some of it, or write to another file system.",
    errno.EACCES: "Check that you may write to {folder}.",
    errno.EPERM: "Check that you may write to {folder}.",
    errno.EROFS: "{folder} is on a read-only file system: write to another one.",
}


def write_error(target: str, err: OSError, *, written: int, existed: bool) -> WriteError:
    """``cannot write: <cause> (<n> written); <what was left>``, at ``target``, one line."""
    code = os_errno(err)
    cause = (os.strerror(code) if code else str(err).strip() or type(err).__name__).lower()
    left = "the existing file is untouched" if existed else "no file was left there"
    folder = os.path.dirname(target) or "."
    try:
        stat = os.statvfs(folder)
        free = _megabytes(stat.f_bavail * stat.f_frsize)
    except OSError:
        free = "unknown"
    hint = _HINTS.get(code or -1, "Check the path and the file system it is on.").format(folder=folder, free=free)
    error = WriteError(f"cannot write: {cause} ({_megabytes(written)} written); {left}", location=target, hint=hint)
    error.errno = code
    return error


def os_errno(err: BaseException) -> int | None:
    """The errno of an ``OSError``, also when pyarrow only put it in the
    message (``[errno 28] No space left on device``)."""
    code = getattr(err, "errno", None)
    if isinstance(code, int) and code:
        return code
    found = re.search(r"\[errno (\d+)\]", str(err), re.IGNORECASE)
    return int(found.group(1)) if found else None
