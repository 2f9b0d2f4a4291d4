"""Goal: a service raises its open-files soft limit to the hard limit, and serves at most half
of that limit as connections, so that strangers' connections cannot take the descriptors its
segment files need (runtime/open_files.py).

Method: the pure functions on numbers; the OS call once, in this process (raising a soft limit
is harmless here)."""

from __future__ import annotations

import resource

from samsa.services.runtime.open_files import (
    CONNECTIONS_FLOOR,
    UNLIMITED_TARGET,
    connections_bound,
    open_files_limit,
    raise_open_files_limit,
    raised_soft_limit,
)

INFINITY = resource.RLIM_INFINITY


def test_the_soft_limit_goes_to_the_hard_one_and_never_down() -> None:
    assert raised_soft_limit(1_024, 524_288) == 524_288
    assert raised_soft_limit(1_024, INFINITY) == UNLIMITED_TARGET
    assert raised_soft_limit(4_096, 4_096) == 4_096
    assert raised_soft_limit(INFINITY, INFINITY) == INFINITY
    assert raised_soft_limit(2 * UNLIMITED_TARGET, INFINITY) == 2 * UNLIMITED_TARGET


def test_connections_are_at_most_half_the_open_files() -> None:
    assert connections_bound(10_000, 1_048_576) == 10_000
    assert connections_bound(10_000, 1_024) == 512
    assert connections_bound(10_000, INFINITY) == 10_000
    assert connections_bound(10_000, 20) == CONNECTIONS_FLOOR
    assert connections_bound(4, 1_048_576) == 4


def test_raising_leaves_the_soft_limit_at_least_where_it_was() -> None:
    before = open_files_limit()
    now = raise_open_files_limit()
    assert now == open_files_limit()
    assert before == INFINITY or now >= before
