"""Broker lifecycle and partition leadership: registration, heartbeats, fencing, elections, ISR.

Pure decisions over the committed image (see control_plane.py). The rules (DESIGN §2, §4):
brokers register fenced (epoch = the registration's offset) and are unfenced once a heartbeat shows
they applied the log up to their own registration; a second live process with the same id is
refused. Fencing a broker (session expired, controlled shutdown, re-registration) moves each
leadership it holds to the first live ISR member in replica order, leader epoch + 1; with none, the
partition goes offline and keeps its last ISR member (KIP-966), which leads again when it comes
back, unless the topic allows unclean election. ISR changes come from leaders (AlterPartition,
many partitions per request, committed as one batch), checked against the broker, leader and
partition epochs, and each replica joining it against its current broker epoch (KIP-903). A
replica that found its own log corrupt (ReportCorruptReplica) leaves the ISR — and hands its
leadership to a live ISR member — before it truncates; with no other live ISR member the report
is refused and it keeps its log.
"""

from __future__ import annotations

from collections.abc import Iterable

from samsa.common.errors import ErrorCode
from samsa.metadata.image import (
    NO_LEADER,
    MetadataImage,
    PartitionState,
)
from samsa.services.controller.control_result import ControlResult
from samsa.services.controller.liveness import BrokerLiveness
from samsa.services.controller.unclean_election import unclean_allowed, unclean_elections
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

# --- brokers ---------------------------------------------------------------------------------


def register_broker(
    image: MetadataImage,
    request: c.RegisterBrokerRequest,
    *,
    liveness: BrokerLiveness,
    now_ms: int,
    session_timeout_ms: int,
) -> ControlResult[c.RegisterBrokerResponse]:
    existing = image.brokers.get(request.broker_id)
    if (
        existing is not None
        and existing.incarnation_id != request.incarnation_id
        and not existing.fenced
        and liveness.is_alive(existing.broker_id, existing.broker_epoch, now_ms, session_timeout_ms)
    ):
        response = c.RegisterBrokerResponse(broker_epoch=-1)
        response.status.error_code = ErrorCode.DUPLICATE_BROKER_REGISTRATION  # type: ignore[assignment]
        response.status.error_message = (
            f"broker id {request.broker_id} is registered by another live process "
            f"({existing.endpoint}); give each broker its own id"
        )
        return ControlResult([], response)
    records = [
        m.MetadataRecord(
            register_broker=m.RegisterBrokerRecord(
                broker_id=request.broker_id,
                incarnation_id=request.incarnation_id,
                endpoint=request.endpoint,
                rack=request.rack,
            )
        )
    ]
    # The new incarnation starts fenced: whatever the old one led must move or go offline.
    records += _leadership_moves(image, {request.broker_id})
    return ControlResult(records, c.RegisterBrokerResponse(broker_epoch=image.end_offset))


def broker_heartbeat(
    image: MetadataImage, request: c.BrokerHeartbeatRequest
) -> ControlResult[c.BrokerHeartbeatResponse]:
    broker = image.brokers.get(request.broker_id)
    response = c.BrokerHeartbeatResponse()
    if broker is None or broker.broker_epoch != request.broker_epoch:
        response.status.error_code = ErrorCode.STALE_BROKER_EPOCH  # type: ignore[assignment]
        response.status.error_message = (
            f"broker {request.broker_id} epoch {request.broker_epoch} is not current "
            f"({'unregistered' if broker is None else broker.broker_epoch}): register again"
        )
        response.is_fenced = True
        return ControlResult([], response)
    caught_up = request.metadata_offset > broker.broker_epoch
    response.is_caught_up = caught_up
    if request.want_shutdown:
        response.is_fenced = True
        response.should_shut_down = True
        return ControlResult(
            [] if broker.fenced else fence_brokers(image, [broker.broker_id]).records, response
        )
    if broker.fenced and caught_up:
        records = [
            m.MetadataRecord(
                unfence_broker=m.UnfenceBrokerRecord(
                    broker_id=broker.broker_id, broker_epoch=broker.broker_epoch
                )
            )
        ]
        records += _elections_on_return(image, broker.broker_id)
        response.is_fenced = False
        return ControlResult(records, response)
    response.is_fenced = broker.fenced
    return ControlResult([], response)


