"""Broker lifecycle and partition leadership: registration, heartbeats, fencing, elections.

Pure decisions over the committed image (see control_plane.py). The rules (DESIGN §2, §4):
brokers register fenced (epoch = the registration's offset) and are unfenced once a heartbeat shows
they applied the log up to their own registration; a second live process with the same id is
refused. A broker asking to shut down is fenced and marked in controlled shutdown (KIP-841):
until it registers again no heartbeat unfences it. Fencing a broker (session expired, controlled
shutdown, re-registration) moves each leadership it holds to the first live ISR member in
replica order, leader epoch + 1; with none, to a live eligible leader replica (KIP-966,
eligible_leaders.py: a replica that left the ISR while it was below min.insync.replicas); with
none, the partition goes offline and keeps its last ISR member, which leads again when it comes
back, unless the topic allows unclean election. A broker registering after an unclean shutdown
(its clean-shutdown file does not name its previous registration) leaves every ELR, and leaves
an ISR even as its last member when another replica is eligible: it may have lost its unflushed
tail. ISR changes come from leaders (AlterPartition, isr_control.py). A replica that found its
own log corrupt (ReportCorruptReplica) leaves the ISR (or the ELR) — and hands its leadership to
a live ISR member — before it truncates; with no other live ISR member the report is refused and
it keeps its log.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from samsa.common.errors import ErrorCode
from samsa.metadata.image import (
    NO_LEADER,
    BrokerRegistration,
    MetadataImage,
    PartitionState,
    TopicImage,
)
from samsa.services.controller.control_result import ControlResult, refused_with_state
from samsa.services.controller.eligible_leaders import (
    elect_without_isr,
    eligible_after,
    min_insync_replicas,
    partition_change,
)
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
                internal_endpoint=request.internal_endpoint,
            )
        )
    ]
    # The new incarnation starts fenced: whatever the old one led must move or go offline.
    unclean = set() if _shut_down_cleanly(existing, request) else {request.broker_id}
    records += _leadership_moves(image, {request.broker_id}, unclean=unclean)
    return ControlResult(records, c.RegisterBrokerResponse(broker_epoch=image.end_offset))


def _shut_down_cleanly(
    existing: BrokerRegistration | None, request: c.RegisterBrokerRequest
) -> bool:
    """Whether the registering broker holds everything its previous registration held (KIP-966):
    its clean-shutdown file names that registration's epoch, or it is the same process (a retry,
    or registering again after STALE_BROKER_EPOCH: its page cache never went away)."""
    if existing is None:
        return False
    if existing.incarnation_id == request.incarnation_id:
        return True
    return (
        request.HasField("previous_broker_epoch")
        and request.previous_broker_epoch == existing.broker_epoch
    )


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
    if request.want_shutdown or broker.in_controlled_shutdown:
        # KIP-841: a heartbeat without want_shutdown for a registration in controlled shutdown
        # was sent before it and overtaken (retried across controllers): it unfences nothing.
        response.is_fenced = True
        response.should_shut_down = True
        return ControlResult(_controlled_shutdown(image, broker.broker_id), response)
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


def _controlled_shutdown(image: MetadataImage, broker_id: int) -> list[m.MetadataRecord]:
    """Fence the broker marked in controlled shutdown, and move its leaderships. Why the mark,
    in the log: a heartbeat of the same epoch sent before want_shutdown may land after it; with
    the mark no controller, this one or the next after a failover, unfences the broker for it,
    so no election picks it and no leader adds it to an ISR while it stops (isr_control.py)."""
    broker = image.brokers[broker_id]
    if broker.in_controlled_shutdown:
        return []
    fence = m.FenceBrokerRecord(
        broker_id=broker_id, broker_epoch=broker.broker_epoch, in_controlled_shutdown=True
    )
    return [m.MetadataRecord(fence_broker=fence), *_leadership_moves(image, {broker_id})]


def _live(image: MetadataImage, excluded: set[int]) -> set[int]:
    return {
        broker_id
        for broker_id, broker in image.brokers.items()
        if not broker.fenced and broker_id not in excluded
    }


def _topic_partitions(image: MetadataImage) -> Iterable[tuple[TopicImage, PartitionState]]:
    for _, topic in sorted(image.topics.items()):
        for _, state in sorted(topic.partitions.items()):
            yield topic, state


def _leadership_moves(
    image: MetadataImage, leaving: set[int], *, unclean: Set[int] = frozenset()
) -> list[m.MetadataRecord]:
    """PartitionChanges taking `leaving` out of leaderships and ISRs, and `unclean` (a broker
    registering after an unclean shutdown) out of the ELRs too (eligible_leaders.py). An ISR
    keeps its last members (they may come back), unless they come back unclean and another
    replica is eligible: then it may be empty, the partition offline until one is live. When
    none would be left in either, the ISR keeps (or takes back) the last ones anyone knows of:
    nothing better exists, and an offline partition nobody may lead helps no one (Kafka elects
    its last known leader then)."""
    live = _live(image, leaving)
    records = []
    for topic, state in _topic_partitions(image):
        if (
            state.leader not in leaving
            and not leaving.intersection(state.isr)
            and not unclean.intersection(state.elr)
        ):
            continue
        min_isr = min_insync_replicas(image, topic.name)
        isr = [replica for replica in state.isr if replica not in leaving]
        if not isr:
            isr = [replica for replica in state.isr if replica not in unclean]  # clean: kept
        elr = eligible_after(state, isr, min_isr, unclean=unclean)
        if not isr and not elr:  # the only copies anyone knows of
            isr = list(state.isr) or [r for r in state.replicas if r in state.elr]
        leader = state.leader
        if state.leader in leaving:
            leader = next((r for r in state.replicas if r in isr and r in live), NO_LEADER)
            if leader == NO_LEADER:
                # No live ISR member: an eligible replica leads; else, if the operator chose
                # availability, an out-of-sync one, which may have lost records.
                leader, isr, elr = elect_without_isr(
                    state, isr, elr, live, min_isr, unclean_allowed=_unclean_allowed(image, topic)
                )
        record = partition_change(topic.topic_id, state, leader=leader, isr=isr, elr=elr)
        if record is not None:
            records.append(record)
    return records


def _unclean_allowed(image: MetadataImage, topic: TopicImage) -> bool:
    return unclean_allowed(image, topic.name)


def preferred_leader_elections(image: MetadataImage) -> ControlResult[None]:
    """Give leadership back to preferred replicas (the first of each replica list) that are
    live and in sync (auto.leader.rebalance.enable), so leadership spreads evenly again after
    a broker returns."""
    live = _live(image, set())
    records = [
        m.MetadataRecord(
            partition_change=m.PartitionChangeRecord(
                topic_id=topic.topic_id, partition=state.partition, leader=state.replicas[0]
            )
        )
        for topic, state in _topic_partitions(image)
        if state.leader not in (state.replicas[0], NO_LEADER)
        and state.replicas[0] in live
        and state.replicas[0] in state.isr
    ]
    return ControlResult(records, None)


def report_corrupt_replica(
    image: MetadataImage, request: c.ReportCorruptReplicaRequest
) -> ControlResult[c.ReportCorruptReplicaResponse]:
    """Take a replica whose own log is corrupt out of the ISR (or the ELR), and out of the
    leadership if it leads (the first live ISR member in replica order takes over, leader
    epoch + 1).

    Why before it truncates (DESIGN §4): an ISR member with a shortened log could be elected and
    lose acknowledged records. Why refuse when no other live ISR member exists: the reporter's
    log, corrupt batch and all, is then the best copy of the acknowledged records; truncating it
    would lose them, and an empty ISR would leave nobody to elect cleanly. The same holds for
    an eligible leader replica (KIP-966) when the ISR is empty and no other replica is
    eligible: once out of the ELR, only an unclean election could bring the partition back."""
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
    reporter = {request.broker_id}
    if request.broker_id not in state.isr and request.broker_id not in state.elr:
        return _report_answer(response, state, ErrorCode.NONE, "")  # already out: truncate
    live = _live(image, reporter)
    isr = [replica for replica in state.isr if replica != request.broker_id]
    successors = [replica for replica in state.replicas if replica in isr and replica in live]
    if request.broker_id in state.isr and not successors:
        return _report_answer(
            response,
            state,
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            f"broker {request.broker_id} is the only live in-sync replica of {where}: its log "
            f"(corrupt from offset {request.first_corrupt_offset}) is the best copy; keep it",
        )
    if request.broker_id not in state.isr and not (set(state.isr) | set(state.elr)) - reporter:
        return _report_answer(
            response,
            state,
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            f"broker {request.broker_id} is the only eligible leader replica of {where}: its "
            f"log (corrupt from offset {request.first_corrupt_offset}) is the best copy; keep it",
        )
    # It truncates once answered: never eligible to lead on what it is about to cut (KIP-966).
    elr = eligible_after(state, isr, min_insync_replicas(image, topic.name), unclean=reporter)
    leader = successors[0] if state.leader == request.broker_id else state.leader
    record = partition_change(topic.topic_id, state, leader=leader, isr=isr, elr=elr)
    assert record is not None  # it leaves the ISR or the ELR
    response.leader = leader
    response.leader_epoch = state.leader_epoch + (leader != state.leader)
    response.partition_epoch = state.partition_epoch + 1
    response.isr.extend(isr)
    return ControlResult([record], response)


def _report_answer(
    response: c.ReportCorruptReplicaResponse,
    state: PartitionState | None,
    code: int,
    message: str,
) -> ControlResult[c.ReportCorruptReplicaResponse]:
    refused_with_state(response, state, code, message)
    return ControlResult([], response)


def _elections_on_return(image: MetadataImage, broker_id: int) -> list[m.MetadataRecord]:
    """Offline partitions whose ISR holds the returning broker get it as leader, with the live
    members of the ISR (members fenced together with it stay fenced: the leader would wait for
    them a whole replica.lag.time.max.ms before it may drop them); those whose ELR holds it and
    whose ISR has no live member get it as leader alone in the ISR (KIP-966); those of topics
    allowing unclean election and without a live ISR or ELR member get their first live
    replica (maybe the returning broker) as leader and sole ISR member, as Kafka does."""
    live = _live(image, set()) | {broker_id}
    records = []
    for topic, state in _topic_partitions(image):
        if state.leader != NO_LEADER or broker_id not in (*state.isr, *state.elr):
            continue
        min_isr = min_insync_replicas(image, topic.name)
        isr = [replica for replica in state.isr if replica in live]
        if broker_id not in isr:
            if isr:
                continue  # a live ISR member leads (it would have been elected already)
            isr = [broker_id]  # an eligible leader replica
        elr = eligible_after(state, isr, min_isr)
        record = partition_change(topic.topic_id, state, leader=broker_id, isr=isr, elr=elr)
        if record is not None:
            records.append(record)
    for name in sorted(image.topics):
        if unclean_allowed(image, name):
            records += unclean_elections(image, name, live)
    return records
