"""Keep large buffers in the process's heap instead of handing them back to the kernel after each
use: what every Samsa service does at start, and what an application can ask for
(`samsa.client.tune_allocator()`).

Why. glibc's malloc serves a request above M_MMAP_THRESHOLD (128 KiB at start, raised as
mapped blocks are freed) with a fresh `mmap`, and gives the free top of its heap back to the
kernel once it exceeds M_TRIM_THRESHOLD. Record batches are exactly such buffers, allocated and
freed once per request: a produce batch of 256 KiB, a fetch answer of a MiB, each copied a few
times on its way between the socket and the log. Each new one page-faults all its pages back
in: allocating and freeing 1 MiB 100 times costs ~48,000 minor page faults by default and ~500
with the settings below (`tests/unit/test_allocator.py` counts them), and a copy of 256 KiB into
a fresh buffer cost ~10x its `memcpy` on the development machine. docs/benchmarks.md
("Large buffers kept in the heap") has the A/B figures.

What. `mallopt(M_MMAP_THRESHOLD, 16 MiB)` and `mallopt(M_TRIM_THRESHOLD, 64 MiB)`: buffers up
to 16 MiB come from the heap, and up to 64 MiB of free heap is kept for the next ones. The
price is memory: a process keeps up to ~64 MiB it would otherwise have returned (plus what
fragmentation holds).

When not. On a C library other than glibc there is nothing to do. When the environment sets
any of glibc's own `MALLOC_*_` tunables for these (`MALLOC_MMAP_THRESHOLD_`,
`MALLOC_TRIM_THRESHOLD_`, `MALLOC_TOP_PAD_`, `MALLOC_MMAP_MAX_`) or `GLIBC_TUNABLES`, the
operator has chosen: nothing is changed.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from collections.abc import Mapping

MMAP_THRESHOLD_BYTES = 16 * 1024 * 1024  # glibc's ceiling is 32 MiB on 64-bit
TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024
# mallopt's parameter numbers (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
OPERATOR_VARIABLES = (
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "MALLOC_MMAP_MAX_",
    "GLIBC_TUNABLES",
)

TUNED = "tuned"
NOT_GLIBC = "unchanged: not glibc"


def plan(environ: Mapping[str, str], system: str, libc: str) -> list[tuple[int, int]] | str:
    """The mallopt calls to make, or why none: `system` as `sys.platform`, `libc` as the first
    item of `platform.libc_ver()`. Pure."""
    chosen = [name for name in OPERATOR_VARIABLES if environ.get(name)]
    if chosen:
        return f"unchanged: {chosen[0]} is set"
    if not system.startswith("linux") or libc != "glibc":
        return NOT_GLIBC
    return [(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES), (M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)]


def tune_for_large_buffers(environ: Mapping[str, str] | None = None) -> str:
    """Apply `plan` to this process; return what was done ("tuned", or "unchanged: why"), which
    the services log in their `starting` line. Safe to call more than once."""
    calls = plan(os.environ if environ is None else environ, sys.platform, platform.libc_ver()[0])
    if isinstance(calls, str):
        return calls
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    for parameter, value in calls:
        if mallopt(parameter, value) != 1:  # glibc answers 1 on success
            return f"unchanged: mallopt({parameter}, {value}) was refused"
    return TUNED
