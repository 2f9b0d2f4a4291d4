"""Leader elections an operator asks for: ElectLeaders (KIP-460, Kafka's kafka-leader-election.sh).

Theory of operation. The controller elects leaders on its own: when a leader is fenced
(broker_control.py), when a replica comes back, and, every leader.imbalance.check.interval.ms,
the preferred replicas (`preferred_leader_elections`). ElectLeaders lets an operator ask for an
election now, partition by partition (or for every partition), and learn each outcome:

- PREFERRED: the preferred replica (the first of the replica list; during a reassignment the
  target's first, as every election here) leads, when it is live (unfenced) and in the ISR; the
  ISR stays as it is, the leader epoch moves on. ELECTION_NOT_NEEDED when it leads already;
  PREFERRED_LEADER_NOT_AVAILABLE when it is fenced or out of the ISR (it would lead without
  records the ISR acknowledged). This is what the automatic loop does, on demand, with answers:
  the way to spread leadership again at once after brokers came back, or with the loop off.
- UNCLEAN: only for a partition without a live leader (offline). A live ISR member leads if
  there is one, else a live eligible leader replica (KIP-966), both clean; else the first live
  replica in `unclean_order` (replicas a reassignment is adding last: they may hold nothing),
  alone in the ISR and the ELR cleared, whatever the topic's unclean.leader.election.enable:
  the operator chose availability for this partition, and the records only the lost ISR held
  are gone. ELECTION_NOT_NEEDED when a live leader leads; ELIGIBLE_LEADERS_NOT_AVAILABLE when
  no replica is live.

Every election is a PartitionChangeRecord setting `leader`, so replay bumps the leader epoch and
the old leader's followers and producers learn of it through the metadata log. All accepted
elections commit as one batch. A request naming no partition asks for every partition, and its
answer leaves out those that needed no election (as Kafka's), so that a healthy cluster answers
with nothing. The count bound (`limits.admin_request_items_max`) is the servicer's.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from samsa.common.errors import ErrorCode
from samsa.metadata.image import NO_LEADER, MetadataImage, PartitionState, TopicImage
from samsa.services.controller.control_result import ControlResult
from samsa.services.controller.eligible_leaders import (
    elect_without_isr,
    eligible_after,
    min_insync_replicas,
    partition_change,
)
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

PREFERRED = c.ELECTION_TYPE_PREFERRED
UNCLEAN = c.ELECTION_TYPE_UNCLEAN

Outcome = m.MetadataRecord | tuple[ErrorCode, str]


def elect_leaders(
    image: MetadataImage, request: c.ElectLeadersRequest
) -> ControlResult[c.ElectLeadersResponse]:
    """The elections the request asks for, answered partition by partition (see the module
    doc); the records of those accepted commit together."""
    response = c.ElectLeadersResponse()
    if request.election_type not in (PREFERRED, UNCLEAN):
        response.status.error_code = ErrorCode.INVALID_REQUEST  # type: ignore[assignment]
        response.status.error_message = (
            f"election_type {request.election_type} is not one of PREFERRED "
            f"({PREFERRED}) and UNCLEAN ({UNCLEAN}): say which election to run"
        )
        return ControlResult([], response)
    live = {b for b, broker in image.brokers.items() if not broker.fenced}
    records: list[m.MetadataRecord] = []
    every = not request.partitions
    named: set[tuple[str, int]] = set()
    for topic, number in _asked(image, request):
        key = (topic, number)
        if key in named:
            outcome: Outcome = (
                ErrorCode.INVALID_REQUEST,
                f"{topic}-{number} is named more than once in this request; name each "
                "partition once",
            )
        else:
            outcome = _elect_one(image, request.election_type, topic, number, live)
        named.add(key)
        if isinstance(outcome, m.MetadataRecord):
            records.append(outcome)
            response.partitions.add(topic=topic, partition=number)
        elif not (every and outcome[0] == ErrorCode.ELECTION_NOT_NEEDED):
            code, message = outcome
            response.partitions.add(
                topic=topic,
                partition=number,
                error_code=code,  # type: ignore[arg-type]
                error_message=message,
            )
    return ControlResult(records, response)


def _asked(image: MetadataImage, request: c.ElectLeadersRequest) -> Iterable[tuple[str, int]]:
    """The partitions named, in order; none named: every partition, by topic and number."""
    if request.partitions:
        return [(item.topic, item.partition) for item in request.partitions]
    return [
        (name, number)
        for name, topic in sorted(image.topics.items())
        for number in sorted(topic.partitions)
    ]


def _elect_one(
    image: MetadataImage, election_type: int, topic_name: str, number: int, live: Set[int]
) -> Outcome:
    """The record electing this partition's leader, or why there is none."""
    where = f"{topic_name}-{number}"
    if number < 0:
        return ErrorCode.INVALID_REQUEST, f"{where}: a partition number is >= 0"
    topic = image.topics.get(topic_name)
    state = None if topic is None else topic.partitions.get(number)
    if topic is None or state is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{where} does not exist"
    if election_type == PREFERRED:
        return _preferred(topic, state, live, where)
    return _unclean(image, topic, state, live, where)


def _preferred(topic: TopicImage, state: PartitionState, live: Set[int], where: str) -> Outcome:
    preferred = state.replicas[0]
    if state.leader == preferred:
        return ErrorCode.ELECTION_NOT_NEEDED, f"{where}: its preferred replica {preferred} leads"
    if preferred not in live:
        return (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            f"{where}: its preferred replica {preferred} is not live (fenced or stopped); "
            "retry once it runs again",
        )
    if preferred not in state.isr:
        return (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            f"{where}: its preferred replica {preferred} is not in the ISR "
            f"{list(state.isr)}; retry once it has caught up and joined it",
        )
    record = partition_change(
        topic.topic_id, state, leader=preferred, isr=list(state.isr), elr=state.elr
    )
    assert record is not None  # the leader changes
    return record


def _unclean(
    image: MetadataImage, topic: TopicImage, state: PartitionState, live: Set[int], where: str
) -> Outcome:
    if state.leader != NO_LEADER and state.leader in live:
        return (
            ErrorCode.ELECTION_NOT_NEEDED,
            f"{where}: broker {state.leader} leads it; an unclean election is only for a "
            "partition without a live leader",
        )
    min_isr = min_insync_replicas(image, topic.name)
    in_sync = [replica for replica in state.isr if replica in live]
    if in_sync:  # a clean election is possible: the first live ISR member, as on its return
        leader, isr = next(r for r in state.replicas if r in in_sync), in_sync
        elr = eligible_after(state, isr, min_isr)
    else:
        leader, isr, elr = elect_without_isr(
            state, list(state.isr), state.elr, live, min_isr, unclean_allowed=True
        )
    if leader == NO_LEADER:
        return (
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            f"{where}: none of its replicas {list(state.replicas)} is live; start one of "
            "them, then retry",
        )
    record = partition_change(topic.topic_id, state, leader=leader, isr=isr, elr=elr)
    assert record is not None  # the leader changes (it was none, or not live)
    return record
