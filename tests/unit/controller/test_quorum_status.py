"""Goal: DescribeQuorum's answer (services/controller/quorum_status.py) says what KIP-595's does,
in Samsa's two units: the leader and its term, the Raft commit index as high watermark, each
voter's match index and lag behind the leader's last Raft index (0 for the leader, -1 unknown),
whether it is connected, when the leader last heard from it and last saw it caught up; each
registered broker and coordinator as an observer with the metadata offset its last heartbeat
reported, its lag behind the leader's applied offset, and -1 for what was never reported.

Method: the pure core alone: ReplicationClock fed getStatus()-shaped dicts at chosen times,
ObserverReports fed heartbeats, describe_quorum over both and a hand-made image.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from samsa.metadata.image import MetadataImage
from samsa.services.controller.quorum_status import (
    BROKER,
    CONTROLLER,
    COORDINATOR,
    ObserverReports,
    RaftStatus,
    ReplicationClock,
    describe_quorum,
    lag,
)

A, B = "127.0.0.1:9102", "127.0.0.1:9103"  # controllers 2 and 3; the leader is 1
NODE_OF = {"127.0.0.1:9101": 1, A: 2, B: 3}


def status(match_a: int | None, match_b: int | None, *, connected_b: bool = True) -> dict:
    answer: dict[str, Any] = {"raft_term": 7, "commit_idx": 40, "state": 2}
    answer[f"partner_node_status_server_{A}"] = 2
    answer[f"partner_node_status_server_{B}"] = 2 if connected_b else 0
    if match_a is not None:
        answer[f"match_idx_server_{A}"] = match_a
    if match_b is not None:
        answer[f"match_idx_server_{B}"] = match_b
    return answer


def image(end_offset: int = 100) -> MetadataImage:
    brokers: dict[int, Any] = {5: None, 4: None}  # only the ids are read
    coordinators: dict[int, Any] = {9: None}
    empty = MetadataImage.empty()
    return replace(empty, end_offset=end_offset, brokers=brokers, coordinators=coordinators)


def answer(raft: RaftStatus, reports: ObserverReports | None = None) -> Any:
    return describe_quorum(
        raft,
        leader_id=1,
        node_of=NODE_OF,
        image=image(),
        observers=reports or ObserverReports(),
        cluster_id="c1",
    )


def test_lag_is_the_distance_to_the_leader_never_negative_and_unknown_stays_unknown() -> None:
    assert lag(42, 40) == 2
    assert lag(42, 42) == 0
    assert lag(42, 43) == 0
    assert lag(42, -1) == -1


def test_the_leader_comes_first_then_each_voter_with_its_lag() -> None:
    clock = ReplicationClock([B, A])
    raft = clock.sample(status(42, 30), last_index=42, last_message_ms={A: 900}, now_ms=1000)
    response = answer(raft)
    assert (response.cluster_id, response.leader_id, response.leader_epoch) == ("c1", 1, 7)
    assert response.high_watermark == 40 and response.metadata_offset == 100
    voters = [(v.node_id, v.log_end_offset, v.lag, v.connected) for v in response.voters]
    assert voters == [(1, 42, 0, True), (2, 42, 0, True), (3, 30, 12, True)]
    assert {v.kind for v in response.voters} == {CONTROLLER}
    leader, a, b = response.voters
    assert (leader.last_fetch_timestamp_ms, leader.last_caught_up_timestamp_ms) == (1000, 1000)
    assert (a.last_fetch_timestamp_ms, a.last_caught_up_timestamp_ms) == (900, 1000)
    assert (b.last_fetch_timestamp_ms, b.last_caught_up_timestamp_ms) == (-1, -1), "never"


def test_a_caught_up_time_stays_at_the_last_tick_it_was_caught_up() -> None:
    clock = ReplicationClock([A, B])
    clock.sample(status(42, 42), last_index=42, last_message_ms={}, now_ms=1000)
    raft = clock.sample(
        status(42, 42, connected_b=False), last_index=50, last_message_ms={}, now_ms=2000
    )
    b = answer(raft).voters[2]
    assert (b.lag, b.connected, b.last_caught_up_timestamp_ms) == (8, False, 1000)
    assert answer(raft).voters[1].last_caught_up_timestamp_ms == 1000, "42 < 50 too"


def test_a_follower_forgets_caught_up_times_and_an_unknown_match_is_unknown() -> None:
    clock = ReplicationClock([A, B])
    clock.sample(status(42, 42), last_index=42, last_message_ms={}, now_ms=1000)
    clock.reset()  # deposed, then elected again
    raft = clock.sample(status(None, 10), last_index=43, last_message_ms={}, now_ms=3000)
    a, b = answer(raft).voters[1:]
    assert (a.log_end_offset, a.lag, a.last_caught_up_timestamp_ms) == (-1, -1, -1)
    assert (b.log_end_offset, b.lag, b.last_caught_up_timestamp_ms) == (10, 33, -1)


def test_observers_are_the_registered_brokers_then_coordinators_with_their_reports() -> None:
    reports = ObserverReports()
    reports.report(BROKER, 4, 100, now_ms=500, leader_offset=100)  # caught up then
    reports.report(BROKER, 4, 97, now_ms=800, leader_offset=103)  # behind now
    reports.report(COORDINATOR, 9, 60, now_ms=700, leader_offset=100)
    reports.report(BROKER, 8, 100, now_ms=700, leader_offset=100)  # not in the image
    raft = ReplicationClock([A, B]).sample(
        status(42, 42), last_index=42, last_message_ms={}, now_ms=1000
    )
    observers = [
        (
            o.kind,
            o.node_id,
            o.log_end_offset,
            o.lag,
            o.last_fetch_timestamp_ms,
            o.last_caught_up_timestamp_ms,
        )
        for o in answer(raft, reports).observers
    ]
    assert observers == [
        (BROKER, 4, 97, 3, 800, 500),
        (BROKER, 5, -1, -1, -1, -1),  # registered, never heard from by this controller
        (COORDINATOR, 9, 60, 40, 700, -1),
    ]
