"""Goal: the replication core's answers in the corners a review of it against Kafka's semantics
found wrong (DESIGN §4): each test here failed before its fix.

Method: the pure cores (`PartitionReplica`, `LeaderReplication`) with numbers for offsets and
times, and, where the request path decides, a leader's `PartitionHost` over a real log in
tmp_path read by its own `PartitionReader` as a follower's fetch is.
"""

from __future__ import annotations

from samsa.metadata.image import PartitionState
from samsa.services.broker.replica.partition_replica import PartitionReplica

ME = 1
REPLICAS = (1, 2, 3)
PROPOSAL = {"eligible": {1, 2, 3}, "lag_max_ms": 1000, "replica_fetch_ms": {}}


def state(isr: tuple[int, ...] = REPLICAS, partition_epoch: int = 0) -> PartitionState:
    return PartitionState(0, REPLICAS, isr, ME, 0, partition_epoch)


def test_an_accepted_answer_without_a_proposal_in_flight_blocks_no_isr_change():
    """An AlterPartition answer reaches the ISR manager after its topic was deleted and created
    again under the same name: the new partition (its partition epochs start over at 0) must
    not wait for the old one's partition epoch, or no follower could ever leave or join its
    ISR and acks=all writes would wait on a dead follower for ever."""
    replica = PartitionReplica(ME)
    replica.become_leader(0, state(), log_end_offset=5, now_ms=0)
    replica.follower_fetched(2, 5, 5, now_ms=1000)
    replica.proposal_accepted(partition_epoch=7)  # the deleted topic's answer
    assert replica.isr_to_propose(now_ms=1500, log_end_offset=5, **PROPOSAL) == (1, 2)
