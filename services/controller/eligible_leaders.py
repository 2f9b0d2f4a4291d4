"""Eligible leader replicas (KIP-966): who may lead a partition when no ISR member is live. Pure.

Why. Nothing is fsynced by default, so a broker that loses power comes back without its unflushed
tail. Kept as the last member of an ISR and elected on its return, it would lead without records
it had acknowledged, and replicas holding them would follow it and truncate them away.

The rule. The high watermark does not move while the committed ISR is smaller than the topic's
min.insync.replicas (services/broker/replica/partition_replica.py). So a change that leaves the
ISR below it puts the replicas it took out into the partition's ELR: each held every record up
to a high watermark that now stands still. Once the ISR reaches min.insync.replicas again the
high watermark moves, and the ELR is cleared; a replica back in the ISR leaves it; so does a
broker registering after an unclean shutdown (`unclean`: it may have lost what it held), and a
replica that reports its own log corrupt. Lowering min.insync.replicas to the ISR's size clears
it too (the high watermark moves again without them). With min.insync.replicas 1 (the default)
there is never an ELR: Kafka promises nothing more there either.

Elections (`elect_without_isr`): a live ISR member first (the callers' own rule), else the first
live ELR member in replica order, alone in the ISR (the others stay eligible), else, where the
topic allows it, an unclean election (the first live replica, replicas a reassignment is adding
last, alone in the ISR, and the ELR cleared: its log now defines what is committed). Live means
unfenced, so a broker in controlled shutdown (always fenced) is never elected.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import replace

from samsa.metadata.image import NO_LEADER, MetadataImage, PartitionState
from samsa.metadata.topic_defaults import effective_topic_configs
from samsa.services.controller.unclean_election import unclean_order
from samsa.v1 import metadata_pb2 as m

MIN_ISR_CONFIG = "min.insync.replicas"
MIN_ISR_DEFAULT = 1  # the broker's default too (hosted_partition.py)


def min_insync_replicas(image: MetadataImage, topic: str) -> int:
    """The topic's committed min.insync.replicas (validated when set): its own, else the
    cluster-wide default, else the built-in one."""
    return int(effective_topic_configs(image, topic).get(MIN_ISR_CONFIG, MIN_ISR_DEFAULT))


def eligible_after(
    state: PartitionState, isr: list[int], min_isr: int, *, unclean: Set[int] = frozenset()
) -> tuple[int, ...]:
    """The ELR once the ISR goes from `state.isr` to `isr` (see the module doc), in replica
    order; `unclean` replicas may have lost records and are never eligible."""
    if len(isr) >= min_isr:
        return ()
    kept = (set(state.elr) | set(state.isr)) - set(isr) - unclean
    return tuple(replica for replica in state.replicas if replica in kept)


def elect_without_isr(
    state: PartitionState,
    isr: list[int],
    elr: tuple[int, ...],
    live: Set[int],
    min_isr: int,
    *,
    unclean_allowed: bool,
) -> tuple[int, list[int], tuple[int, ...]]:
    """Leader, ISR and ELR of a partition whose ISR (`isr`, ELR `elr`) has no live member:
    a live ELR member alone in the ISR, else an unclean leader if allowed, else none."""
    chosen = next((r for r in state.replicas if r in elr and r in live), NO_LEADER)
    if chosen != NO_LEADER:
        before = replace(state, isr=tuple(isr), elr=elr)
        return chosen, [chosen], eligible_after(before, [chosen], min_isr)
    if unclean_allowed:
        chosen = next((r for r in unclean_order(state) if r in live), NO_LEADER)
        if chosen != NO_LEADER:
            return chosen, [chosen], ()
    return NO_LEADER, isr, elr


def partition_change(
    topic_id: bytes,
    state: PartitionState,
    *,
    leader: int,
    isr: list[int],
    elr: tuple[int, ...],
) -> m.MetadataRecord | None:
    """The PartitionChangeRecord taking `state` to this leader, ISR and ELR (only the fields
    that differ); None when nothing does."""
    change = m.PartitionChangeRecord(topic_id=topic_id, partition=state.partition)
    if tuple(isr) != state.isr:
        change.isr.ids.extend(isr)
    if elr != state.elr:
        change.eligible_leader_replicas.SetInParent()
        change.eligible_leader_replicas.ids.extend(elr)
    if leader != state.leader:
        change.leader = leader
    if not any(change.HasField(name) for name in ("isr", "eligible_leader_replicas", "leader")):
        return None
    return m.MetadataRecord(partition_change=change)


def cleared_on_min_isr_change(
    image: MetadataImage, topic: str, configs: list[m.MetadataRecord]
) -> list[m.MetadataRecord]:
    """PartitionChanges clearing the ELRs of the topic's partitions whose ISR reaches the new
    min.insync.replicas that `configs` set (or the default, when they remove it): their high
    watermark moves again, past what the eligible replicas hold. Raised (or still above the
    ISR), the high watermark stays frozen and they keep every committed record, so they stay
    eligible; Kafka clears them on any change, which loses that for nothing."""
    changed = [record.config for record in configs if record.config.name == MIN_ISR_CONFIG]
    if not changed:
        return []
    if changed[-1].HasField("value"):
        new_min = int(changed[-1].value)
    else:  # removed: the cluster-wide default applies again, else the built-in one
        defaults = effective_topic_configs(image, topic, overrides={})
        new_min = int(defaults.get(MIN_ISR_CONFIG, MIN_ISR_DEFAULT))
    return cleared_for_min_isr(image, topic, new_min)


def cleared_for_min_isr(image: MetadataImage, topic: str, new_min: int) -> list[m.MetadataRecord]:
    """PartitionChanges clearing the ELRs of the topic's partitions whose ISR reaches
    `new_min`, the topic's new min.insync.replicas (see cleared_on_min_isr_change)."""
    topic_image = image.topics[topic]
    records = []
    for _, state in sorted(topic_image.partitions.items()):
        if state.elr and len(state.isr) >= new_min:
            change = m.PartitionChangeRecord(
                topic_id=topic_image.topic_id, partition=state.partition
            )
            change.eligible_leader_replicas.SetInParent()
            records.append(m.MetadataRecord(partition_change=change))
    return records
