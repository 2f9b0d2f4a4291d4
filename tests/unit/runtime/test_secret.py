"""Goal: the cluster secret file is created private and never overwritten, and loading refuses a
missing, unsafe, empty or short one with a message saying what to do.

Method: generate and load secrets in a temporary directory, then break one property at a time
(no file, a path through a file, mode 0644, a directory, whitespace only, too few characters,
bytes that are not UTF-8 text: a ClusterSecretError, never another exception that would end a
service in a traceback).
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from samsa.common import limits
from samsa.services.runtime.secret import ClusterSecretError, generate_secret, load_secret


def test_a_generated_secret_is_private_long_and_kept(tmp_path: Path) -> None:
    path = generate_secret(tmp_path / "cluster.secret")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    secret = load_secret(path)
    assert len(secret) >= limits.cluster_secret_length_min
    generate_secret(path)
    assert load_secret(path) == secret, "a second generate keeps the cluster's secret"


def write(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def write_bytes(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    path.chmod(0o600)
    return path


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.secret", "does not exist: controllers and brokers refuse"),
        (lambda d: write(d / "s", "x" * 43, 0o644), "chmod 600"),
        (lambda d: d, "is not a regular file"),
        (lambda d: write(d / "s", "  \n"), "is empty"),
        (lambda d: write(d / "s", "short"), "use at least"),
        (lambda d: write_bytes(d / "s", b"\xff\xfe" * 30), "is not text"),
        # A path through a file: stat() raised NotADirectoryError, and the service ended in a
        # traceback with exit code 1 instead of its one line and 2 (so did EACCES, ELOOP).
        (lambda d: write(d / "s", "x" * 43) / "inside", r"cannot read .* \(Not a directory\)"),
    ],
)
def test_an_unusable_secret_is_refused_saying_what_to_do(tmp_path: Path, make, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ClusterSecretError, match=message):
        load_secret(make(tmp_path))