def fence_brokers(image: MetadataImage, broker_ids: Iterable[int]) -> ControlResult[None]:
    """Fence these unfenced brokers and move their leaderships (session expiry, shutdown)."""
    fenced = {
        broker_id
        for broker_id in broker_ids
        if (broker := image.brokers.get(broker_id)) is not None and not broker.fenced
    }
    records = [
        m.MetadataRecord(
            fence_broker=m.FenceBrokerRecord(
                broker_id=broker_id, broker_epoch=image.brokers[broker_id].broker_epoch
            )
        )
        for broker_id in sorted(fenced)
    ]
    records += _leadership_moves(image, fenced)
    return ControlResult(records, None)


def _live(image: MetadataImage, excluded: set[int]) -> set[int]:
    return {
        broker_id
        for broker_id, broker in image.brokers.items()
        if not broker.fenced and broker_id not in excluded
    }


def _partitions(image: MetadataImage) -> Iterable[tuple[bytes, PartitionState]]:
    for _, topic in sorted(image.topics.items()):
        for _, state in sorted(topic.partitions.items()):
            yield topic.topic_id, state


def _leadership_moves(image: MetadataImage, leaving: set[int]) -> list[m.MetadataRecord]:
    """PartitionChanges taking `leaving` out of leaderships and ISRs (never emptying an ISR)."""
    live = _live(image, leaving)
    records = []
    for topic_id, state in _partitions(image):
        if state.leader not in leaving and not leaving.intersection(state.isr):
            continue
        isr = [replica for replica in state.isr if replica not in leaving]
        if not isr:
            isr = list(state.isr)  # KIP-966: keep the last members; they may come back
        change = m.PartitionChangeRecord(topic_id=topic_id, partition=state.partition)
        if tuple(isr) != state.isr:
            change.isr.ids.extend(isr)
        if state.leader in leaving:
            change.leader = next((r for r in state.replicas if r in isr and r in live), NO_LEADER)
            if change.leader == NO_LEADER and _unclean_allowed(image, topic_id):
                # No live ISR member: an out-of-sync replica leads and may have lost records
                # (the operator chose availability); the ISR restarts from it alone.
                unclean = next((r for r in state.replicas if r in live), NO_LEADER)
                if unclean != NO_LEADER:
                    change.leader = unclean
                    change.ClearField("isr")
                    change.isr.ids.append(unclean)
        if change.HasField("isr") or change.HasField("leader"):
            records.append(m.MetadataRecord(partition_change=change))
    return records


def _unclean_allowed(image: MetadataImage, topic_id: bytes) -> bool:
    topic = image.topic_by_id(topic_id)
    return topic is not None and unclean_allowed(image, topic.name)


