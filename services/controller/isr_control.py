"""ISR changes proposed by partition leaders (AlterPartition), checked against the committed image.

Pure decisions (see control_plane.py). A leader proposes ISRs for many partitions per request,
committed as one batch (KIP-497); each proposal is checked against the broker, leader and
partition epochs, and each replica joining the ISR against its current broker epoch (KIP-903).
Fenced brokers never join an ISR, nor do brokers in controlled shutdown (KIP-841). An ISR
shrinking below min.insync.replicas keeps the replicas it drops as eligible leaders, and one
reaching it again clears them (KIP-966, eligible_leaders.py).
"""

from __future__ import annotations

from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage, PartitionState
from samsa.services.controller.control_result import ControlResult, refused_with_state
from samsa.services.controller.eligible_leaders import (
    eligible_after,
    min_insync_replicas,
    partition_change,
)
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m


def alter_partition(
    image: MetadataImage, request: c.AlterPartitionRequest
) -> ControlResult[c.AlterPartitionResponse]:
    """A leader's ISR proposals for many partitions, each checked and answered on its own, the
    accepted ones committed together as one metadata batch (KIP-497's batched AlterPartition).

    Why batched: a broker that must change thousands of ISRs at once (after a restart, or after
    taking over every leadership) would otherwise cost one Raft commit, and one metadata batch
    every broker replays, per partition. Why the committed image suffices for every item: a
    partition named twice is refused (INVALID_REQUEST, the second time), so no item depends on a
    change an earlier item of the same request made. The broker epoch belongs to the request: a
    stale one refuses every partition with STALE_BROKER_EPOCH. The size bound
    (`limits.alter_partition_items_max`) is the servicer's."""
    response = c.AlterPartitionResponse()
    records: list[m.MetadataRecord] = []
    stale = _stale_broker(image, request.broker_id, request.broker_epoch)
    named: set[tuple[str, int]] = set()
    for item in request.partitions:
        result = response.partitions.add(topic=item.topic, partition=item.partition)
        if (item.topic, item.partition) in named:
            refused_with_state(
                result,
                None,
                ErrorCode.INVALID_REQUEST,
                f"{item.topic}-{item.partition} is named more than once in this request; "
                "propose each partition once",
            )
            continue
        named.add((item.topic, item.partition))
        record = _alter_one(image, request.broker_id, stale, item, result)
        if record is not None:
            records.append(record)
    return ControlResult(records, response)


def _stale_broker(image: MetadataImage, broker_id: int, broker_epoch: int) -> str | None:
    """Why the proposing broker's epoch is not current; None when it is."""
    broker = image.brokers.get(broker_id)
    if broker is not None and broker.broker_epoch == broker_epoch:
        return None
    return f"broker {broker_id} epoch {broker_epoch} is not current: register again"


def _alter_one(
    image: MetadataImage,
    broker_id: int,
    stale: str | None,
    item: c.AlterPartitionRequest.PartitionIsr,
    result: c.AlterPartitionResponse.PartitionResult,
) -> m.MetadataRecord | None:
    """Check one proposal and fill its result; the PartitionChangeRecord when it changes the ISR."""
    topic = image.topics.get(item.topic)
    state = None if topic is None else topic.partitions.get(item.partition)
    where = f"{item.topic}-{item.partition}"
    if topic is None or state is None:
        refused_with_state(
            result, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{where} does not exist"
        )
        return None
    problem = (
        (ErrorCode.STALE_BROKER_EPOCH, stale)
        if stale is not None
        else _alter_problem(image, broker_id, item, state, where)
    )
    if problem is not None:
        refused_with_state(result, state, *problem)
        return None
    result.leader = state.leader
    result.leader_epoch = state.leader_epoch
    if tuple(item.new_isr) == state.isr:
        result.partition_epoch = state.partition_epoch
        result.isr.extend(state.isr)
        return None
    # KIP-966: below min.insync.replicas the replicas dropped stay eligible to lead.
    new_isr = list(item.new_isr)
    elr = eligible_after(state, new_isr, min_insync_replicas(image, topic.name))
    result.partition_epoch = state.partition_epoch + 1
    result.isr.extend(item.new_isr)
    return partition_change(topic.topic_id, state, leader=state.leader, isr=new_isr, elr=elr)


def _alter_problem(
    image: MetadataImage,
    broker_id: int,
    item: c.AlterPartitionRequest.PartitionIsr,
    state: PartitionState,
    where: str,
) -> tuple[ErrorCode, str] | None:
    """Why a current broker's proposal for an existing partition is refused; None if it is not."""
    if state.leader != broker_id:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {broker_id} does not lead {where}"
    if state.leader_epoch != item.leader_epoch:
        return (
            ErrorCode.FENCED_LEADER_EPOCH,
            f"leader epoch {item.leader_epoch} of {where} is not the current {state.leader_epoch}",
        )
    if state.partition_epoch != item.partition_epoch:
        return (
            ErrorCode.INVALID_UPDATE_VERSION,
            f"partition epoch {item.partition_epoch} of {where} is not the current "
            f"{state.partition_epoch}",
        )
    new_isr = list(item.new_isr)
    stopping = [
        r
        for r in new_isr
        if r not in state.isr
        and (registered := image.brokers.get(r)) is not None
        and registered.in_controlled_shutdown
    ]
    if stopping:
        # KIP-841: it may fetch while it drains, but it stops soon; in the ISR, acks=all
        # writes would wait for it until replica.lag.time.max.ms.
        return (
            ErrorCode.INELIGIBLE_REPLICA,
            f"broker(s) {stopping} would join the ISR of {where} while in controlled shutdown; "
            "a broker joins again once it registers anew",
        )
    ineligible = [
        r
        for r in new_isr
        if r not in state.replicas
        or (registered := image.brokers.get(r)) is None
        or (registered.fenced and r not in state.isr)
    ]
    if broker_id not in new_isr or len(set(new_isr)) != len(new_isr) or ineligible:
        return (
            ErrorCode.INELIGIBLE_REPLICA,
            f"proposed ISR {new_isr} of {where} must be distinct replicas, include the leader "
            f"and add no fenced broker (ineligible: {ineligible})",
        )
    return _stale_joiner(image, item, state, where)


def _stale_joiner(
    image: MetadataImage,
    item: c.AlterPartitionRequest.PartitionIsr,
    state: PartitionState,
    where: str,
) -> tuple[ErrorCode, str] | None:
    """KIP-903: a replica joins the ISR only on fetches made under its current registration.
    The leader's metadata may not show a restart yet, and the restarted broker may have lost
    the tail its previous incarnation fetched (nothing is fsynced by default); so each joiner's
    broker epoch, as the leader saw it fetch, must be the current one (an unlisted one is not)."""
    seen = {member.broker_id: member.broker_epoch for member in item.new_isr_with_epochs}
    for replica in item.new_isr:
        current = image.brokers[replica].broker_epoch  # registered: checked by the caller
        if replica not in state.isr and seen.get(replica, -1) != current:
            return (
                ErrorCode.INELIGIBLE_REPLICA,
                f"broker {replica} would join the ISR of {where} on fetches under broker epoch "
                f"{seen.get(replica, 'unknown')}, not its current {current}: it may have "
                "restarted and lost them; propose it once the leader sees it fetch under it",
            )
    return None
