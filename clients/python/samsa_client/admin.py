"""Admin: topics, partitions, configs and the cluster, through the servers `bootstrap.servers`
lists (brokers, as in Kafka, or controllers); consumer groups and transactions, through the
coordinators.

Writes go to the active controller: a broker forwards them there and answers its answer (KIP-590);
a controller that is not active answers NOT_CONTROLLER with the active one's address, and the call
follows it when it is one of the bootstrap servers (or tries the next server while an election
runs, or while a broker cannot reach the active controller). After a write, reads ask for at least
the metadata offset the write answered with, so this client always reads its own writes, whichever
server answers. Each read or write gives up after request.timeout.ms (reads: at most
READ_TIMEOUT_S), and at once when no bootstrap server is a Samsa service.

Consumer groups live on the coordinators. A call about groups asks a bootstrap server which
coordinator owns each group (FindCoordinator, remembered per group), sends the request there, and on
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE or an unreachable
coordinator finds the coordinator again and retries, until request.timeout.ms. Listing groups asks
every live coordinator (DescribeCluster names them) and merges. What is decided from the answers
is pure and lives in group_admin.py. Transactional ids are found and asked the same way
(transaction_admin.py). A partition's producers are asked of its leader (DescribeProducers), and
a hanging transaction is aborted through any live coordinator (AbortTransaction).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc

from samsa.client import group_admin as ga
from samsa.client import transaction_admin as ta
from samsa.client.channels import Channels
from samsa.client.cluster_metadata import ClusterMetadata, unreachable_reason
from samsa.client.errors import KafkaError, NoBrokersAvailable, TopicError
from samsa.client.group_admin import (
    ConsumerGroupDescription,
    ConsumerGroupListing,
    GroupError,
    OffsetAndMetadata,
    PartitionLag,
    TopicPartition,
)
from samsa.client.transaction_admin import (
    PreparedTransaction,
    ProducerState,
    TransactionDescription,
    TransactionError,
    TransactionListing,
)
from samsa.common.errors import ErrorCode, InvalidConfigError
from samsa.v1 import broker_pb2, broker_pb2_grpc
from samsa.v1 import controller_pb2 as c
from samsa.v1 import coordinator_pb2 as g
from samsa.v1 import coordinator_pb2_grpc as g_grpc
from samsa.v1 import transactions_pb2 as txn
from samsa.v1 import transactions_pb2_grpc as txn_grpc

__all__ = [
    "Admin",
    "BrokerInfo",
    "ClusterDescription",
    "ConfigEntry",
    "ConsumerGroupDescription",
    "ConsumerGroupListing",
    "ControllerInfo",
    "CoordinatorInfo",
    "GroupError",
    "NewTopic",
    "OffsetAndMetadata",
    "PartitionInfo",
    "PartitionLag",
    "ProducerState",
    "TopicDescription",
    "TransactionDescription",
    "TransactionError",
    "TransactionListing",
]

WRITE_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 10.0
ADMIN_KEYS = frozenset({"bootstrap.servers", "client.id", "request.timeout.ms"})
REQUEST_TIMEOUT_MS_DEFAULT = 30_000  # Kafka's request.timeout.ms for the admin client
# One call to a coordinator or controller about groups: a live one answers well within it, a
# hung one leaves time to find the group's coordinator again before request.timeout.ms.
GROUP_CALL_TIMEOUT_S = 10.0
# Between rounds of finding coordinators again: a group's partition moves, or a coordinator
# loads one, in a fraction of a second to a few seconds.
GROUP_RETRY_BACKOFF_S = 0.2
TOPIC = 1
BROKER = 2


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = -1  # the cluster's num.partitions
    replication_factor: int = -1  # the cluster's default.replication.factor
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int  # -1 when offline
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: bytes
    partitions: tuple[PartitionInfo, ...]


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    endpoint: str
    rack: str
    broker_epoch: int
    fenced: bool


@dataclass(frozen=True)
class ControllerInfo:
    node_id: int
    endpoint: str
    active: bool


@dataclass(frozen=True)
class CoordinatorInfo:
    coordinator_id: int
    endpoint: str
    coordinator_epoch: int
    fenced: bool
    owned_partitions: int  # of __consumer_offsets


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str
    controllers: tuple[ControllerInfo, ...]
    brokers: tuple[BrokerInfo, ...]
    metadata_offset: int
    coordinators: tuple[CoordinatorInfo, ...] = ()


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str
    source: str  # "dynamic", "default", ...
    documentation: str


class Admin:
    """Kafka's AdminClient, synchronous: each call returns when the controller has answered."""

    def __init__(self, config: Mapping[str, object]) -> None:
        unknown = sorted(set(config) - ADMIN_KEYS)
        if unknown:
            raise InvalidConfigError(
                f"unknown admin config key(s) {unknown}; known: {sorted(ADMIN_KEYS)}"
            )
        servers = config.get("bootstrap.servers")
        if not servers:
            raise InvalidConfigError(
                "bootstrap.servers is required (host:port of brokers or controllers)"
            )
        endpoints = servers.split(",") if isinstance(servers, str) else list(servers)  # type: ignore[arg-type]
        self._channels = Channels()
        self._metadata = ClusterMetadata(
            [e.strip() for e in endpoints if e.strip()], self._channels
        )
        self._active: str | None = None
        self._offset = 0
        timeout_ms = config.get("request.timeout.ms", REQUEST_TIMEOUT_MS_DEFAULT)
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int | str):
            raise InvalidConfigError(f"request.timeout.ms must be an integer, not {timeout_ms!r}")
        if not str(timeout_ms).isdigit() or int(timeout_ms) < 1:
            raise InvalidConfigError(f"request.timeout.ms must be a positive integer: {timeout_ms}")
        self._request_timeout_ms = int(timeout_ms)
        self._group_coordinators: dict[str, str] = {}  # group id -> endpoint, as last found
        self._lookup_next = 0

    # --- plumbing ------------------------------------------------------------------------------

    def _write(self, method: str, request: Any) -> Any:
        endpoints = self._metadata.bootstrap
        timeout_s = min(WRITE_TIMEOUT_S, self._request_timeout_ms / 1000)
        deadline = time.monotonic() + timeout_s
        endpoint = self._active or endpoints[0]
        index = 0
        last: grpc.RpcError | None = None  # the last attempt's failure, when it had no answer
        refusal = ""  # the last NOT_CONTROLLER answer's message
        not_samsa: set[str] = set()
        while time.monotonic() < deadline and len(not_samsa) < len(endpoints):
            try:
                answer = getattr(self._metadata.stub(endpoint), method)(
                    request, timeout=max(0.1, min(10.0, deadline - time.monotonic()))
                )
            except grpc.RpcError as error:
                if error.code() == grpc.StatusCode.INVALID_ARGUMENT:
                    raise KafkaError(error.details() or "", ErrorCode.INVALID_REQUEST) from None
                last, answer = error, None
                if not unreachable_reason(error)[1]:
                    not_samsa.add(endpoint)
            else:
                last = None
            if answer is not None and answer.status.error_code != ErrorCode.NOT_CONTROLLER:
                self._active = endpoint
                self._offset = max(self._offset, answer.status.metadata_offset)
                self._metadata.metadata_offset = self._offset
                if answer.status.error_code != ErrorCode.NONE:
                    raise KafkaError.of(answer.status.error_code, answer.status.error_message)
                return answer
            redirect = answer.status.active_controller.endpoint if answer is not None else ""
            refusal = answer.status.error_message if answer is not None else refusal
            if redirect and redirect != endpoint and redirect in endpoints:
                endpoint = redirect
                continue
            index += 1
            endpoint = endpoints[index % len(endpoints)]
            if len(not_samsa) < len(endpoints):
                time.sleep(0.1)
        if last is not None:
            reason, _ = unreachable_reason(last)
            within = "" if len(not_samsa) == len(endpoints) else f" within {timeout_s:.3g} s"
            raise NoBrokersAvailable(
                f"no Samsa broker or controller answered {method} at {', '.join(endpoints)}"
                f"{within}: {reason}"
            ) from last
        raise NoBrokersAvailable(
            f"{method}: no active controller answered through {', '.join(endpoints)} "
            f"within {timeout_s:.3g} s: {refusal}"
        )

    def _read_timeout_s(self) -> float:
        return min(READ_TIMEOUT_S, self._request_timeout_ms / 1000)

    def _read(self, method: str, request: Any) -> Any:
        return self._metadata.read(method, request, timeout_s=self._read_timeout_s())

    @staticmethod
    def _raise_first(results: Iterable[Any]) -> None:
        for result in results:
            if result.error_code != ErrorCode.NONE:
                raise TopicError(result.error_message, ErrorCode(result.error_code))

    # --- topics --------------------------------------------------------------------------------

    def create_topics(self, topics: Iterable[NewTopic], validate_only: bool = False) -> None:
        """Create topics; TopicError for the first that failed (the others are created)."""
        request = c.CreateTopicsRequest(
            topics=[
                c.CreateTopicsRequest.Topic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    configs=dict(t.configs),
                )
                for t in topics
            ],
            validate_only=validate_only,
        )
        self._raise_first(self._write("CreateTopics", request).topics)

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        self.create_topics(
            [NewTopic(name, num_partitions, replication_factor, dict(configs or {}))]
        )

    def delete_topics(self, names: Iterable[str]) -> None:
        self._raise_first(
            self._write("DeleteTopics", c.DeleteTopicsRequest(names=list(names))).topics
        )

    def create_partitions(self, new_counts: Mapping[str, int], validate_only: bool = False) -> None:
        request = c.CreatePartitionsRequest(
            topics=[
                c.CreatePartitionsRequest.Topic(name=n, count=k) for n, k in new_counts.items()
            ],
            validate_only=validate_only,
        )
        self._raise_first(self._write("CreatePartitions", request).topics)

    def _describe(self, names: list[str]) -> list[c.DescribeTopicsResponse.Topic]:
        """The topics named (empty: all), every page of the controller's answer merged.

        Listing all topics answers only those that exist: one deleted while the pages were read
        (its UNKNOWN_TOPIC_OR_PARTITION, see ClusterMetadata.describe_topics) is left out.
        """
        answer = self._metadata.describe_topics(names, self._offset, self._read_timeout_s())
        if names:
            return list(answer.topics)
        return [topic for topic in answer.topics if topic.error_code == ErrorCode.NONE]

    def list_topics(self) -> list[str]:
        return [topic.name for topic in self._describe([])]

    def describe_topics(self, names: Iterable[str] | None = None) -> dict[str, TopicDescription]:
        topics = self._describe(list(names or []))
        self._raise_first(topics)
        return {
            topic.name: TopicDescription(
                topic.name,
                topic.topic_id,
                tuple(
                    PartitionInfo(
                        p.partition, p.leader, p.leader_epoch, tuple(p.replicas), tuple(p.isr)
                    )
                    for p in topic.partitions
                ),
            )
            for topic in topics
        }

    # --- cluster and configs ---------------------------------------------------------------------

    def describe_cluster(self) -> ClusterDescription:
        answer = self._read(
            "DescribeCluster", c.DescribeClusterRequest(min_metadata_offset=self._offset)
        )
        return ClusterDescription(
            answer.cluster_id,
            tuple(ControllerInfo(x.node_id, x.endpoint, x.is_active) for x in answer.controllers),
            tuple(
                BrokerInfo(b.broker_id, b.endpoint, b.rack, b.broker_epoch, b.is_fenced)
                for b in answer.brokers
            ),
            answer.status.metadata_offset,
            tuple(
                CoordinatorInfo(
                    x.coordinator_id,
                    x.endpoint,
                    x.coordinator_epoch,
                    x.is_fenced,
                    x.owned_partitions,
                )
                for x in answer.coordinators
            ),
        )

    def describe_configs(self, topic: str) -> dict[str, ConfigEntry]:
        answer = self._read(
            "DescribeConfigs",
            c.DescribeConfigsRequest(
                resources=[
                    c.DescribeConfigsRequest.Resource(
                        resource=c.ConfigResource(type=TOPIC, name=topic)
                    )
                ],
                min_metadata_offset=self._offset,
            ),
        )
        self._raise_first(answer.results)
        sources = {
            c.CONFIG_SOURCE_DYNAMIC: "dynamic",
            c.CONFIG_SOURCE_DEFAULT: "default",
            c.CONFIG_SOURCE_DYNAMIC_DEFAULT: "dynamic default",
        }
        return {
            e.name: ConfigEntry(e.name, e.value, sources.get(e.source, "unknown"), e.documentation)
            for e in answer.results[0].entries
        }

    def alter_configs(
        self, topic: str, set: Mapping[str, str] | None = None, delete: Iterable[str] = ()
    ) -> None:
        """Set and/or delete (back to default) topic configs, validated together."""
        alterations = [
            c.IncrementalAlterConfigsRequest.Alteration(name=k, op=c.ALTER_CONFIG_OP_SET, value=v)
            for k, v in (set or {}).items()
        ] + [
            c.IncrementalAlterConfigsRequest.Alteration(name=k, op=c.ALTER_CONFIG_OP_DELETE)
            for k in delete
        ]
        request = c.IncrementalAlterConfigsRequest(
            resources=[
                c.IncrementalAlterConfigsRequest.Resource(
                    resource=c.ConfigResource(type=TOPIC, name=topic), alterations=alterations
                )
            ]
        )
        self._raise_first(self._write("IncrementalAlterConfigs", request).results)

    # --- consumer groups -----------------------------------------------------------------------

    def list_consumer_groups(self) -> list[ConsumerGroupListing]:
        """Every group of every live coordinator, sorted by group id. A coordinator that does not
        answer, or is still loading partitions, is asked again until request.timeout.ms."""
        deadline = self._group_deadline()
        while True:
            coordinators = self.describe_cluster().coordinators
            live = [x for x in coordinators if not x.fenced]
            problems = [] if live or not coordinators else ["no coordinator is live"]
            answers = []
            for coordinator in live:
                try:
                    answer = self._group_stub(coordinator.endpoint).ListGroups(
                        g.ListGroupsRequest(), timeout=_call_timeout_s(deadline)
                    )
                except grpc.RpcError as error:
                    problems.append(f"coordinator {coordinator.coordinator_id}: {_status(error)}")
                    continue
                if answer.error_code != ErrorCode.NONE:
                    if not ga.coordinator_retriable(answer.error_code):
                        raise GroupError.of(answer.error_code, answer.error_message)
                    problems.append(
                        f"coordinator {coordinator.coordinator_id}: {answer.error_message}"
                    )
                    continue
                answers.append(answer)
            if not problems:
                return ga.listings_of(answers)
            if time.monotonic() >= deadline:
                raise GroupError(
                    f"could not list every coordinator's groups within request.timeout.ms "
                    f"({self._request_timeout_ms}): {'; '.join(problems)}",
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                )
            time.sleep(GROUP_RETRY_BACKOFF_S)

    def describe_consumer_groups(
        self, group_ids: Iterable[str]
    ) -> dict[str, ConsumerGroupDescription]:
        """State, epochs, assignor and members of each group; GroupError for the first that
        failed (GROUP_ID_NOT_FOUND for one that does not exist)."""
        answers = self._ask_coordinators(
            list(group_ids),
            lambda stub, ids, timeout_s: {
                x.group_id: x
                for x in stub.DescribeGroups(
                    g.DescribeGroupsRequest(group_ids=ids), timeout=timeout_s
                ).groups
            },
            lambda x: (x.error_code, x.error_message),
        )
        return {group_id: ga.description_of(answer) for group_id, answer in answers.items()}

    def delete_consumer_groups(self, group_ids: Iterable[str]) -> None:
        """Delete empty groups and their committed offsets; GroupError for the first that failed
        (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND), the others are deleted — as delete_topics."""
        answers = self._ask_coordinators(
            list(group_ids),
            lambda stub, ids, timeout_s: {
                x.group_id: x
                for x in stub.DeleteGroups(
                    g.DeleteGroupsRequest(group_ids=ids), timeout=timeout_s
                ).groups
            },
            lambda x: (x.error_code, x.error_message),
        )
        for answer in answers.values():
            error = ga.group_error_of(answer.error_code, answer.error_message)
            if error is not None:
                raise error

    def list_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (of `partitions`, or all); partitions without one are
        left out."""
        request = ga.offset_fetch_request(group_id, partitions)
        answer = self._ask_coordinator(group_id, "OffsetFetch", request)
        return ga.offsets_of(answer)

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
    ) -> None:
        """Commit `offsets` for the group from outside it: allowed only while the group has no
        members (GroupError saying to stop its consumers first otherwise), as in Kafka."""
        request = ga.offset_commit_request(group_id, offsets)
        answers = self._ask_coordinators(
            [group_id],
            lambda stub, ids, timeout_s: {ids[0]: stub.OffsetCommit(request, timeout=timeout_s)},
            ga.first_commit_error_of,
        )
        error = ga.commit_error_of(group_id, answers[group_id])
        if error is not None:
            raise error

    def describe_consumer_group_lag(self, group_id: str) -> list[PartitionLag]:
        """Committed offset, log end offset and lag of every partition the group committed for
        or owns, sorted by topic and partition."""
        request = g.DescribeGroupLagRequest(group_id=group_id)
        return ga.lag_of(self._ask_coordinator(group_id, "DescribeGroupLag", request))

    # --- transactions --------------------------------------------------------------------------

    def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_ms: int = 0,
    ) -> list[TransactionListing]:
        """Every transactional id of every live coordinator (in `states`, of `producer_ids`,
        open for at least `duration_ms` when given), sorted. Kafka's listTransactions."""
        request = txn.ListTransactionsRequest(
            state_filters=[ta.state_of(name) for name in states],  # type: ignore[misc]
            producer_id_filters=list(producer_ids),
            duration_filter_ms=duration_ms,
        )
        deadline = self._group_deadline()
        while True:
            coordinators = self.describe_cluster().coordinators
            live = [c for c in coordinators if not c.fenced]
            problems = [] if live else ["no coordinator is live"]
            answers = []
            for coordinator in live:
                stub = txn_grpc.TransactionCoordinatorServiceStub(
                    self._channels.get(coordinator.endpoint)
                )
                try:
                    answer = stub.ListTransactions(request, timeout=_call_timeout_s(deadline))
                except grpc.RpcError as error:
                    problems.append(f"coordinator {coordinator.coordinator_id}: {_status(error)}")
                    continue
                if answer.partitions_loading:
                    problems.append(
                        f"coordinator {coordinator.coordinator_id}: partitions "
                        f"{list(answer.partitions_loading)} of __transaction_state are loading"
                    )
                    continue
                answers.append(answer)
            if not problems:
                return ta.listings_of(answers)
            if time.monotonic() >= deadline:
                raise TransactionError(
                    "could not list every coordinator's transactions within request.timeout.ms "
                    f"({self._request_timeout_ms}): {'; '.join(problems)}",
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                )
            time.sleep(GROUP_RETRY_BACKOFF_S)

    def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> dict[str, TransactionDescription]:
        """State, producer id and epoch, timeout, start and partitions of each transactional id;
        TransactionError for the first that failed (TRANSACTIONAL_ID_NOT_FOUND for one the
        coordinator does not know). Kafka's describeTransactions."""
        return {name: self._describe_transaction(name) for name in dict.fromkeys(transactional_ids)}

    def _describe_transaction(self, transactional_id: str) -> TransactionDescription:
        def describe(stub: Any, timeout_s: float) -> tuple[Any, int, str]:
            request = txn.DescribeTransactionsRequest(transactional_ids=[transactional_id])
            described = stub.DescribeTransactions(request, timeout=timeout_s).transactions[0]
            return described, described.error_code, described.error_message

        return ta.description_of(self._at_transaction_coordinator(transactional_id, describe))

    def complete_transaction(self, prepared: PreparedTransaction, commit: bool) -> None:
        """Commit (or abort) a transaction another process prepared (`Producer.
        prepare_transaction`, KIP-939's idea): EndTxn at its coordinator with the identity the
        producer handed out. Safe to repeat: a completed transaction asked the same again
        answers as the first time. TransactionError for a refusal (INVALID_PRODUCER_EPOCH: a
        newer instance of the transactional id fenced it, and aborted it)."""

        def end(stub: Any, timeout_s: float) -> tuple[Any, int, str]:
            request = txn.EndTxnRequest(
                producer=txn.TransactionalProducer(
                    transactional_id=prepared.transactional_id,
                    producer_id=prepared.producer_id,
                    producer_epoch=prepared.producer_epoch,
                ),
                committed=commit,
            )
            answer = stub.EndTxn(request, timeout=timeout_s)
            return answer, answer.error_code, answer.error_message

        answer = self._at_transaction_coordinator(prepared.transactional_id, end)
        if answer.error_code:
            raise TransactionError.of(answer.error_code, answer.error_message)

    def _at_transaction_coordinator(
        self, transactional_id: str, send: Callable[[Any, float], tuple[Any, int, str]]
    ) -> Any:
        """`send(stub, timeout_s)` to the id's coordinator, finding it again and retrying while
        the answer is a coordinator error, until request.timeout.ms; the first other answer."""
        deadline = self._group_deadline()
        problem = "no coordinator was found"
        while True:
            find = g.FindCoordinatorRequest(
                key_type=g.COORDINATOR_KEY_TYPE_TRANSACTION, keys=[transactional_id]
            )
            answer, lookup_problem = self._lookup(find, deadline)
            location = answer.coordinators[0] if answer is not None else None
            if location is not None and location.error_code == ErrorCode.NONE:
                stub = txn_grpc.TransactionCoordinatorServiceStub(
                    self._channels.get(location.endpoint)
                )
                try:
                    got, code, message = send(stub, _call_timeout_s(deadline))
                except grpc.RpcError as error:
                    problem = f"the coordinator at {location.endpoint}: {_status(error)}"
                else:
                    if (
                        not ga.coordinator_retriable(code)
                        and code != ErrorCode.CONCURRENT_TRANSACTIONS
                    ):
                        return got
                    problem = message
            elif location is not None:
                if not ga.coordinator_retriable(location.error_code):
                    raise TransactionError.of(location.error_code, location.error_message)
                problem = location.error_message
            elif lookup_problem is not None:
                problem = lookup_problem[1]
            if time.monotonic() >= deadline:
                raise TransactionError(
                    f"no coordinator answered for transactional id {transactional_id!r} within "
                    f"request.timeout.ms ({self._request_timeout_ms}): {problem}",
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                )
            time.sleep(GROUP_RETRY_BACKOFF_S)

    def describe_producers(
        self, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], list[ProducerState]]:
        """The producers each partition's leader remembers, by producer id, with the start of
        each one's open transaction (-1: none): how to find a hanging transaction and the
        producer id and epoch to abort. TransactionError for a partition that does not exist,
        or whose leader did not answer within request.timeout.ms. Kafka's describeProducers."""
        wanted = list(dict.fromkeys(partitions))
        deadline = self._group_deadline()
        answers: dict[tuple[str, int], list[ProducerState]] = {}
        problem = "no leader was found"
        while True:
            pending = [key for key in wanted if key not in answers]
            if not pending:
                return {key: answers[key] for key in wanted}
            self._metadata.refresh({topic for topic, _ in pending}, _call_timeout_s(deadline))
            by_leader: dict[str, list[tuple[str, int]]] = {}
            for topic, number in pending:
                count = self._metadata.partition_counts.get(topic)
                if count is None or not 0 <= number < count:
                    raise TransactionError(
                        f"{topic}-{number} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    )
                leader = self._metadata.leaders.get((topic, number))
                endpoint = self._metadata.endpoints.get(leader) if leader is not None else None
                if endpoint is None:
                    problem = f"{topic}-{number} has no leader"
                    continue
                by_leader.setdefault(endpoint, []).append((topic, number))
            for endpoint, keys in by_leader.items():
                answered, why = self._producers_at(endpoint, keys, deadline)
                answers.update(answered)
                problem = why or problem
            if all(key in answers for key in wanted):
                continue
            if time.monotonic() >= deadline:
                raise TransactionError(
                    f"no leader described its producers within request.timeout.ms "
                    f"({self._request_timeout_ms}): {problem}",
                    ErrorCode.LEADER_NOT_AVAILABLE,
                )
            time.sleep(GROUP_RETRY_BACKOFF_S)

    def _producers_at(
        self, endpoint: str, keys: list[tuple[str, int]], deadline: float
    ) -> tuple[dict[tuple[str, int], list[ProducerState]], str | None]:
        """DescribeProducers for `keys` at the broker `endpoint`: the answered partitions, and
        why the others were not (None when all were); raises for an answer no retry cures."""
        by_topic: dict[str, list[int]] = {}
        for topic, number in keys:
            by_topic.setdefault(topic, []).append(number)
        request = broker_pb2.DescribeProducersRequest(
            topics=[
                broker_pb2.DescribeProducersRequest.TopicRequest(name=topic, partitions=numbers)
                for topic, numbers in by_topic.items()
            ]
        )
        stub = broker_pb2_grpc.BrokerServiceStub(self._channels.get(endpoint))
        try:
            response = stub.DescribeProducers(request, timeout=_call_timeout_s(deadline))
        except grpc.RpcError as error:
            self._metadata.mark_stale()
            return {}, f"the broker at {endpoint} did not answer ({_status(error)})"
        answered: dict[tuple[str, int], list[ProducerState]] = {}
        problem = None
        for topic in response.topics:
            for answer in topic.partitions:
                if answer.error_code == ErrorCode.NONE:
                    answered[(topic.name, answer.partition)] = ta.producers_of(answer)
                elif answer.error_code in ta.LEADER_ERRORS | {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}:
                    self._metadata.mark_stale()  # the leader moved, or is still starting
                    problem = f"{topic.name}-{answer.partition}: {answer.error_message}"
                else:
                    raise TransactionError.of(answer.error_code, answer.error_message)
        return answered, problem

    def abort_transaction(
        self, topic: str, partition: int, producer_id: int, producer_epoch: int
    ) -> None:
        """Abort a hanging transaction: `producer_id`'s open transaction on the partition, at
        `producer_epoch`, as describe_producers shows them (Kafka's abortTransaction, KIP-664).
        Any live coordinator writes the ABORT marker, and only when the producer has written
        nothing there for the coordinator's transaction.max.timeout.ms (15 minutes by default).
        TransactionError when refused: INVALID_TXN_STATE (no open transaction there at that
        epoch), CONCURRENT_TRANSACTIONS (written to too recently; the message says how long to
        wait). Unavailable coordinators and leaders are retried until request.timeout.ms; a
        retry after an answer was lost may find the transaction already aborted
        (INVALID_TXN_STATE)."""
        request = txn.AbortTransactionRequest(
            topic=topic,
            partition=partition,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
        )
        deadline = self._group_deadline()
        problem = "no coordinator is live"
        while True:
            live = [x for x in self.describe_cluster().coordinators if not x.fenced]
            for coordinator in live:
                stub = txn_grpc.TransactionCoordinatorServiceStub(
                    self._channels.get(coordinator.endpoint)
                )
                try:
                    answer = stub.AbortTransaction(request, timeout=_call_timeout_s(deadline))
                except grpc.RpcError as error:
                    problem = f"coordinator {coordinator.coordinator_id}: {_status(error)}"
                    continue
                if answer.error_code == ErrorCode.NONE:
                    return
                if not ta.abort_retriable(answer.error_code):
                    raise TransactionError.of(answer.error_code, answer.error_message)
                problem = f"coordinator {coordinator.coordinator_id}: {answer.error_message}"
                if answer.error_code in ta.LEADER_ERRORS:
                    break  # the leader's problem: another coordinator will not do better now
            if time.monotonic() >= deadline:
                raise TransactionError(
                    f"could not abort the transaction of producer {producer_id} on "
                    f"{topic}-{partition} within request.timeout.ms "
                    f"({self._request_timeout_ms}): {problem}",
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                )
            time.sleep(GROUP_RETRY_BACKOFF_S)

    def _group_deadline(self) -> float:
        return time.monotonic() + self._request_timeout_ms / 1000

    def _group_stub(self, endpoint: str) -> g_grpc.GroupCoordinatorServiceStub:
        return g_grpc.GroupCoordinatorServiceStub(self._channels.get(endpoint))

    def _ask_coordinator(self, group_id: str, method: str, request: Any) -> Any:
        """One request about one group whose answer carries a whole-group error_code."""
        answers = self._ask_coordinators(
            [group_id],
            lambda stub, ids, timeout_s: {
                ids[0]: getattr(stub, method)(request, timeout=timeout_s)
            },
            lambda x: (x.error_code, x.error_message),
        )
        return answers[group_id]

    def _ask_coordinators(
        self,
        group_ids: list[str],
        send: Callable[[g_grpc.GroupCoordinatorServiceStub, list[str], float], dict[str, Any]],
        error_of: Callable[[Any], tuple[int, str]],
    ) -> dict[str, Any]:
        """`send(stub, ids, timeout_s)` to each group's coordinator until every group has an
        answer that is not a coordinator error (`error_of` reads it), finding coordinators again
        after one; GroupError with the last such error after request.timeout.ms. The answers
        come in request order."""
        deadline = self._group_deadline()
        pending = list(dict.fromkeys(group_ids))
        answers: dict[str, Any] = {}
        problem = (int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "no coordinator was found")
        while True:
            located, lookup_problem = self._find_coordinators(pending, deadline)
            problem = lookup_problem or problem
            by_endpoint: dict[str, list[str]] = {}
            for group_id, endpoint in located.items():
                by_endpoint.setdefault(endpoint, []).append(group_id)
            for endpoint, ids in by_endpoint.items():
                try:
                    got = send(self._group_stub(endpoint), ids, _call_timeout_s(deadline))
                except grpc.RpcError as error:
                    if error.code() in (
                        grpc.StatusCode.INVALID_ARGUMENT,
                        grpc.StatusCode.RESOURCE_EXHAUSTED,
                    ):
                        raise GroupError(error.details() or "", ErrorCode.INVALID_REQUEST) from None
                    got = {}
                    problem = (
                        int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                        f"the coordinator at {endpoint} did not answer ({_status(error)})",
                    )
                for group_id in ids:
                    answer = got.get(group_id)
                    code, message = problem if answer is None else error_of(answer)
                    if answer is not None and not ga.coordinator_retriable(code):
                        answers[group_id] = answer
                        continue
                    problem = (code, message)
                    self._group_coordinators.pop(group_id, None)
            pending = [group_id for group_id in pending if group_id not in answers]
            if not pending:
                return {group_id: answers[group_id] for group_id in dict.fromkeys(group_ids)}
            if time.monotonic() >= deadline:
                raise GroupError(
                    f"no coordinator answered for group(s) {pending} within request.timeout.ms "
                    f"({self._request_timeout_ms}): {problem[1]}",
                    ErrorCode(problem[0]),
                )
            time.sleep(GROUP_RETRY_BACKOFF_S)

    def _find_coordinators(
        self, group_ids: list[str], deadline: float
    ) -> tuple[dict[str, str], tuple[int, str] | None]:
        """The coordinator endpoint of each group that has one now (remembered, else found with
        FindCoordinator on a bootstrap server), and why some have none (the caller retries them). An
        invalid group id raises GroupError."""
        unknown = [group_id for group_id in group_ids if group_id not in self._group_coordinators]
        problem = None
        if unknown:
            request = g.FindCoordinatorRequest(key_type=g.COORDINATOR_KEY_TYPE_GROUP, keys=unknown)
            answer, problem = self._lookup(request, deadline)
            for location in answer.coordinators if answer is not None else ():
                if location.error_code == ErrorCode.NONE:
                    self._group_coordinators[location.key] = location.endpoint
                elif ga.coordinator_retriable(location.error_code):
                    problem = (location.error_code, location.error_message)
                else:
                    raise GroupError.of(location.error_code, location.error_message)
        located = {
            group_id: self._group_coordinators[group_id]
            for group_id in group_ids
            if group_id in self._group_coordinators
        }
        return located, problem

    def _lookup(
        self, request: g.FindCoordinatorRequest, deadline: float
    ) -> tuple[g.FindCoordinatorResponse | None, tuple[int, str] | None]:
        """FindCoordinator on the first bootstrap server that answers, or None and why."""
        endpoints = self._metadata.bootstrap
        problem = None
        for _ in endpoints:
            endpoint = endpoints[self._lookup_next % len(endpoints)]
            stub = g_grpc.CoordinatorLookupServiceStub(self._channels.get(endpoint))
            try:
                return stub.FindCoordinator(request, timeout=_call_timeout_s(deadline)), None
            except grpc.RpcError as error:
                if error.code() == grpc.StatusCode.INVALID_ARGUMENT:
                    raise GroupError(error.details() or "", ErrorCode.INVALID_REQUEST) from None
                problem = (
                    int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                    f"no bootstrap server answered FindCoordinator ({_status(error)})",
                )
                self._lookup_next += 1
        return None, problem

    def close(self) -> None:
        self._channels.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _call_timeout_s(deadline: float) -> float:
    """One call's deadline: GROUP_CALL_TIMEOUT_S, cut to what is left of the request's."""
    return max(0.1, min(GROUP_CALL_TIMEOUT_S, deadline - time.monotonic()))


def _status(error: grpc.RpcError) -> str:
    if isinstance(error, grpc.Call):
        return f"{error.code().name}: {error.details()}"
    return str(error)