def preferred_leader_elections(image: MetadataImage) -> ControlResult[None]:
    """Give leadership back to preferred replicas (the first of each replica list) that are
    live and in sync (auto.leader.rebalance.enable), so leadership spreads evenly again after
    a broker returns."""
    live = _live(image, set())
    records = [
        m.MetadataRecord(
            partition_change=m.PartitionChangeRecord(
                topic_id=topic_id, partition=state.partition, leader=state.replicas[0]
            )
        )
        for topic_id, state in _partitions(image)
        if state.leader not in (state.replicas[0], NO_LEADER)
        and state.replicas[0] in live
        and state.replicas[0] in state.isr
    ]
    return ControlResult(records, None)


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
            _alter_refused(
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
        _alter_refused(
            result, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{where} does not exist"
        )
        return None
    problem = (
        (ErrorCode.STALE_BROKER_EPOCH, stale)
        if stale is not None
        else _alter_problem(image, broker_id, item, state, where)
    )
    if problem is not None:
        _alter_refused(result, state, *problem)
        return None
    result.leader = state.leader
    result.leader_epoch = state.leader_epoch
    if tuple(item.new_isr) == state.isr:
        result.partition_epoch = state.partition_epoch
        result.isr.extend(state.isr)
        return None
    change = m.PartitionChangeRecord(topic_id=topic.topic_id, partition=state.partition)
    change.isr.ids.extend(item.new_isr)
    result.partition_epoch = state.partition_epoch + 1
    result.isr.extend(item.new_isr)
    return m.MetadataRecord(partition_change=change)


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


def _alter_refused(
    result: c.AlterPartitionResponse.PartitionResult,
    state: PartitionState | None,
    code: int,
    message: str,
) -> None:
    """Answer a refused proposal with the partition's committed state (when it exists), so the
    leader learns which epochs and ISR its next proposal must start from."""
    result.error_code = code  # type: ignore[assignment]
    result.error_message = message
    if state is not None:
        result.leader = state.leader
        result.leader_epoch = state.leader_epoch
        result.partition_epoch = state.partition_epoch
        result.isr.extend(state.isr)


def report_corrupt_replica(
    image: MetadataImage, request: c.ReportCorruptReplicaRequest
) -> ControlResult[c.ReportCorruptReplicaResponse]:
    """Take a replica whose own log is corrupt out of the ISR, and out of the leadership if it
    leads (the first live ISR member in replica order takes over, leader epoch + 1).

    Why before it truncates (DESIGN §4): an ISR member with a shortened log could be elected and
    lose acknowledged records. Why refuse when no other live ISR member exists: the reporter's
    log, corrupt batch and all, is then the best copy of the acknowledged records; truncating it
    would lose them, and an empty ISR would leave nobody to elect cleanly."""
    response = c.ReportCorruptReplicaResponse()
    topic = image.topics.get(request.topic)
    state = None if topic is None else topic.partitions.get(request.partition)
    where = f"{request.topic}-{request.partition}"
    if topic is None or state is None:
        return _report_answer(
            response, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{where} does not exist"
        )
    broker = image.brokers.get(request.broker_id)
    if broker is None or broker.broker_epoch != request.broker_epoch:
        return _report_answer(
            response,
            state,
            ErrorCode.STALE_BROKER_EPOCH,
            f"broker {request.broker_id} epoch {request.broker_epoch} is not current",
        )
    if request.broker_id not in state.replicas:
        return _report_answer(
            response,
            state,
            ErrorCode.INELIGIBLE_REPLICA,
            f"broker {request.broker_id} holds no replica of {where}",
        )
    if request.broker_id not in state.isr:
        return _report_answer(response, state, ErrorCode.NONE, "")  # already out: truncate
    live = _live(image, {request.broker_id})
    isr = [replica for replica in state.isr if replica != request.broker_id]
    successors = [replica for replica in state.replicas if replica in isr and replica in live]
    if not successors:
        return _report_answer(
            response,
            state,
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            f"broker {request.broker_id} is the only live in-sync replica of {where}: its log "
            f"(corrupt from offset {request.first_corrupt_offset}) is the best copy; keep it",
        )
    change = m.PartitionChangeRecord(topic_id=topic.topic_id, partition=state.partition)
    change.isr.ids.extend(isr)
    leader, leader_epoch = state.leader, state.leader_epoch
    if state.leader == request.broker_id:
        change.leader = leader = successors[0]
        leader_epoch += 1
    response.leader, response.leader_epoch = leader, leader_epoch
    response.partition_epoch = state.partition_epoch + 1
    response.isr.extend(isr)
    return ControlResult([m.MetadataRecord(partition_change=change)], response)


def _report_answer(
    response: c.ReportCorruptReplicaResponse,
    state: PartitionState | None,
    code: int,
    message: str,
) -> ControlResult[c.ReportCorruptReplicaResponse]:
    response.error_code = code  # type: ignore[assignment]
    response.error_message = message
    if state is not None:
        response.leader = state.leader
        response.leader_epoch = state.leader_epoch
        response.partition_epoch = state.partition_epoch
        response.isr.extend(state.isr)
    return ControlResult([], response)


def _elections_on_return(image: MetadataImage, broker_id: int) -> list[m.MetadataRecord]:
    """Offline partitions whose ISR holds the returning broker get it as leader, with the live
    members of the ISR (members fenced together with it stay fenced: the leader would wait for
    them a whole replica.lag.time.max.ms before it may drop them); those of topics allowing
    unclean election and without a live ISR member get their first live replica (maybe the
    returning broker) as leader and sole ISR member, as Kafka does."""
    live = _live(image, set()) | {broker_id}
    records = []
    for topic_id, state in _partitions(image):
        if state.leader != NO_LEADER or broker_id not in state.isr:
            continue
        change = m.PartitionChangeRecord(
            topic_id=topic_id, partition=state.partition, leader=broker_id
        )
        isr = [replica for replica in state.isr if replica in live]
        if tuple(isr) != state.isr:
            change.isr.ids.extend(isr)
        records.append(m.MetadataRecord(partition_change=change))
    for name in sorted(image.topics):
        if unclean_allowed(image, name):
            records += unclean_elections(image, name, live)
    return records
