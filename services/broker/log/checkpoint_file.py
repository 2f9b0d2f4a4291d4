"""Atomic small-file writes (checkpoints, the clean-shutdown marker) and directory fsyncs.

Theory of operation. A checkpoint must be either its old or its new content after a crash, never
a torn mix: write the bytes to `<name>.tmp`, fsync it, rename it over `<name>` (atomic on POSIX),
then fsync the directory so that the rename itself is durable. A reader that finds no file gets
None; a leftover `.tmp` from a crash mid-write is ignored by readers and deleted by `Log.open`.

Invariants: after `write_atomically` returns, the file holds exactly `data`, durably.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

TEMP_SUFFIX = ".tmp"


def fsync_directory(directory: Path) -> None:
    """Make renames, creations and deletions inside `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """Make `path`'s contents durable (its directory entry needs `fsync_directory` too)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """os.write until every byte is written (a regular file may take fewer per call)."""
    with memoryview(data) as view:
        written = 0
        while written < len(view):
            written += os.write(fd, view[written:])


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data`: temp file, fsync, rename, fsync the directory."""
    write_atomically_many({path: data})


def write_atomically_many(files: Mapping[Path, bytes]) -> None:
    """Replace each file of one directory atomically; one directory fsync covers the renames.
    Each file is old or new after a crash, independently of the others."""
    directories = {path.parent for path in files}
    assert len(directories) == 1, "one directory per call"
    for path, data in files.items():
        temporary = path.with_name(path.name + TEMP_SUFFIX)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    fsync_directory(directories.pop())


def read_if_exists(path: Path) -> bytes | None:
    """The file's bytes, or None when it does not exist."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
