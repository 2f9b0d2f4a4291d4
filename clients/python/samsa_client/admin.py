"""Admin: topics, partitions, configs and the cluster, through the controllers.

Writes go to the active controller: a controller that is not active answers NOT_CONTROLLER with
the active one's address, and the call follows it (or tries the next controller while an election
runs). After a write, reads ask for at least the metadata offset the write answered with, so this
client always reads its own writes, whichever controller answers.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc

from samsa.client.channels import Channels
from samsa.client.cluster_metadata import ClusterMetadata
from samsa.client.errors import KafkaError, NoBrokersAvailable, TopicError
from samsa.common.errors import ErrorCode, InvalidConfigError
from samsa.v1 import controller_pb2 as c

WRITE_TIMEOUT_S = 30.0
ADMIN_KEYS = frozenset({"bootstrap.servers", "client.id", "request.timeout.ms"})
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
class ClusterDescription:
    cluster_id: str
    controllers: tuple[ControllerInfo, ...]
    brokers: tuple[BrokerInfo, ...]
    metadata_offset: int


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
            raise InvalidConfigError("bootstrap.servers is required (the controllers' host:port)")
        endpoints = servers.split(",") if isinstance(servers, str) else list(servers)  # type: ignore[arg-type]
        self._channels = Channels()
        self._metadata = ClusterMetadata(
            [e.strip() for e in endpoints if e.strip()], self._channels
        )
        self._active: str | None = None
        self._offset = 0

    # --- plumbing ------------------------------------------------------------------------------

    def _write(self, method: str, request: Any) -> Any:
        endpoints = self._metadata.bootstrap
        deadline = time.monotonic() + WRITE_TIMEOUT_S
        endpoint = self._active or endpoints[0]
        index = 0
        while time.monotonic() < deadline:
            try:
                answer = getattr(self._metadata.stub(endpoint), method)(request, timeout=10)
            except grpc.RpcError as error:
                if error.code() == grpc.StatusCode.INVALID_ARGUMENT:
                    raise KafkaError(error.details() or "", ErrorCode.INVALID_REQUEST) from None
                answer = None
            if answer is not None and answer.status.error_code != ErrorCode.NOT_CONTROLLER:
                self._active = endpoint
                self._offset = max(self._offset, answer.status.metadata_offset)
                self._metadata.metadata_offset = self._offset
                if answer.status.error_code != ErrorCode.NONE:
                    raise KafkaError.of(answer.status.error_code, answer.status.error_message)
                return answer
            redirect = answer.status.active_controller.endpoint if answer is not None else ""
            if redirect and redirect != endpoint and redirect in endpoints:
                endpoint = redirect
                continue
            index += 1
            endpoint = endpoints[index % len(endpoints)]
            time.sleep(0.1)
        raise NoBrokersAvailable(f"{method}: no active controller among {endpoints} answered")

    def _read(self, method: str, request: Any) -> Any:
        return self._metadata.read(method, request, timeout_s=10)

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
        answer = self._metadata.describe_topics(names, self._offset, timeout_s=10)
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

    def close(self) -> None:
        self._channels.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
