"""Retiring a broker for good: UnregisterBroker (KIP-631; Kafka's `kafka-cluster.sh unregister`).

Theory of operation. A broker stopped for good stays registered, fenced, until an operator says
it is gone: the controller cannot tell a broker that died for ever from one that will be back in
an hour. `unregister_broker` writes the UnregisterBrokerRecord (broker id, broker epoch) that
replay applies by dropping the registration (metadata/replay.py); the broker then leaves
DescribeCluster, and a process started later with the same id registers as a new broker, its
epoch the offset of its new registration (register_broker finds no previous one to compare).

Three refusals, each saying what to do first:

- no broker is registered under the id: BROKER_ID_NOT_REGISTERED (Kafka's 102, as Kafka);
- the broker still runs: unfenced, or fenced but heartbeating within broker.session.timeout.ms
  (a broker that is catching up, or in controlled shutdown, heartbeats while fenced). Such a
  process would only register again at its next heartbeat (STALE_BROKER_EPOCH answers "register
  again"), so the unregistration would undo itself: stop it first. Kafka unregisters it anyway;
  refusing tells the operator at once instead;
- the broker still holds replicas: a replica of any partition (an adding or a removing one
  included) or an eligible leader replica (ELR ⊆ replicas). Replay keeps no check that replica
  lists name registered brokers, so unregistering it would leave partitions naming a broker
  that no longer exists: fetchers, placement and reassignment targets would all meet it. Kafka
  instead strips the broker from every ISR and ELR and leaves it in the replica lists; here the
  operator moves them first (`samsa reassign`, AlterPartitionReassignments), which also keeps
  every partition at its replication factor.

Why INVALID_REQUEST for the last two: Kafka has no code for "still running" or "not empty" (it
refuses neither), INVALID_REPLICA_ASSIGNMENT names a bad replica list in the request (there is
none here), and BROKER_NOT_AVAILABLE means a broker cannot be reached, the opposite of the first
case. INVALID_REQUEST is not retriable, which is right: retrying changes nothing until the
operator acts; the message says how.

Liveness is the active controller's (liveness.py): it decides with `BrokerLiveness.is_alive`,
which after a failover counts every broker alive for one session timeout (the new controller has
not heard them yet), so an unregistration just after a failover is refused for that long. Once
committed, the servicer forgets the broker's session, so no fencing decision ever looks at it.
"""

from __future__ import annotations

from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.services.controller.control_result import ControlResult
from samsa.services.controller.liveness import BrokerLiveness
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

# How many of the partitions a refused broker still holds the message names (it says how many).
NAMED_PARTITIONS_MAX = 5


def unregister_broker(
    image: MetadataImage,
    request: c.UnregisterBrokerRequest,
    *,
    liveness: BrokerLiveness,
    now_ms: int,
    session_timeout_ms: int,
) -> ControlResult[c.UnregisterBrokerResponse]:
    """The UnregisterBrokerRecord of a stopped broker that holds no replica, or the refusal
    saying what to do first (see the module doc)."""
    broker_id = request.broker_id
    broker = image.brokers.get(broker_id)
    if broker is None:
        return _refused(
            ErrorCode.BROKER_ID_NOT_REGISTERED,
            f"no broker is registered with id {broker_id}; `samsa cluster` lists the "
            "registered brokers",
        )
    if not broker.fenced:
        return _refused(
            ErrorCode.INVALID_REQUEST,
            f"broker {broker_id} is running (unfenced, at {broker.endpoint}): stop it first, "
            "then unregister it once the controller has fenced it",
        )
    if liveness.is_alive(broker_id, broker.broker_epoch, now_ms, session_timeout_ms):
        return _refused(
            ErrorCode.INVALID_REQUEST,
            f"broker {broker_id} is fenced but has heartbeated within the session timeout "
            f"({session_timeout_ms} ms), so it may still run and would register again: stop "
            "it first, and retry once its session has expired",
        )
    held = held_partitions(image, broker_id)
    if held:
        named = ", ".join(held[:NAMED_PARTITIONS_MAX])
        hidden = len(held) - NAMED_PARTITIONS_MAX
        more = f" and {hidden} more" if hidden > 0 else ""
        return _refused(
            ErrorCode.INVALID_REQUEST,
            f"broker {broker_id} still holds replicas of {len(held)} partition(s) ({named}"
            f"{more}): move them to other brokers with `samsa reassign` "
            "(AlterPartitionReassignments) first",
        )
    record = m.UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=broker.broker_epoch)
    return ControlResult([m.MetadataRecord(unregister_broker=record)], c.UnregisterBrokerResponse())


def held_partitions(image: MetadataImage, broker_id: int) -> list[str]:
    """`topic-partition` of every partition `broker_id` holds a replica of, in order: in its
    replica list (adding and removing replicas are members of it) or its ELR. The ISR and the
    leader are members of the replica list too; the ELR is checked on its own all the same."""
    return [
        f"{name}-{number}"
        for name, topic in sorted(image.topics.items())
        for number, state in sorted(topic.partitions.items())
        if broker_id in state.replicas or broker_id in state.elr
    ]


def _refused(code: ErrorCode, message: str) -> ControlResult[c.UnregisterBrokerResponse]:
    response = c.UnregisterBrokerResponse()
    response.status.error_code = code  # type: ignore[assignment]
    response.status.error_message = message
    return ControlResult([], response)
