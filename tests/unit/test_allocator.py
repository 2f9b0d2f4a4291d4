"""Goal: every service keeps large buffers in its heap (common/allocator.py), unless the operator
set glibc's own malloc variables or the C library is not glibc; and the tuning does what it is
for: a buffer of a MiB allocated and freed again and again stops page-faulting.

Method: the pure `plan` under hand-made environments; then real processes (glibc only), each
allocating and freeing 1 MiB 100 times and counting its own minor page faults, with and without
`tune_for_large_buffers`."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from samsa.common import allocator

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def test_on_glibc_both_thresholds_are_raised():
    assert allocator.plan({}, "linux", "glibc") == [
        (allocator.M_MMAP_THRESHOLD, 16 * 1024 * 1024),
        (allocator.M_TRIM_THRESHOLD, 64 * 1024 * 1024),
    ]


@pytest.mark.parametrize("name", allocator.OPERATOR_VARIABLES)
def test_an_operators_malloc_setting_is_left_alone(name: str):
    assert allocator.plan({name: "131072"}, "linux", "glibc") == f"unchanged: {name} is set"
    assert allocator.plan({name: ""}, "linux", "glibc") != f"unchanged: {name} is set"


@pytest.mark.parametrize(("system", "libc"), [("linux", ""), ("darwin", ""), ("win32", "")])
def test_other_c_libraries_are_left_alone(system: str, libc: str):
    assert allocator.plan({}, system, libc) == allocator.NOT_GLIBC


FAULTS = """
import resource, sys
from samsa.common import allocator
outcome = allocator.tune_for_large_buffers() if sys.argv[1] == "tune" else "default"
chunk = b"x" * (1 << 20)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(100):
    copy = bytes(bytearray(chunk))
    del copy
print(outcome, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str, env: dict[str, str] | None = None) -> tuple[str, int]:
    answer = subprocess.run(
        [sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, check=True, env=env
    )
    outcome, faults = answer.stdout.rsplit(maxsplit=1)
    return outcome, int(faults)


@pytest.mark.skipif(not GLIBC, reason="mallopt's thresholds are glibc's")
def test_tuning_stops_a_reused_large_buffer_from_page_faulting():
    _, untuned = _faults("default")
    outcome, tuned = _faults("tune")
    assert outcome == allocator.TUNED
    # 100 MiB of fresh pages untuned (~25,600 4-KiB faults at the least) against the first
    # MiB's pages only.
    assert untuned > 20_000, untuned
    assert tuned < untuned / 10, (tuned, untuned)


@pytest.mark.skipif(not GLIBC, reason="mallopt's thresholds are glibc's")
def test_an_operators_setting_wins_in_a_real_process():
    env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": "131072"}
    outcome, faults = _faults("tune", env)
    assert outcome == "unchanged: MALLOC_TRIM_THRESHOLD_ is set"
    assert faults > 20_000, faults  # glibc's own behaviour, untouched
