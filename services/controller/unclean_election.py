"""Unclean leader election of offline partitions, for topics with unclean.leader.election.enable.

Kafka elects an out-of-sync replica whenever a partition has no live ISR member (nor eligible
leader replica, KIP-966: one of those leads cleanly) and its topic allows it, not only at the
moment the last leader is fenced: when a replica comes back (its unfencing) and when the config
is turned on for a partition that is already offline (the operator's way out of an outage).
Both cases are here; fencing's own election is in broker_control.py. During a reassignment
(KIP-455) the replicas being added come last: out of the ISR they may hold nothing at all.
"""

from __future__ import annotations

from collections.abc import Set

from samsa.metadata.image import NO_LEADER, MetadataImage, PartitionState
from samsa.metadata.topic_defaults import effective_topic_configs
from samsa.v1 import metadata_pb2 as m

UNCLEAN_CONFIG = "unclean.leader.election.enable"


def unclean_allowed(image: MetadataImage, topic: str) -> bool:
    """Whether the topic's committed configs allow an out-of-sync replica to lead: its own
    setting, else the cluster-wide default (metadata/topic_defaults.py)."""
    return effective_topic_configs(image, topic).get(UNCLEAN_CONFIG) == "true"


def unclean_order(state: PartitionState) -> list[int]:
    """The replicas in the order an unclean election tries them: replica order, the ones a
    reassignment is adding last (they may never have copied anything)."""
    adding = set(state.adding)
    return [r for r in state.replicas if r not in adding] + list(state.adding)


def unclean_leader(state: PartitionState, live: Set[int]) -> int:
    """The replica an unclean election picks for an offline partition: the first live one in
    `unclean_order`, and only while no ISR or eligible leader replica is live (one would lead
    cleanly); NO_LEADER when there is none."""
    if state.leader != NO_LEADER or any(r in live for r in (*state.isr, *state.elr)):
        return NO_LEADER
    return next((replica for replica in unclean_order(state) if replica in live), NO_LEADER)


def unclean_elections(image: MetadataImage, topic: str, live: Set[int]) -> list[m.MetadataRecord]:
    """PartitionChanges electing an unclean leader (ISR: itself alone, no eligible leader
    replicas: its log now defines what is committed) for each offline partition of `topic`
    that has a live replica (the caller checks the topic allows it)."""
    records = []
    topic_image = image.topics[topic]
    for _, state in sorted(topic_image.partitions.items()):
        leader = unclean_leader(state, live)
        if leader == NO_LEADER:
            continue
        change = m.PartitionChangeRecord(
            topic_id=topic_image.topic_id, partition=state.partition, leader=leader
        )
        change.isr.ids.append(leader)
        if state.elr:
            change.eligible_leader_replicas.SetInParent()
        records.append(m.MetadataRecord(partition_change=change))
    return records
