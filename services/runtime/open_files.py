"""The process's open-files limit, and the connection bound it allows.

Why. A client connection is a file descriptor, and so is every segment, index and snapshot
file a broker opens. Were connections bounded by max.connections alone, a process whose
open-files limit is lower (1,024 is a common soft default) would let strangers' connections take
the descriptors its logs need. So a service raises its soft limit to the hard limit as it
starts (as the Go runtime does for every program), and serves at most half of what it then
has as connections, whatever max.connections says. The pure part (`raised_soft_limit`,
`connections_bound`) is tested directly; `raise_open_files_limit` and `open_files_limit` are the
thin calls to the OS.
"""

from __future__ import annotations

import resource

# What an unlimited hard limit is raised to: the Linux kernel's default fs.nr_open.
UNLIMITED_TARGET = 1 << 20
# The fewest connections a service serves, however low its open-files limit.
CONNECTIONS_FLOOR = 64


def raised_soft_limit(soft: int, hard: int) -> int:
    """The soft limit to set: the hard limit (UNLIMITED_TARGET when it is unlimited), never
    below the soft limit already in force."""
    target = UNLIMITED_TARGET if hard == resource.RLIM_INFINITY else hard
    if soft == resource.RLIM_INFINITY:
        return soft
    return max(soft, target)


def connections_bound(configured: int, open_files: int) -> int:
    """The connections a service serves: `configured` (max.connections), and at most half of
    its open-files limit, but for that never fewer than CONNECTIONS_FLOOR."""
    if open_files == resource.RLIM_INFINITY:
        return configured
    return min(configured, max(CONNECTIONS_FLOOR, open_files // 2))


def raise_open_files_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE as far as it may go; the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = raised_soft_limit(soft, hard)
    if wanted != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError):  # above fs.nr_open, or a sandbox refusing it: keep it
            return soft
    return wanted


def open_files_limit() -> int:
    """This process's soft RLIMIT_NOFILE."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
