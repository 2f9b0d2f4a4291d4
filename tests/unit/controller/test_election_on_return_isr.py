"""Goal: a broker that comes back and leads a partition whose whole ISR was fenced at once
(session expiry found them silent in the same check) leads with an ISR of the live members
only. The fenced members stayed in the ISR (KIP-966: an ISR is never emptied), and the new
leader keeps every ISR member for a full replica.lag.time.max.ms before it may shrink it, so
with them in it an acks=all produce waited for brokers that were down, for up to 30 s.

Method: the pure control plane with the real replay, as tests/unit/controller/test_control_plane.py.
"""

from __future__ import annotations

from samsa.metadata.image import NO_LEADER
from samsa.services.controller import control_plane as cp
from tests.unit.controller.test_control_plane import cluster, commit, create, heartbeat


def test_the_returning_leader_leads_with_the_live_members_of_the_isr() -> None:
    image, _ = create(cluster(3), "t", partitions=3, factor=3)
    image = commit(image, cp.fence_brokers(image, [1, 2, 3]))
    for state in image.topics["t"].partitions.values():
        assert state.leader == NO_LEADER and set(state.isr) == {1, 2, 3}
    image, _ = heartbeat(image, 2)  # broker 2 is back and caught up: unfenced
    assert not image.brokers[2].fenced
    for state in image.topics["t"].partitions.values():
        assert state.leader == 2
        assert state.isr == (2,), "brokers 1 and 3 are fenced: not in sync with the new leader"
    image, _ = heartbeat(image, 3)  # 3 is back later: its leader adds it when it catches up
    for state in image.topics["t"].partitions.values():
        assert state.leader == 2 and state.isr == (2,)
