"""What the replication integration tests share: cluster settings with a short lag window (so an
ISR shrinks within seconds), a topic of replication factor 3 with min.insync.replicas=2, and its
partition 0 as the controller describes it."""

from __future__ import annotations

from cluster_helpers import FAST_SETTINGS, admin_write, wait_until

from samsa.client import Admin, NewTopic
from samsa.v1 import controller_pb2

SETTINGS = dict(FAST_SETTINGS, **{"replica.lag.time.max.ms": "2000"})


def partition_state(cluster, topic: str):
    answer = admin_write(
        cluster.spec, "DescribeTopics", controller_pb2.DescribeTopicsRequest(names=[topic])
    )
    return answer.topics[0].partitions[0]


def create_replicated(cluster, topic: str) -> None:
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, 1, 3, {"min.insync.replicas": "2"})])


def wait_full_isr(cluster, topic: str, timeout_s: float = 60):
    return wait_until(
        f"{topic} led with a full ISR",
        lambda: (s := partition_state(cluster, topic)).leader >= 0 and len(s.isr) == 3 and s,
        timeout_s,
    )
