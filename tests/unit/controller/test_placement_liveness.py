"""Kafka's replica assignment, checked against its documented example, and broker sessions."""

from __future__ import annotations

import pytest

from samsa.metadata.placement import PlacementError, assign_replicas, rack_alternated
from samsa.services.controller.liveness import BrokerLiveness


def test_the_assignment_matches_kafkas_documented_example():
    # Kafka's AdminUtils example: 5 brokers, 10 partitions, 3 replicas, start index 0, shift 0.
    assignment = assign_replicas(10, 3, [0, 1, 2, 3, 4], start_index=0, first_shift=0)
    assert assignment[0] == [0, 1, 2]
    assert assignment[4] == [4, 0, 1]
    assert assignment[5] == [0, 2, 3], "after one round the followers shift by one more"
    assert assignment[9] == [4, 1, 2]


def test_new_partitions_continue_the_pattern():
    whole = assign_replicas(10, 2, [1, 2, 3], start_index=1, first_shift=2)
    tail = assign_replicas(4, 2, [1, 2, 3], start_index=1, first_shift=2, first_partition=6)
    assert tail == {p: whole[p] for p in range(6, 10)}


def test_rack_alternation_and_rack_aware_replicas():
    racks = {1: "a", 2: "a", 3: "b", 4: "c"}
    assert rack_alternated(racks, [1, 2, 3, 4]) == [1, 3, 4, 2]
    for replicas in assign_replicas(
        12, 3, [1, 2, 3, 4], start_index=2, first_shift=1, racks=racks
    ).values():
        assert len({racks[r] for r in replicas}) == 3


def test_impossible_placements_are_refused():
    with pytest.raises(PlacementError, match="larger than the 2"):
        assign_replicas(1, 3, [1, 2], start_index=0, first_shift=0)
    with pytest.raises(PlacementError):
        assign_replicas(0, 1, [1], start_index=0, first_shift=0)


def test_sessions_expire_per_incarnation_and_restart_on_activation():
    sessions = BrokerLiveness()
    sessions.heartbeat(1, broker_epoch=5, now_ms=1000)
    assert sessions.is_alive(1, 5, now_ms=1500, timeout_ms=1000)
    assert not sessions.is_alive(1, 4, now_ms=1500, timeout_ms=1000), "another incarnation"
    assert sessions.expired(now_ms=2500, timeout_ms=1000) == [1]
    sessions.reset_all(now_ms=2500)
    assert sessions.expired(now_ms=3000, timeout_ms=1000, registered={1: 5, 2: 9}) == []
    assert sessions.expired(now_ms=3600, timeout_ms=1000, registered={1: 5, 2: 9}) == [1, 2]
