"""An OS crash for the partition-log tests: the page cache is lost, only what was fsynced stays.

Not a test module: imported by the tests beside it (pytest puts this folder on sys.path).

Model (stricter than ext4's ordered mode, so a test passing here does not lean on luck):
- a file's contents survive only as of its last fsync/fdatasync; a file never synced comes back
  empty (a torn snapshot fails its CRC the same way);
- a directory's entries (creations, renames, deletions) survive only as of the directory's last
  fsync; a name created since comes back missing, a name deleted since comes back.
Contents are kept by inode, so a temp file fsynced and then renamed keeps its contents under the
new name. Every file removed or replaced while the recorder runs stays open here until `close`,
so its inode number is never reused for a later file (which would inherit its synced contents).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest


class OsCrash:
    """Records what fsync made durable in `directory`; `crash` puts the directory back to it."""

    def __init__(self, directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.directory = directory
        self.synced: list[str] = []  # the names fsynced, in order ("." for the directory)
        self._contents: dict[int, bytes] = {}  # inode -> contents as of its last fsync
        self._names: dict[str, int] = {}  # the directory's entries as of its last fsync
        self._pinned: list[int] = []  # descriptors of removed files (see the module docstring)
        self._durable_now()
        for name in ("fsync", "fdatasync"):
            monkeypatch.setattr(os, name, self._syncing(getattr(os, name)))
        monkeypatch.setattr(os, "unlink", self._pinning(os.unlink, 0))
        monkeypatch.setattr(os, "replace", self._pinning(os.replace, 1))

    def durable(self, name: str) -> bytes | None:
        """What `name` would hold after a crash now (None: it would be missing)."""
        inode = self._names.get(name)
        return None if inode is None else self._contents.get(inode, b"")

    def is_durable(self, name: str) -> bool:
        """`name` would survive a crash now with exactly its present contents."""
        return self.durable(name) == (self.directory / name).read_bytes()

    def crash(self) -> None:
        """Put the directory back to what the last fsyncs made durable. Close the log's
        descriptors first; the files left are durable from now on (a new baseline)."""
        durable = {name: self.durable(name) or b"" for name in self._names}
        for name in os.listdir(self.directory):
            (self.directory / name).unlink()
        for name, data in durable.items():
            (self.directory / name).write_bytes(data)
        self._durable_now()

    def close(self) -> None:
        for fd in self._pinned:
            os.close(fd)
        self._pinned.clear()

    def _durable_now(self) -> None:
        self._contents, self._names = {}, {}
        if not self.directory.exists():
            return
        for name in os.listdir(self.directory):
            path = self.directory / name
            self._names[name] = path.stat().st_ino
            self._contents[path.stat().st_ino] = path.read_bytes()

    def _syncing(self, real: Any) -> Any:
        def synced(fd: int) -> None:
            real(fd)
            status = os.fstat(fd)
            if stat.S_ISDIR(status.st_mode):
                if status.st_ino == self.directory.stat().st_ino:
                    self._names = {
                        name: (self.directory / name).stat().st_ino
                        for name in os.listdir(self.directory)
                    }
                    self.synced.append(".")
                return
            path = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if status.st_nlink and path.parent == self.directory:
                self._contents[status.st_ino] = path.read_bytes()
                self.synced.append(path.name)

        return synced

    def _pinning(self, real: Any, target_argument: int) -> Any:
        def removing(*args: Any, **kwargs: Any) -> None:
            with contextlib.suppress(FileNotFoundError):
                self._pinned.append(os.open(args[target_argument], os.O_RDONLY))
            real(*args, **kwargs)

        return removing
