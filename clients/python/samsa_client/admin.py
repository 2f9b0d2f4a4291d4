"""Admin: topics, partitions, configs and the cluster, through the servers `bootstrap.servers`
lists (brokers, as in Kafka, or controllers); groups and transactions, through the coordinators.

`Admin` (Kafka's AdminClient, synchronous) is the one public class, and the one place its calls
are documented. It checks its config, builds the requests about topics, configs and the cluster,
and hands everything else to the parts it owns, one job each:

- controller_calls.py carries the requests to the controllers: writes to the active one
  (following NOT_CONTROLLER), reads at or after the last write's metadata offset, so this client
  always reads its own writes, whichever server answers;
- leader_elections.py is the pure half of elect_leaders (ElectLeaders, KIP-460);
- metadata_quorum.py is the pure half of describe_metadata_quorum (DescribeQuorum, KIP-595);
- partition_admin_calls.py sends DeleteRecords and ListOffsets to each partition's leader
  (through leader_calls.py, which the transaction methods' DescribeProducers uses too);
  listed_offsets.py is the pure half of list_offsets;
- log_dir_calls.py asks each broker for its log dirs (log_dirs.py: the pure half);
- client_quota_admin.py builds the client quota requests and reads their answers (pure);
- admin_acls.py (a base class of Admin) holds the ACL methods, acl_admin.py their pure half;
- admin_scram.py (a base class too) the SCRAM credential methods, scram_admin.py their pure half;
- cluster_admin.py turns their answers into the dataclasses this module exports (pure);
- group_admin_calls.py runs the consumer-group methods (admin_groups.py, a base class of
  Admin that documents them) at the groups' coordinators, and
  transaction_admin_calls.py the transaction methods at coordinators and partitions' leaders;
  they share deadlines, FindCoordinator and the coordinator list (coordinator_calls.py), and
  their pure halves are group_admin.py and transaction_admin.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from samsa.client import client_quota_admin as quotas
from samsa.client.admin_acls import AclAdmin
from samsa.client.admin_groups import ConsumerGroupAdmin
from samsa.client.admin_scram import ScramAdmin
from samsa.client.channels import Channels
from samsa.client.client_tls import CLIENT_KEYS, client_security
from samsa.client.cluster_admin import (
    BrokerInfo,
    ClusterDescription,
    ConfigEntry,
    ControllerInfo,
    CoordinatorInfo,
    NewTopic,
    PartitionInfo,
    TopicDescription,
    cluster_description_of,
    config_alterations,
    config_entries_of,
    create_partitions_request,
    create_topics_request,
    raise_first,
    topic_descriptions_of,
    unregister_broker_request,
)
from samsa.client.cluster_metadata import ClusterMetadata
from samsa.client.config_resources import ConfigResource, resource_label, resource_message
from samsa.client.config_values import parse_servers
from samsa.client.controller_calls import ControllerCalls, admin_timeouts
from samsa.client.coordinator_calls import CoordinatorCalls
from samsa.client.errors import KafkaError
from samsa.client.group_admin import (
    ConsumerGroupDescription,
    ConsumerGroupListing,
    GroupError,
    OffsetAndMetadata,
    PartitionLag,
)
from samsa.client.group_admin_calls import GroupAdminCalls
from samsa.client.leader_elections import ElectionError, election_requests, election_results
from samsa.client.listed_offsets import ListedOffset, OffsetSpec
from samsa.client.log_dir_calls import LogDirCalls
from samsa.client.log_dirs import LogDirDescription, ReplicaInfo
from samsa.client.metadata_quorum import QuorumInfo, ReplicaState, quorum_info_of
from samsa.client.partition_admin_calls import PartitionAdminCalls
from samsa.client.reassignments import (
    PartitionReassignment,
    alter_requests,
    list_requests,
    raise_partition_errors,
    reassignments_of,
)
from samsa.client.transaction_admin import (
    DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    OpenTransaction,
    PreparedTransaction,
    ProducerState,
    TransactionDescription,
    TransactionError,
    TransactionListing,
)
from samsa.client.transaction_admin_calls import TransactionAdminCalls
from samsa.common.errors import ErrorCode, InvalidConfigError
from samsa.metadata.client_quotas import QuotaEntity
from samsa.metadata.coordinators import INTERNAL_TOPICS
from samsa.v1 import controller_pb2 as c

__all__ = [
    "Admin",
    "BrokerInfo",
    "ClusterDescription",
    "ConfigEntry",
    "ConsumerGroupDescription",
    "ConsumerGroupListing",
    "ControllerInfo",
    "CoordinatorInfo",
    "ElectionError",
    "GroupError",
    "ListedOffset",
    "LogDirDescription",
    "NewTopic",
    "OffsetAndMetadata",
    "PartitionInfo",
    "PartitionLag",
    "PartitionReassignment",
    "ProducerState",
    "QuorumInfo",
    "ReplicaInfo",
    "ReplicaState",
    "TopicDescription",
    "TransactionDescription",
    "TransactionError",
    "TransactionListing",
]

ADMIN_KEYS = frozenset(
    {"bootstrap.servers", "client.id", "request.timeout.ms", "default.api.timeout.ms", *CLIENT_KEYS}
)


class Admin(AclAdmin, ConsumerGroupAdmin, ScramAdmin):
    """Kafka's AdminClient, synchronous: each call returns when the controller has answered.
    Its consumer-group methods are ConsumerGroupAdmin's (admin_groups.py)."""

    def __init__(self, config: Mapping[str, object]) -> None:
        if unknown := sorted(set(config) - ADMIN_KEYS):
            raise InvalidConfigError(
                f"unknown admin config key(s) {unknown}; known: {sorted(ADMIN_KEYS)}"
            )
        if "bootstrap.servers" not in config:
            raise InvalidConfigError(
                "bootstrap.servers is required (host:port of brokers or controllers)"
            )
        endpoints = parse_servers("bootstrap.servers", config["bootstrap.servers"])
        request_timeout_ms, api_timeout_ms = admin_timeouts(config)
        # Refuses calls in a forked child; TLS files are read here, once (client_tls.py).
        self._channels = Channels("Admin", client_security(config))
        metadata = ClusterMetadata(endpoints, self._channels)
        self._controller = ControllerCalls(metadata, request_timeout_ms, api_timeout_ms)
        coordinators = CoordinatorCalls(
            self._channels, metadata.bootstrap, self._controller, request_timeout_ms, api_timeout_ms
        )
        self._groups = GroupAdminCalls(coordinators)
        self._transactions = TransactionAdminCalls(coordinators, metadata)
        self._partitions = PartitionAdminCalls(coordinators, metadata)  # leaders answer these
        self._log_dirs = LogDirCalls(coordinators, self._controller)  # each broker answers

    # --- topics --------------------------------------------------------------------------------

    def create_topics(self, topics: Iterable[NewTopic], validate_only: bool = False) -> None:
        """Create topics; TopicError for the first that failed (the others are created), its
        `errors` naming every topic that failed (as for every call about many topics, groups,
        partitions or transactional ids).
        A name given twice is asked for once, as first given (Kafka's admin too). A name that
        differs from another topic's only in '.' and '_' is refused (INVALID_TOPIC_EXCEPTION),
        as Kafka refuses it: its metric names cannot tell the two apart. A replication
        factor of 0 is refused before anything is sent, as Kafka refuses it: on the wire it
        would read as unset, the cluster's default."""
        request = create_topics_request(topics, validate_only)
        raise_first(self._controller.write("CreateTopics", request).topics)

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
        raise_first(
            self._controller.write(
                "DeleteTopics", c.DeleteTopicsRequest(names=list(dict.fromkeys(names)))
            ).topics
        )

    def create_partitions(
        self,
        new_counts: Mapping[str, int],
        validate_only: bool = False,
        replica_assignments: Mapping[str, Sequence[Sequence[int]]] | None = None,
    ) -> None:
        """Grow topics to `new_counts`; `replica_assignments` places a topic's new partitions by
        hand, one broker id list per new partition (Kafka's NewPartitions.increaseTo)."""
        request = create_partitions_request(new_counts, validate_only, replica_assignments)
        raise_first(self._controller.write("CreatePartitions", request).topics)

    def alter_partition_reassignments(
        self, reassignments: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> None:
        """Move each partition's replicas to its target list (the first is the preferred leader)
        or, with None, cancel its reassignment in progress (Kafka's alterPartitionReassignments,
        KIP-455); returns once the controller began each. TopicError for the first partition
        refused (UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT, or for a cancel
        NO_REASSIGNMENT_IN_PROGRESS), its `errors` naming each refused (topic, partition)."""
        requests = alter_requests(reassignments)
        answers = [self._controller.write("AlterPartitionReassignments", r) for r in requests]
        raise_partition_errors(requests, answers)

    def list_partition_reassignments(
        self, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], PartitionReassignment]:
        """The reassignments in progress (of `partitions`, or all when None) by partition; one
        with none, or that does not exist, is left out. Kafka's listPartitionReassignments."""
        requests = list_requests(partitions, self._controller.metadata_offset)
        read = self._controller.read
        return reassignments_of([read("ListPartitionReassignments", r) for r in requests])

    def elect_leaders(
        self, election_type: str, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], KafkaError | None]:
        """Elect leaders now (Kafka's electLeaders, KIP-460). "preferred": each partition's
        first replica leads, if live and in the ISR. "unclean": a partition without a live leader
        gets any live replica, in sync or not (acknowledged records only the lost ones held are
        gone). `partitions` None: every partition (those needing no election are left out).
        Each outcome is None (elected) or its error, ELECTION_NOT_NEEDED when the leader asked
        for leads already; ElectionError (a TopicError; `results` holds every outcome) for the
        first other refusal. leader_elections.py is the pure half."""
        requests = election_requests(election_type, partitions)
        answers = [self._controller.write("ElectLeaders", r) for r in requests]
        return election_results(requests, answers)

    def delete_records(self, offsets: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Delete each partition's records below its offset (-1: below the high watermark, so
        every committed record): the partition's log start offset moves there, and consumers
        positioned below it reset by their auto.offset.reset. Returns each partition's low
        watermark, the smallest log start over its in-sync replicas, once it has reached the
        offset: the records are gone from every replica that could become leader. An offset
        at or below the log start changes nothing. TopicError when refused: OFFSET_OUT_OF_RANGE
        (above the high watermark), POLICY_VIOLATION (an internal topic, or cleanup.policy
        without delete), UNKNOWN_TOPIC_OR_PARTITION, REQUEST_TIMED_OUT (the replicas did not
        follow within request.timeout.ms; the leader's records are deleted anyway), for the
        first partition refused, once every partition was asked (the others keep their
        deletion); its `errors` names each refused partition. Kafka's deleteRecords."""

        return self._partitions.delete_records(offsets)

    def list_offsets(
        self,
        specs: Mapping[tuple[str, int], OffsetSpec],
        isolation_level: str = "read_uncommitted",
    ) -> dict[tuple[str, int], ListedOffset]:
        """Each partition's offset for its spec, from its leader: "earliest" (log start),
        "latest" (high watermark; last stable offset under read_committed), "max_timestamp"
        (the first record with the largest timestamp, KIP-734) or a timestamp in ms (the first
        record at or after it). Records a read_committed consumer may not read yet are not
        found. ValueError for a spec it cannot read; TopicError for a partition refused
        (UNKNOWN_TOPIC_OR_PARTITION when it does not exist). Kafka's listOffsets."""
        return self._partitions.list_offsets(specs, isolation_level)

    def _describe(self, names: list[str]) -> list[c.DescribeTopicsResponse.Topic]:
        """The topics named (empty: all), every page of the controller's answer merged. Listing
        all answers only those that exist: one deleted while the pages were read (its
        UNKNOWN_TOPIC_OR_PARTITION, see ClusterMetadata.describe_topics) is left out."""
        answer = self._controller.describe_topics(names)
        if names:
            return list(answer.topics)
        return [topic for topic in answer.topics if topic.error_code == ErrorCode.NONE]

    def list_topics(self, list_internal: bool = False) -> list[str]:
        """Topic names; the internal ones only with list_internal (Kafka's listInternal)."""
        names = [topic.name for topic in self._describe([])]
        return names if list_internal else [n for n in names if n not in INTERNAL_TOPICS]

    def describe_topics(self, names: Iterable[str] | None = None) -> dict[str, TopicDescription]:
        """The topics named, or every topic when `names` is None; no names, none (as Kafka's
        describeTopics). TopicError for the first that failed (UNKNOWN_TOPIC_OR_PARTITION), or
        AuthorizationError for a topic the caller may not DESCRIBE; `errors` holds each."""
        if names is not None:
            names = list(names)
            if not names:
                return {}
        topics = self._describe(list(names or []))
        raise_first(topics)
        return topic_descriptions_of(topics)

    # --- cluster and configs ---------------------------------------------------------------------

    def describe_cluster(self) -> ClusterDescription:
        return cluster_description_of(self._controller.describe_cluster())

    def describe_metadata_quorum(self) -> QuorumInfo:
        """The controller quorum's replication state, from its leader, the active controller
        (Kafka's describeMetadataQuorum): voters (controllers) in Raft indices, observers
        (brokers, coordinators) in metadata offsets; metadata_quorum.py says which is which."""
        return quorum_info_of(self._controller.write("DescribeQuorum", c.DescribeQuorumRequest()))

    def unregister_broker(self, broker_id: int) -> None:
        """Forget a broker stopped for good (Kafka's unregisterBroker, KIP-631): it leaves
        describe_cluster. KafkaError: BROKER_ID_NOT_REGISTERED, or INVALID_REQUEST while it
        runs or holds replicas (move them with alter_partition_reassignments first)."""
        self._controller.write("UnregisterBroker", unregister_broker_request(broker_id))

    def describe_log_dirs(
        self, broker_ids: Iterable[int] | None = None, topics: Iterable[str] | None = None
    ) -> dict[int, dict[str, LogDirDescription]]:
        """What each broker (of `broker_ids`, or every registered one) stores, by log dir path:
        its disk's total and usable bytes and each replica there (of `topics`, or all) with its
        size and offset lag. KafkaError: BROKER_NOT_AVAILABLE for an id not registered (nothing
        is sent) or a broker silent for request.timeout.ms. Kafka's describeLogDirs."""
        return self._log_dirs.describe_log_dirs(broker_ids, topics)

    def describe_configs(self, topic: str | ConfigResource) -> dict[str, ConfigEntry]:
        """A topic's configs (source "dynamic": its own, "dynamic default": the cluster-wide
        default, "default": built in), or with BROKER_DEFAULTS the cluster-wide topic defaults
        (config_resources.py)."""
        resource = resource_message(topic)
        request = c.DescribeConfigsRequest(
            resources=[c.DescribeConfigsRequest.Resource(resource=resource)],
            min_metadata_offset=self._controller.metadata_offset,
        )
        answer = self._controller.read("DescribeConfigs", request)
        raise_first(answer.results)
        return config_entries_of(answer.results[0])

    def alter_configs(
        self,
        topic: str | ConfigResource,
        set: Mapping[str, str] | None = None,
        delete: Iterable[str] = (),
        validate_only: bool = False,
    ) -> None:
        """Set and/or delete (back to default) a topic's configs, or with BROKER_DEFAULTS the
        cluster-wide topic defaults (log.retention.ms=…), validated together."""
        resource = resource_message(topic)
        alterations = config_alterations(resource_label(topic), set or {}, delete)
        item = c.IncrementalAlterConfigsRequest.Resource(resource=resource, alterations=alterations)
        request = c.IncrementalAlterConfigsRequest(resources=[item], validate_only=validate_only)
        raise_first(self._controller.write("IncrementalAlterConfigs", request).results)

    def alter_client_quotas(
        self,
        alterations: Mapping[quotas.EntityLike, quotas.QuotaChanges],
        validate_only: bool = False,
    ) -> None:
        """Set (a number) or remove (None) client quotas, by entity: a QuotaEntity (a user, a
        client.id or both, each a name or QuotaEntity.DEFAULT), or a client.id alone (None: the
        default client): {QuotaEntity(user="alice"): {"producer_byte_rate": 262144}} (Kafka's
        alterClientQuotas). KafkaError INVALID_REQUEST for the first entity refused; the others
        are applied."""
        request = quotas.alter_quotas_request(alterations, validate_only)
        quotas.raise_first_refusal(self._controller.write("AlterClientQuotas", request))

    def describe_client_quotas(
        self,
        client_id: str | None = None,
        default: bool = False,
        *,
        user: str | None = None,
        default_user: bool = False,
    ) -> dict[QuotaEntity, dict[str, float]]:
        """Client quotas by QuotaEntity: every entity's (no part given), or the one entity the
        parts name exactly: `client_id` or the default client (`default`), `user` or the default
        user (`default_user`), or a pair. Kafka's describeClientQuotas."""
        offset = self._controller.metadata_offset
        request = quotas.describe_quotas_request(user, default_user, client_id, default, offset)
        return quotas.quotas_of(self._controller.read("DescribeClientQuotas", request))

    # --- transactions: at coordinators and leaders (transaction_admin_calls.py) ----------------

    def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_ms: int = 0,
    ) -> list[TransactionListing]:
        """Every transactional id of every live coordinator (in `states`, of `producer_ids`,
        open for at least `duration_ms` when given), sorted. Kafka's listTransactions."""
        return self._transactions.list_transactions(states, producer_ids, duration_ms)

    def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> dict[str, TransactionDescription]:
        """State, producer id and epoch, timeout, start and partitions of each transactional id;
        TransactionError for the first that failed (TRANSACTIONAL_ID_NOT_FOUND for one the
        coordinator does not know). Kafka's describeTransactions."""
        return self._transactions.describe_transactions(transactional_ids)

    def complete_transaction(self, prepared: PreparedTransaction, commit: bool) -> None:
        """Commit (or abort) a transaction another process prepared (`Producer.
        prepare_transaction`, KIP-939's idea): EndTxn at its coordinator with the identity the
        producer handed out. Safe to repeat: a completed transaction asked the same again
        answers as the first time. TransactionError for a refusal (INVALID_PRODUCER_EPOCH: a
        newer instance of the transactional id fenced it, and aborted it)."""
        self._transactions.complete_transaction(prepared, commit)

    def describe_producers(
        self, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], list[ProducerState]]:
        """The producers each partition's leader remembers, by producer id, with the start of
        each one's open transaction (-1: none): how to find a hanging transaction and the
        producer id and epoch to abort. TransactionError for a partition that does not exist,
        or whose leader did not answer within request.timeout.ms. Kafka's describeProducers."""
        return self._transactions.describe_producers(partitions)

    def find_hanging_transactions(
        self,
        partitions: Iterable[tuple[str, int]],
        max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    ) -> list[OpenTransaction]:
        """The hanging transactions on `partitions`, by partition and producer id (Kafka's
        `kafka-transactions.sh find-hanging`, KIP-664): each one open there, its producer silent
        there for at least `max_transaction_timeout_ms` (the coordinators'
        transaction.max.timeout.ms, 15 minutes by default), and no coordinator ending it — no
        transactional id of its producer is known, or the id's coordinator is not ending a
        transaction on that partition. `abort_transaction` ends each. TransactionError as for
        describe_producers and list_transactions."""
        return self._transactions.find_hanging_transactions(partitions, max_transaction_timeout_ms)

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
        retry that finds the transaction aborted by this call's lost attempt (the producer one
        epoch up, nothing open) returns as done."""
        self._transactions.abort_transaction(topic, partition, producer_id, producer_epoch)

    def close(self) -> None:
        """Close every channel. A call made afterwards, or still retrying on another thread,
        raises KafkaError (INVALID_REQUEST) saying the client is closed; one under way there is
        cancelled, and its channel closed once it left (closing it under the call races grpc's
        C core: channels.py)."""
        self._channels.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
