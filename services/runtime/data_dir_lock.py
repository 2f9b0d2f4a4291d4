"""One process per data directory: an exclusive lock on `<dir>/.lock`, as Kafka's log dirs have.

Two brokers on one `log.dirs` (or two controllers on one metadata log directory) would append to
the same segment files and journal from two processes, and each would believe its own view: the
log would be corrupt with nothing to say so. The first process takes an exclusive `flock` on
`.lock` and holds it until it exits (the kernel drops it then, after a `kill -9` too); a second
one is refused at start, before it binds a port or opens a file, with the first one's pid.

`flock` locks belong to the open file, so a second lock in the same process is refused too.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = ".lock"


class DataDirError(Exception):
    """The data directory cannot be used; the message says why (a service stops at start)."""


class DataDirInUseError(DataDirError):
    """Another process holds the data directory."""


class DataDirLock:
    """The lock on one data directory, held until `release()` or the process's exit."""

    def __init__(self, directory: Path, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the file drops the flock
            self._fd = None

    def __enter__(self) -> DataDirLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def lock_data_dir(directory: Path, holder: str) -> DataDirLock:
    """Create `directory` if needed and lock it for this process; `holder` (say "broker 2")
    is written into the lock file beside the pid, for the message a second process gets.
    DataDirInUseError when another process holds it, DataDirError when it cannot be a
    directory of this process's."""
    path = directory / LOCK_FILE
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:  # a file in the way, no permission, a read-only filesystem
        raise DataDirError(
            f"cannot use {directory} as a data directory: {error.strerror} "
            f"({error.filename or path})"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = _read_owner(fd)
        os.close(fd)
        raise DataDirInUseError(
            f"data directory {directory} is in use by {owner or 'another process'}: two "
            "processes on one directory would corrupt it; stop that one first, or give this "
            "one its own directory"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{holder} (pid {os.getpid()})\n".encode(), 0)
    return DataDirLock(directory, fd)


def _read_owner(fd: int) -> str:
    """What the holder wrote into the lock file ("broker 2 (pid 4242)"), or "" if unreadable."""
    try:
        return os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""
