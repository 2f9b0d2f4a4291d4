"""Goal: a follower throttles (KIP-73) only the throttled partitions it is not in the ISR of:
while its follower quota is used up they leave the fetch session (so the leader's session
forgets them and sends nothing), a partition in the ISR stays, and once the quota has room they
come back at their position; with no follower rate set nothing changes.

Method: `ReplicaFetchers._throttle` against test_replica_fetcher_leadership's in-memory host,
whose image carries the throttle configs, and a FetchSessionClient; the quota is filled by hand.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

from test_replica_fetcher_leadership import FOLLOWER, LEADER, Host, hosted

from samsa.common.fetch_session_client import FetchSessionClient
from samsa.metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE
from samsa.metadata.replication_throttles import FOLLOWER_RATE, FOLLOWER_REPLICAS
from samsa.services.broker.broker_metrics import NO_METRICS
from samsa.services.broker.replica.follower_apply import follower_position
from samsa.services.broker.replica.replica_fetcher import ReplicaFetchers
from samsa.services.broker.replica.replication_throttle import RateQuota

MOVING, CAUGHT_UP = ("t", 0), ("t", 1)


def throttled_host(rate: str | None) -> Host:
    """A host following t-0 (outside its ISR) and t-1 (in it) from LEADER, every replica of t
    throttled on the follower side; `rate` this broker's follower rate (None: unset)."""
    host = Host()
    host.metrics = NO_METRICS  # type: ignore[attr-defined]
    configs = {(TOPIC_RESOURCE, "t"): {FOLLOWER_REPLICAS: "*"}}
    if rate is not None:
        configs[(BROKER_RESOURCE, str(FOLLOWER))] = {FOLLOWER_RATE: rate}
    host.image = SimpleNamespace(
        brokers=host.image.brokers,
        configs=configs,
        topics={"t": object()},
        topic_configs=lambda topic: configs.get((TOPIC_RESOURCE, topic), {}),
    )
    host.partitions[MOVING] = hosted()
    host.partitions[MOVING].isr = (LEADER,)
    host.partitions[CAUGHT_UP] = hosted()
    return host


def following(host: Host) -> tuple[ReplicaFetchers, FetchSessionClient]:
    fetchers = ReplicaFetchers(host, FOLLOWER, SimpleNamespace(member_id=FOLLOWER))  # type: ignore[arg-type]
    session = fetchers._sessions[LEADER] = FetchSessionClient()
    for key in (MOVING, CAUGHT_UP):
        fetchers._leader_of[key] = LEADER
        session.set(key, follower_position(host.partitions[key]))
    return fetchers, session


def test_throttled_partitions_leave_the_session_while_the_quota_is_used_up() -> None:
    host = throttled_host("1000")
    fetchers, session = following(host)
    fetchers._throttle(LEADER, session)
    assert set(session.wanted) == {MOVING, CAUGHT_UP}, "the quota has room"
    host.throttles.record_follower(10_000, now_ms=_now_ms())
    fetchers._throttle(LEADER, session)
    assert set(session.wanted) == {CAUGHT_UP}, "in the ISR: never throttled"
    fetchers._follow(MOVING)  # a metadata change meanwhile does not bring it back
    assert set(session.wanted) == {CAUGHT_UP}
    host.throttles.follower = RateQuota(1000)  # the windows have passed
    fetchers._throttle(LEADER, session)
    assert set(session.wanted) == {MOVING, CAUGHT_UP}
    assert session.wanted[MOVING] == follower_position(host.partitions[MOVING])


def test_without_a_follower_rate_nothing_is_held() -> None:
    host = throttled_host(None)
    fetchers, session = following(host)
    host.throttles.record_follower(10**9, now_ms=_now_ms())
    fetchers._throttle(LEADER, session)
    assert set(session.wanted) == {MOVING, CAUGHT_UP}


def _now_ms() -> int:
    return int(time.time() * 1000)  # the fetcher's clock
