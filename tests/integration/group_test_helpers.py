"""What the consumer-group integration tests share: cluster settings with short sessions (3 s,
heartbeats every 300 ms) and 4 partitions of `__consumer_offsets`, a consumer config for a group,
and topic creation and production helpers."""

from __future__ import annotations

from cluster_helpers import FAST_SETTINGS

from samsa.cli.launcher import LocalCluster
from samsa.client import Admin, NewTopic, Producer

TopicPartition = tuple[str, int]

SETTINGS = dict(FAST_SETTINGS) | {
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.num.partitions": "2",
    "coordinator.session.timeout.ms": "3000",
    "coordinator.heartbeat.interval.ms": "300",
    "group.consumer.session.timeout.ms": "3000",
    "group.consumer.heartbeat.interval.ms": "300",
}


def consumer_config(cluster: LocalCluster, group_id: str, **settings: object) -> dict:
    return {
        "bootstrap.servers": cluster.spec.bootstrap_servers,
        "group.id": group_id,
        "auto.offset.reset": "earliest",
        **settings,
    }


def create_topics(cluster: LocalCluster, *topics: NewTopic) -> None:
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        admin.create_topics(list(topics))


def produce(cluster: LocalCluster, topic: str, values: dict[bytes, int]) -> None:
    """Send each value to its partition and wait for every acknowledgement."""
    with Producer({"bootstrap.servers": cluster.spec.bootstrap_servers, "linger.ms": 5}) as p:
        futures = [p.send(topic, value, partition=at) for value, at in values.items()]
        p.flush(30)
    for future in futures:
        future.result(timeout=0)
