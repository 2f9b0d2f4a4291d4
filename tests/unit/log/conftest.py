"""Fixtures the partition-log tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from os_crash import OsCrash


@pytest.fixture
def os_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[OsCrash]:
    """An OS-crash recorder of the log directory `tmp_path / "log"` (os_crash.py)."""
    recorder = OsCrash(tmp_path / "log", monkeypatch)
    yield recorder
    recorder.close()
