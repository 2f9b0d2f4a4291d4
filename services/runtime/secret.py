"""The cluster secret: what proves that a process is one of the cluster's own members.

Theory of operation. Two things rest on it:

- the controllers' Raft port. pysyncobj's transport unpickles whatever a peer sends (zlib +
  pickle), so an unauthenticated Raft port is remote code execution. With `password` set, every
  frame is a Fernet token (AES-128-CBC + HMAC-SHA256, key derived from the password with
  PBKDF2): a frame that does not verify is dropped and its connection closed *before* anything
  is unpickled;
- the calls brokers make as members (registration, heartbeats, AlterPartition, replica fetches):
  each carries an HMAC keyed by a key derived from the secret (membership.py), so a stranger who
  can reach a port cannot act as a broker.

Controllers and brokers therefore never run without it, and it is handled like an SSH key:

- `generate_secret` writes 32 random bytes, URL-safe base64, into a new file created with mode
  0600 (never overwriting one that exists: a second `samsa up` keeps the cluster's secret);
- `load_secret` refuses a file that is missing, empty, too short, or readable by anyone but its
  owner, with a message saying how to fix it. Every controller and broker of a cluster must load
  the same secret; a controller with another one never connects to its peers, and a broker with
  another one is refused (PERMISSION_DENIED) by the controllers and by the other brokers.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from samsa.common import limits

# Random bytes in a generated secret (256 bits), before base64.
SECRET_RANDOM_BYTES = 32


class ClusterSecretError(Exception):
    """The cluster secret file is missing or unsafe; the message says what to do."""


def generate_secret(path: Path) -> Path:
    """Create `path` holding a fresh secret, readable by its owner only; keep an existing one.

    The file is created with O_EXCL and mode 0600 in one step, so the secret is never readable
    by others, not even for an instant, and two concurrent callers cannot both write one.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_urlsafe(SECRET_RANDOM_BYTES) + "\n")
    return path


def load_secret(path: Path) -> str:
    """The secret in `path`, after checking that it exists, is private and is long enough."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise ClusterSecretError(
            f"the cluster secret file {path} does not exist: controllers and brokers refuse to "
            "start without one (it authenticates the Raft port and the calls between members). "
            "`samsa up` creates it; or run "
            f"`python -c 'import secrets; print(secrets.token_urlsafe(32))' > {path}` "
            f"and `chmod 600 {path}`, and give every controller and broker the same file"
        ) from None
    except OSError as error:  # a file where a directory should be, no permission, a loop
        raise ClusterSecretError(
            f"cannot read the cluster secret file {path} ({error.strerror})"
        ) from None
    if not stat.S_ISREG(mode):
        raise ClusterSecretError(f"the cluster secret {path} is not a regular file")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ClusterSecretError(
            f"the cluster secret file {path} is accessible by other users (mode "
            f"{stat.S_IMODE(mode):04o}): run `chmod 600 {path}`"
        )
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:
        raise ClusterSecretError(
            f"the cluster secret file {path} is not text (UTF-8): write one with "
            "secrets.token_urlsafe(32)"
        ) from None
    except OSError as error:
        raise ClusterSecretError(
            f"cannot read the cluster secret file {path} ({error.strerror})"
        ) from None
    if not secret:
        raise ClusterSecretError(f"the cluster secret file {path} is empty")
    if len(secret) < limits.cluster_secret_length_min:
        raise ClusterSecretError(
            f"the cluster secret in {path} has {len(secret)} characters; use at least "
            f"{limits.cluster_secret_length_min} (e.g. secrets.token_urlsafe(32))"
        )
    return secret
