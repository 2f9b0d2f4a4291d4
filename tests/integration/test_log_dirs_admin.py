"""Goal: Admin.describe_log_dirs and `samsa log-dirs --describe` show what each real broker
stores (Kafka's kafka-log-dirs.sh): each broker's one log dir (its --data-dir), its disk's total
and usable bytes, and each replica there, leader or follower, with the bytes of its segment
files and offset lag 0 once replicated; a topic filter narrows the answer, a broker filter
picks brokers, an unregistered broker id is a clear error, and a broker's answer read one
replica a page is the same as read whole.

Method: 1 controller, 2 brokers (FAST_SETTINGS), everything through an Admin bootstrapped from
broker 1. Two topics of replication factor 2, 1 KiB segments: `stored` (2 partitions) and
`other` (1), with known records produced acks=all one at a time. The test then waits until
every broker reports, for each replica of both topics, the sum of the sizes of that replica's
`*.log` files read from the broker's data dir, and offset lag 0. The CLI runs in-process
(`samsa.cli.main.main`), its table and --json output read from stdout.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster, open_channel, wait_until

from samsa.cli.launcher import LocalCluster
from samsa.cli.main import main as samsa_main
from samsa.client import Admin, Producer
from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2, broker_pb2_grpc

pytestmark = pytest.mark.timeout(300)

TOPICS = {"stored": 2, "other": 1}
SMALL_SEGMENTS = {"segment.bytes": "1024", "max.message.bytes": "1024"}
RECORDS = 12  # per partition, 300 bytes each, one batch each: several 1 KiB segments


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("log-dirs"), 1, 2, FAST_SETTINGS) as running:
        yield running


def broker_endpoint(cluster: LocalCluster, broker_id: int) -> str:
    return next(b.endpoint for b in cluster.spec.brokers if b.broker_id == broker_id)


def broker_dir(cluster: LocalCluster, broker_id: int) -> Path:
    return cluster.data_dir / f"broker-{broker_id}"


def sizes_on_disk(cluster: LocalCluster, broker_id: int) -> dict[tuple[str, int], int]:
    """Each replica of TOPICS on the broker: the bytes of its segment files, as read now."""
    return {
        (topic, number): sum(
            path.stat().st_size
            for path in (broker_dir(cluster, broker_id) / f"{topic}-{number}").glob("*.log")
        )
        for topic, count in TOPICS.items()
        for number in range(count)
    }


def produce(bootstrap: str) -> None:
    with Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0}) as producer:
        for n in range(RECORDS):
            for topic, count in TOPICS.items():
                for number in range(count):
                    producer.send(topic, b"%03d" % n + b"x" * 297, partition=number).result(30)


def test_each_broker_reports_its_replicas_sizes_and_disk_space(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    via = broker_endpoint(cluster, 1)
    admin = Admin({"bootstrap.servers": via})
    try:
        for topic, count in TOPICS.items():
            admin.create_topic(topic, count, 2, SMALL_SEGMENTS)
        produce(via)

        def settled() -> dict[int, dict] | None:  # type: ignore[type-arg]
            described = admin.describe_log_dirs(topics=list(TOPICS))
            for broker_id in (1, 2):
                (log_dir,) = described[broker_id].values()
                shown = {key: r.size for key, r in log_dir.replicas.items()}
                if shown != sizes_on_disk(cluster, broker_id):
                    return None
                if any(r.offset_lag for r in log_dir.replicas.values()):
                    return None
            return described

        described = wait_until("both brokers' sizes matching their files", settled)
        for broker_id in (1, 2):
            ((path, log_dir),) = described[broker_id].items()
            assert path == str(broker_dir(cluster, broker_id).absolute())
            assert log_dir.error is None
            assert 0 < log_dir.usable_bytes <= log_dir.total_bytes
            assert set(log_dir.replicas) == {("stored", 0), ("stored", 1), ("other", 0)}
            assert not any(r.is_future for r in log_dir.replicas.values())
            # Several segments each, and every record's bytes are there.
            assert all(r.size > RECORDS * 300 for r in log_dir.replicas.values())
            assert len(list((broker_dir(cluster, broker_id) / "stored-0").glob("*.log"))) > 1

        # Filters: a topic narrows the replicas, a broker list picks the brokers.
        narrowed = admin.describe_log_dirs([2], ["other"])
        assert list(narrowed) == [2]
        ((path, log_dir),) = narrowed[2].items()
        assert log_dir.replicas == {("other", 0): described[2][path].replicas[("other", 0)]}
        everything = admin.describe_log_dirs()  # every broker, every replica
        assert set(everything) == {1, 2}
        for broker_id in (1, 2):
            ((path, log_dir),) = everything[broker_id].items()
            assert set(described[broker_id][path].replicas) <= set(log_dir.replicas)
        # No topic: each dir's figures, no replica.
        assert all(
            not d.replicas
            for dirs in admin.describe_log_dirs(topics=[]).values()
            for d in dirs.values()
        )

        # Read one replica a page, the answer is the same.
        paged = admin._log_dirs.describe_log_dirs(None, list(TOPICS), partition_limit=1)
        assert {b: {p: d.replicas for p, d in dirs.items()} for b, dirs in paged.items()} == {
            b: {p: d.replicas for p, d in dirs.items()} for b, dirs in described.items()
        }

        with pytest.raises(KafkaError) as unknown:
            admin.describe_log_dirs([1, 7])
        assert unknown.value.code == ErrorCode.BROKER_NOT_AVAILABLE
        assert "broker(s) 7 are not registered (registered brokers: 1,2)" in str(unknown.value)

        # The broker refuses a topic named twice before any work.
        stub = broker_pb2_grpc.BrokerServiceStub(open_channel(via))
        twice = broker_pb2.DescribeLogDirsRequest(
            topics=[broker_pb2.DescribeLogDirsRequest.TopicRequest(name="other")] * 2
        )
        with pytest.raises(grpc.RpcError) as refused:
            stub.DescribeLogDirs(twice, timeout=10)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT

        # The CLI: the table, then Kafka's JSON.
        assert (
            samsa_main(
                ["log-dirs", "--describe", "--bootstrap-server", via, "--topic-list", "stored"]
            )
            == 0
        )
        table = capsys.readouterr().out
        size = described[1][str(broker_dir(cluster, 1).absolute())].replicas[("stored", 1)].size
        assert any(
            line.split()[:5]
            == ["1", str(broker_dir(cluster, 1).absolute()), "stored-1", str(size), "0"]
            for line in table.splitlines()
        ), table
        assert "other-0" not in table and "usable bytes" in table
        argv = ["log-dirs", "--describe", "--bootstrap-server", via, "--broker-list", "2", "--json"]
        assert samsa_main(argv) == 0
        shown = json.loads(capsys.readouterr().out)
        ((broker,),) = [shown["brokers"]]
        assert (shown["version"], broker["broker"]) == (1, 2)
        (log_dir_json,) = broker["logDirs"]
        assert log_dir_json["error"] is None
        by_partition = {p["partition"]: p for p in log_dir_json["partitions"]}
        path_2 = str(broker_dir(cluster, 2).absolute())
        assert by_partition["stored-0"] == {
            "partition": "stored-0",
            "size": described[2][path_2].replicas[("stored", 0)].size,
            "offsetLag": 0,
            "isFuture": False,
        }
        assert (
            samsa_main(["log-dirs", "--describe", "--bootstrap-server", via, "--broker-list", "9"])
            == 1
        )
        assert "broker(s) 9 are not registered" in capsys.readouterr().err
    finally:
        admin.close()
