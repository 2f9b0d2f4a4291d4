"""Goal: the replication throttle's pure parts (KIP-73) do what the broker relies on: the byte
rate over sliding windows, the throttled-replica lists (`*`, pairs, garbage refused with a
message saying what to write), the rates from the broker's own resource, and the rule that a
replica in the ISR is never throttled.

Method: drive RateQuota and ReplicationThrottles with a hand-moved clock (milliseconds) and
images built by hand; no I/O.
"""

from __future__ import annotations

import dataclasses

import pytest

from samsa.common.errors import InvalidConfigError
from samsa.metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage
from samsa.metadata.replication_throttles import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    LONG_MAX,
    ThrottledReplicas,
    broker_rates,
    parse_rate,
    parse_throttled_replicas,
)
from samsa.services.broker.replica.replication_throttle import (
    RateQuota,
    ReplicationThrottles,
    is_throttled,
)


def test_rate_is_bytes_over_the_span_at_least_one_window() -> None:
    quota = RateQuota(bound=1000)
    quota.record(500, now_ms=0)
    assert quota.rate(0) == 500  # span floored at one window: 500 B over 1 s
    assert not quota.is_exceeded(0)
    assert quota.room(0) == 500
    quota.record(600, now_ms=100)
    assert quota.is_exceeded(100)
    assert quota.room(100) == 0
    # Two seconds later the same bytes span 2 s: 550 B/s, under the bound again.
    assert quota.rate(2000) == 550
    assert not quota.is_exceeded(2000)
    assert quota.room(2000) == 2000 - 1100


def test_old_windows_expire() -> None:
    quota = RateQuota(bound=100, window_ms=1000, windows=3)
    quota.record(10_000, now_ms=0)
    assert quota.is_exceeded(2500)
    assert quota.rate(3000) == 0  # the 0 ms window is out of the 3 s horizon
    assert not quota.is_exceeded(3000)


def test_sustained_rate_stays_near_the_bound() -> None:
    """A sender that moves whatever `room` allows every 50 ms averages the bound."""
    quota = RateQuota(bound=200_000)
    sent = 0
    for now_ms in range(0, 20_000, 50):
        room = quota.room(now_ms)
        if room:
            chunk = min(room, 64 * 1024)
            quota.record(chunk, now_ms)
            sent += chunk
    assert 0.8 * 200_000 * 20 <= sent <= 1.1 * 200_000 * 20


def test_unbounded_quota_is_never_exceeded() -> None:
    quota = RateQuota()
    quota.record(10**12, now_ms=0)
    assert not quota.is_exceeded(0)
    assert quota.room(0) == LONG_MAX


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("*", ThrottledReplicas(every=True)),
        (" * ", ThrottledReplicas(every=True)),
        ("", ThrottledReplicas()),
        ("0:1,0:2, 1:2", ThrottledReplicas(pairs=frozenset({(0, 1), (0, 2), (1, 2)}))),
    ],
)
def test_throttled_replicas_parse(text: str, expected: ThrottledReplicas) -> None:
    assert parse_throttled_replicas(LEADER_REPLICAS, text) == expected


@pytest.mark.parametrize("text", ["0", "0:1:2", "a:1", "0:-1", "*,0:1", "0:1,", "0:99999999999"])
def test_throttled_replicas_garbage_is_refused(text: str) -> None:
    with pytest.raises(InvalidConfigError, match=LEADER_REPLICAS):
        parse_throttled_replicas(LEADER_REPLICAS, text)


@pytest.mark.parametrize("text", ["-1", "1.5", "fast", "", str(LONG_MAX + 1)])
def test_rate_garbage_is_refused(text: str) -> None:
    with pytest.raises(InvalidConfigError, match=LEADER_RATE):
        parse_rate(LEADER_RATE, text)


def test_in_isr_is_never_throttled() -> None:
    every = ThrottledReplicas(every=True)
    assert is_throttled(every, 0, 1, in_isr=False)
    assert not is_throttled(every, 0, 1, in_isr=True)
    pairs = ThrottledReplicas(pairs=frozenset({(0, 1)}))
    assert is_throttled(pairs, 0, 1, in_isr=False)
    assert not is_throttled(pairs, 0, 2, in_isr=False)  # another broker's replica
    assert not is_throttled(pairs, 1, 1, in_isr=False)  # another partition


def _image(broker_configs: dict[str, str], topic_configs: dict[str, str]) -> MetadataImage:
    empty = MetadataImage.empty()
    configs = {(BROKER_RESOURCE, "1"): broker_configs, (TOPIC_RESOURCE, "t"): topic_configs}
    return dataclasses.replace(empty, topics={"t": object()}, configs=configs)  # type: ignore[dict-item]


def test_rates_come_from_the_brokers_own_resource() -> None:
    image = _image({LEADER_RATE: "100", FOLLOWER_RATE: "nonsense"}, {})
    assert broker_rates(image, 1) == (100, LONG_MAX)
    assert broker_rates(image, 2) == (LONG_MAX, LONG_MAX)


def test_leader_room_only_for_listed_replicas_outside_the_isr() -> None:
    image = _image({LEADER_RATE: "1000"}, {LEADER_REPLICAS: "0:1"})
    throttles = ReplicationThrottles(broker_id=1)
    assert throttles.leader_room(image, "t", 0, replica_in_isr=False, now_ms=0) == 1000
    assert throttles.leader_room(image, "t", 0, replica_in_isr=True, now_ms=0) is None
    assert throttles.leader_room(image, "t", 1, replica_in_isr=False, now_ms=0) is None
    throttles.record_leader(1000, now_ms=0)
    assert throttles.leader_room(image, "t", 0, replica_in_isr=False, now_ms=10) == 0
    assert throttles.throttle_events["leader"] == 1
    assert throttles.throttled_bytes["leader"] == 1000
    # No rate on this broker: not throttled, whatever the list says.
    assert ReplicationThrottles(2).leader_room(image, "t", 0, False, 0) is None


def test_follower_held_while_its_quota_is_exceeded() -> None:
    image = _image({FOLLOWER_RATE: "1000"}, {FOLLOWER_REPLICAS: "*"})
    throttles = ReplicationThrottles(broker_id=1)
    assert throttles.follower_held(image, "t", 3, in_isr=False, now_ms=0) is False
    throttles.record_follower(5000, now_ms=0)
    assert throttles.follower_held(image, "t", 3, in_isr=False, now_ms=10) is True
    assert throttles.follower_held(image, "t", 3, in_isr=True, now_ms=10) is None
    assert throttles.follower_held(image, "t", 3, in_isr=False, now_ms=6000) is False
