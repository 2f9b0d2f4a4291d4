"""What each RPC requires of its caller when ACLs are enforced: Kafka's table, from the request.

Theory of operation. `requirement(method, request, topic_name)` decodes nothing more than the
already-parsed request and answers a `Requirement`:
- `members_only`: the call is the cluster's own (replication, markers, registration ...): only a
  call carrying a valid membership proof may make it (the interceptor has already let those
  through, so here it is refused, saying why);
- otherwise `needs`: every `Need` must be met, and a Need is met by any one of its `Access`
  alternatives (CreateTopics: CREATE on the cluster *or* on the topic). No needs: anyone.
One unmet Need refuses the whole call. Kafka answers per resource instead, and so do the calls
whose handler decides (FILTERED_BY_HANDLER and the like, caller.py; the README lists them):
Produce and Fetch (unary and streamed) answer each partition of a topic the caller may not
WRITE / READ with TOPIC_AUTHORIZATION_FAILED and write / read the others (their rule keeps only
what is refused whole: an internal topic, a follower's replica_id, a transactional id), and
CreateTopics, DeleteTopics and CreatePartitions answer each refused topic so and apply the
others (topic_admin_access.py; DescribeConfigs and IncrementalAlterConfigs per config
resource; DescribeGroups and DeleteGroups per group, GROUP_AUTHORIZATION_FAILED), and
ListOffsets, DeleteRecords and DescribeProducers each refused
topic's partitions (services/broker/requests/partition_refusals.py). The other calls are
all-or-nothing in this step. The listing calls: DescribeTopics (every topic, or the topics
named), ListGroups and ListTransactions are "anyone, filtered by the handler", and OffsetFetch
and DescribeGroupLag over all of a group's topics need the group's DESCRIBE only: their handlers
answer what the caller may DESCRIBE (caller.py), as Kafka filters them rather than refusing;
DescribeTopics naming topics answers TOPIC_AUTHORIZATION_FAILED for each one the caller may not
DESCRIBE, existing or not, as Kafka's Metadata does (metadata_reads.py).
Names are deduplicated, so a request of 100 partitions of one topic is one decision (the
handlers' `topic_refusals` too).

Every RPC of every service has an entry (tests/unit/test_access_rules.py walks the descriptors).
Pure: no I/O, no grpc.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from samsa.common.errors import ErrorCode
from samsa.metadata.acls import (
    CLUSTER_NAME,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    Acls,
    AuthorizerSettings,
    Operation,
    Permission,
    ResourceType,
    authorize,
)
from samsa.metadata.coordinators import INTERNAL_TOPICS

TopicNames = Callable[[bytes], str | None]


class Access(NamedTuple):
    """One operation on one resource."""

    operation: Operation
    resource_type: ResourceType
    name: str


# The name of an Access granted by an ALLOW on *some* resource of its type (KIP-679: WRITE on
# any topic grants idempotence); `allowed_on_some` decides it.
ANY_NAME = ""

# A need: any one of its alternatives suffices.
Need = tuple[Access, ...]


@dataclass(frozen=True)
class Requirement:
    """Every need must be met, unless `members_only` says why only members may call."""

    needs: tuple[Need, ...] = ()
    members_only: str | None = None


ANYONE = Requirement()
_T, _G, _C, _X = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)
_O = Operation


def _members(why: str) -> Requirement:
    return Requirement(members_only=why)


def _on(operation: Operation, resource_type: ResourceType, names: Iterable[str]) -> list[Need]:
    return [(Access(operation, resource_type, name),) for name in dict.fromkeys(names)]


def _cluster(operation: Operation) -> Need:
    return (Access(operation, _C, CLUSTER_NAME),)


def _needs(*groups: Iterable[Need]) -> Requirement:
    return Requirement(needs=tuple(need for group in groups for need in group))


def first_unmet(requirement: Requirement, allowed: Callable[[Access], bool]) -> Need | None:
    """The first need none of whose alternatives `allowed` grants; None when all are met."""
    for need in requirement.needs:
        if not any(allowed(access) for access in need):
            return need
    return None


def allowed_on_some(
    acls: Acls,
    settings: AuthorizerSettings,
    principal: str,
    host: str,
    operation: Operation,
    resource_type: ResourceType,
) -> bool:
    """Whether `principal` may do `operation` on at least one resource of `resource_type`: some
    ALLOW binding of that type for it whose resource it is then allowed (no DENY wins there).
    Walks the bindings: for the rare calls that ask it (InitProducerId without a transactional
    id), not the hot path."""
    if authorize(acls, settings, principal, host, operation, resource_type, WILDCARD):
        return True
    for binding in acls:
        if (
            binding.resource_type == resource_type
            and binding.permission == Permission.ALLOW
            and binding.operation in (operation, Operation.ALL)
            and binding.principal in (principal, WILDCARD_PRINCIPAL)
            and binding.host in (host, WILDCARD)
            and authorize(
                acls, settings, principal, host, operation, resource_type, binding.resource_name
            )
        ):
            return True
    return False


_KIND = {_T: "topic", _G: "group", _C: "cluster", _X: "transactional id"}
_FLAG = {_T: "--topic", _G: "--group", _C: "--cluster", _X: "--transactional-id"}


def _named(access: Access) -> str:
    name = access.name or "(any)"
    return f"{access.operation.name} {_KIND[access.resource_type]} {name}"


# What a refused client is told in trailing metadata (errors.proto, README), beside the message.
ERROR_CODE_KEY = "samsa-error-code"
RESOURCE_KEY = "samsa-resource"
_CODE = {
    _T: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    _G: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    _C: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    _X: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}
_RESOURCE_PREFIX = {_T: "topic", _G: "group", _C: "cluster", _X: "transactional-id"}
CLUSTER_RESOURCE = f"cluster:{CLUSTER_NAME}"


class Refusal(str):
    """A PERMISSION_DENIED message (a str, as before) that also carries the Kafka error code and
    the refused resource (`topic:orders`) the server sends as trailing metadata, so that a
    client acts on the refusal without parsing the message."""

    code: ErrorCode
    resource: str

    def __new__(cls, message: str, code: ErrorCode, resource: str) -> Refusal:
        refusal = super().__new__(cls, message)
        refusal.code = code
        refusal.resource = resource
        return refusal

    @property
    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((ERROR_CODE_KEY, str(int(self.code))), (RESOURCE_KEY, self.resource))


def refusal_code(need: Need) -> tuple[ErrorCode, str]:
    """The error code and `<type>:<name>` resource of an unmet need (its first alternative's)."""
    first = need[0]
    return _CODE[first.resource_type], f"{_RESOURCE_PREFIX[first.resource_type]}:{first.name}"


def members_only_refusal(message: str) -> Refusal:
    """A call only the cluster itself may make, or a certificate no rule maps to a principal:
    CLUSTER_AUTHORIZATION_FAILED on the cluster."""
    return Refusal(message, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_RESOURCE)


def refusal(principal: str, need: Need) -> Refusal:
    """The PERMISSION_DENIED message for an unmet need: who, what, on what, and how to grant it."""
    first = need[0]
    others = "".join(f" (nor {_named(access)})" for access in need[1:])
    resource = _FLAG[first.resource_type]
    if first.resource_type != _C:
        resource += f" {first.name}"
    operation = first.operation.name.title().replace("_", "")
    message = (
        f"{principal} may not {_named(first)}{others} (no ALLOW ACL, or a DENY one; samsa acls "
        f"--add --allow-principal {principal} --operation {operation} {resource})"
    )
    return Refusal(message, *refusal_code(need))


# --- the table --------------------------------------------------------------------------------


def _produce(request: Any, _names: TopicNames) -> Requirement:
    topics = [topic.name for topic in request.topics]
    internal = [name for name in topics if name in INTERNAL_TOPICS]
    if internal:
        return _members(f"{internal[0]} is internal: only the cluster's coordinators write it")
    # WRITE on each topic: decided by the handler, per partition (caller.topic_refusals).
    if request.transactional_id:
        return _needs(_on(_O.WRITE, _X, [request.transactional_id]))
    return FILTERED_BY_HANDLER


def _fetch(request: Any, _names: TopicNames) -> Requirement:
    if request.HasField("replica_id") and request.replica_id >= 0:  # unset: a consumer
        return _members("a fetch with a replica_id is a follower's")
    return FILTERED_BY_HANDLER  # READ on each topic: decided per partition by the handler


def _init_producer_id(request: Any, _names: TopicNames) -> Requirement:
    if request.transactional_id:
        return _needs(_on(_O.WRITE, _X, [request.transactional_id]))
    # KIP-679: idempotence comes with WRITE on any topic, or IDEMPOTENT_WRITE on the cluster.
    any_topic = Access(_O.WRITE, _T, ANY_NAME)
    return Requirement(needs=((Access(_O.IDEMPOTENT_WRITE, _C, CLUSTER_NAME), any_topic),))


def _txn(producer: Any) -> list[Need]:
    return _on(_O.WRITE, _X, [producer.transactional_id])


def _add_partitions(request: Any) -> Requirement:
    return _needs(_txn(request.producer), _on(_O.WRITE, _T, [p.topic for p in request.partitions]))


def _txn_offset_commit(request: Any) -> Requirement:
    return _needs(
        _on(_O.READ, _G, [request.group_id]),
        _on(_O.READ, _T, [t.name for t in request.topics]),
        _txn(request.producer),
    )


def _add_offsets(request: Any) -> Requirement:
    return _needs(_txn(request.producer), _on(_O.READ, _G, [request.group_id]))


def _transaction_stream(message: Any, _names: TopicNames) -> Requirement:
    kind = message.WhichOneof("request")
    if kind == "end_txn":
        return _needs(_txn(message.end_txn.producer))
    if kind == "add_offsets_to_txn":
        return _add_offsets(message.add_offsets_to_txn)
    if kind == "txn_offset_commit":
        return _txn_offset_commit(message.txn_offset_commit)
    return ANYONE  # nothing asked: the servicer refuses it as malformed


def _find_coordinator(request: Any, _names: TopicNames) -> Requirement:
    kind = _X if request.key_type == 2 else _G  # COORDINATOR_KEY_TYPE_TRANSACTION
    return _needs(_on(_O.DESCRIBE, kind, request.keys))


def _fixed(requirement: Requirement) -> Callable[[Any, TopicNames], Requirement]:
    return lambda _request, _names: requirement


def _cluster_rule(operation: Operation) -> Callable[[Any, TopicNames], Requirement]:
    return _fixed(Requirement(needs=(_cluster(operation),)))


def _group_rule(
    operation: Operation,
    group: Callable[[Any], Iterable[str]],
    topic_operation: Operation | None = None,
    topics: Callable[[Any], Iterable[str]] = lambda _request: (),
) -> Callable[[Any, TopicNames], Requirement]:
    def rule(request: Any, _names: TopicNames) -> Requirement:
        needs = _on(operation, _G, group(request))
        if topic_operation is not None:
            needs += _on(topic_operation, _T, topics(request))
        return _needs(needs)

    return rule


# Anyone may list; the handler shows the caller what it may DESCRIBE (caller.py).
FILTERED_BY_HANDLER = ANYONE


_MEMBER_CALL = "it is a cluster member's call (registration, heartbeats, replication)"
_BROKER = "/samsa.v1.BrokerService/"
_CONTROLLER = "/samsa.v1.ControllerService/"
_GROUPS = "/samsa.v1.GroupCoordinatorService/"
_TXNS = "/samsa.v1.TransactionCoordinatorService/"


RULES: dict[str, Callable[[Any, TopicNames], Requirement]] = {
    # BrokerService
    _BROKER + "Produce": _produce,
    _BROKER + "ProduceStream": lambda message, names: _produce(message.request, names),
    _BROKER + "Fetch": _fetch,
    _BROKER + "FetchStream": lambda message, names: _fetch(message.request, names),
    _BROKER + "ReplicaFetchStream": _fixed(_members("replica fetches are the followers'")),
    # DESCRIBE / READ / DELETE on each topic: decided per partition by the handler
    # (services/broker/requests/partition_refusals.py).
    _BROKER + "ListOffsets": _fixed(FILTERED_BY_HANDLER),
    _BROKER + "InitProducerId": _init_producer_id,
    _BROKER + "WriteTxnMarkers": _fixed(_members("markers are the coordinators' to write")),
    _BROKER + "WriteTxnMarkersStream": _fixed(_members("markers are the coordinators' to write")),
    _BROKER + "DescribeProducers": _fixed(FILTERED_BY_HANDLER),
    _BROKER + "DeleteRecords": _fixed(FILTERED_BY_HANDLER),
    _BROKER + "DescribeLogDirs": _cluster_rule(_O.DESCRIBE),
    # ControllerService (served by controllers, and by brokers: KIP-590 forwarding)
    _CONTROLLER + "RegisterBroker": _fixed(_members(_MEMBER_CALL)),
    _CONTROLLER + "BrokerHeartbeat": _fixed(_members(_MEMBER_CALL)),
    _CONTROLLER + "AlterPartition": _fixed(_members(_MEMBER_CALL)),
    _CONTROLLER + "ReportCorruptReplica": _fixed(_members(_MEMBER_CALL)),
    _CONTROLLER + "AllocateProducerIds": _fixed(_members(_MEMBER_CALL)),
    _CONTROLLER + "RegisterCoordinator": _fixed(_members(_MEMBER_CALL)),
    _CONTROLLER + "CoordinatorHeartbeat": _fixed(_members(_MEMBER_CALL)),
    # The raw metadata log holds every ACL, config and quota: only members follow it.
    _CONTROLLER + "FetchMetadata": _fixed(_members("the raw metadata log is the members'")),
    _CONTROLLER + "FetchSnapshot": _fixed(_members("the raw metadata log is the members'")),
    # CREATE (on the topic or the cluster), DELETE, ALTER on each topic: decided per topic by
    # the handler, TOPIC_AUTHORIZATION_FAILED for each refused one (topic_admin_access.py).
    _CONTROLLER + "CreateTopics": _fixed(FILTERED_BY_HANDLER),
    _CONTROLLER + "DeleteTopics": _fixed(FILTERED_BY_HANDLER),
    _CONTROLLER + "CreatePartitions": _fixed(FILTERED_BY_HANDLER),
    _CONTROLLER + "AlterPartitionReassignments": _cluster_rule(_O.ALTER),
    _CONTROLLER + "ListPartitionReassignments": _cluster_rule(_O.DESCRIBE),
    _CONTROLLER + "UnregisterBroker": _cluster_rule(_O.ALTER),
    _CONTROLLER + "ElectLeaders": _cluster_rule(_O.ALTER),
    _CONTROLLER + "DescribeCluster": _fixed(ANYONE),  # clients need the brokers' addresses
    # Every topic: those the caller may DESCRIBE; named: TOPIC_AUTHORIZATION_FAILED per topic
    # it may not (metadata_reads.describe_topics), as Kafka's Metadata answers.
    _CONTROLLER + "DescribeTopics": _fixed(FILTERED_BY_HANDLER),
    # DESCRIBE_CONFIGS / ALTER_CONFIGS on each resource's topic (the cluster for a broker's):
    # decided per resource by the handler (topic_admin_access.per_config_resource).
    _CONTROLLER + "DescribeConfigs": _fixed(FILTERED_BY_HANDLER),
    _CONTROLLER + "IncrementalAlterConfigs": _fixed(FILTERED_BY_HANDLER),
    _CONTROLLER + "AlterClientQuotas": _cluster_rule(_O.ALTER_CONFIGS),
    _CONTROLLER + "DescribeClientQuotas": _cluster_rule(_O.DESCRIBE_CONFIGS),
    _CONTROLLER + "DescribeQuorum": _cluster_rule(_O.DESCRIBE),
    _CONTROLLER + "CreateAcls": _cluster_rule(_O.ALTER),
    _CONTROLLER + "DeleteAcls": _cluster_rule(_O.ALTER),
    _CONTROLLER + "DescribeAcls": _cluster_rule(_O.DESCRIBE),
    # CoordinatorLookupService
    "/samsa.v1.CoordinatorLookupService/FindCoordinator": _find_coordinator,
    # GroupCoordinatorService
    _GROUPS + "ConsumerGroupHeartbeat": _group_rule(_O.READ, lambda r: [r.group_id]),
    _GROUPS + "OffsetCommit": _group_rule(
        _O.READ, lambda r: [r.group_id], _O.READ, lambda r: (t.name for t in r.topics)
    ),
    # All topics (none named): the group's DESCRIBE; the handler leaves out the topics the
    # caller may not DESCRIBE, as Kafka does (and so does DescribeGroupLag's).
    _GROUPS + "OffsetFetch": _group_rule(
        _O.DESCRIBE, lambda r: [r.group_id], _O.DESCRIBE, lambda r: (t.topic for t in r.topics)
    ),
    _GROUPS + "DescribeGroupLag": _group_rule(_O.DESCRIBE, lambda r: [r.group_id]),
    # DESCRIBE on the cluster lists every group, else the handler lists those it may DESCRIBE.
    _GROUPS + "ListGroups": _fixed(FILTERED_BY_HANDLER),
    # DESCRIBE / DELETE on each group: GROUP_AUTHORIZATION_FAILED per group by the handler.
    _GROUPS + "DescribeGroups": _fixed(FILTERED_BY_HANDLER),
    _GROUPS + "DeleteGroups": _fixed(FILTERED_BY_HANDLER),
    _GROUPS + "OffsetDelete": _group_rule(
        _O.DELETE, lambda r: [r.group_id], _O.READ, lambda r: (t.topic for t in r.topics)
    ),
    # TransactionCoordinatorService
    _TXNS + "InitTransactions": lambda r, _n: _needs(_on(_O.WRITE, _X, [r.transactional_id])),
    _TXNS + "AddPartitionsToTxn": lambda r, _n: _add_partitions(r),
    _TXNS + "AddPartitionsToTxnStream": lambda m, _n: _add_partitions(m.request),
    _TXNS + "AddOffsetsToTxn": lambda r, _n: _add_offsets(r),
    _TXNS + "TxnOffsetCommit": lambda r, _n: _txn_offset_commit(r),
    _TXNS + "EndTxn": lambda r, _n: _needs(_txn(r.producer)),
    _TXNS + "TransactionStream": _transaction_stream,
    # KIP-664: DESCRIBE on the cluster lists every id, else the handler lists those it may
    # DESCRIBE.
    _TXNS + "ListTransactions": _fixed(FILTERED_BY_HANDLER),
    _TXNS + "DescribeTransactions": lambda r, _n: _needs(_on(_O.DESCRIBE, _X, r.transactional_ids)),
    _TXNS + "AbortTransaction": _cluster_rule(_O.ALTER),
    # What every server also serves (server.py): load balancers' health checks, and the schema.
    "/grpc.health.v1.Health/Check": _fixed(ANYONE),
    "/grpc.health.v1.Health/Watch": _fixed(ANYONE),
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": _fixed(ANYONE),
    # How a client proves who it is (SASL/SCRAM): before it, it has no principal to decide.
    "/samsa.v1.SaslService/SaslAuthenticate": _fixed(ANYONE),
}


def requirement(method: str, request: Any, topic_name: TopicNames) -> Requirement:
    """What a call to `method` (its gRPC path) carrying `request` (for a stream: one of its
    messages) requires. A method without an entry is the cluster's only (members_only): a new
    RPC is closed until it is given a rule."""
    rule = RULES.get(method)
    if rule is None:
        return _members(f"{method} has no access rule yet")
    return rule(request, topic_name)
