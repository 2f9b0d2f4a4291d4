"""Goal: checkpoint files are replaced atomically, and reading tolerates a missing file.

Method: real files in tmp_path; a leftover temp file (a crash mid-write) must not affect what
a reader sees.
"""

from __future__ import annotations

from pathlib import Path

from samsa.services.broker.log.checkpoint_file import TEMP_SUFFIX, read_if_exists, write_atomically


def test_write_replaces_and_read_tolerates_absence(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    assert read_if_exists(path) is None
    write_atomically(path, b"0\n1\n42\n")
    assert read_if_exists(path) == b"0\n1\n42\n"
    write_atomically(path, b"0\n1\n43\n")
    assert path.read_bytes() == b"0\n1\n43\n"
    assert not (tmp_path / (path.name + TEMP_SUFFIX)).exists()


def test_a_torn_temp_file_does_not_change_what_is_read(tmp_path: Path) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    write_atomically(path, b"0\n1\n7\n")
    (tmp_path / (path.name + TEMP_SUFFIX)).write_bytes(b"0\n1\n9")  # crash before the rename
    assert read_if_exists(path) == b"0\n1\n7\n"
