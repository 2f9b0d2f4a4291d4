"""Goal: every service serves Prometheus metrics when asked (`--metrics-listen`), with per-RPC
latency histograms and stream message counts that move when clients use the cluster; a bad
address stops the service at start with one line naming the flag's value.

Method: a real cluster (1 controller, 1 broker, 1 coordinator; stopped by PID also on failure)
started with --metrics-listen on free loopback ports; produce and consume with a group through
the SDK, then scrape each service's /metrics over HTTP and read the counts.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import TRANSACTION_SETTINGS, wait_until

from samsa.cli.launcher import (
    LocalCluster,
    ensure_secret,
    free_ports,
    load_or_create,
    wait_healthy,
)
from samsa.client import Admin, Consumer, NewTopic, Producer

TOPIC = "metered"


class MeteredCluster(LocalCluster):
    """The launcher's cluster, each process also serving metrics on a port of its own."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        names = list(super().commands())
        self.metrics_ports = dict(zip(names, free_ports(len(names), self.spec.ports), strict=True))

    def commands(self) -> dict[str, list[str]]:
        return {
            name: [*command, "--metrics-listen", f"127.0.0.1:{self.metrics_ports[name]}"]
            for name, command in super().commands().items()
        }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MeteredCluster]:
    data_dir: Path = tmp_path_factory.mktemp("metrics")
    spec = load_or_create(data_dir, 1, 1, TRANSACTION_SETTINGS, coordinators=1)
    metered = MeteredCluster(spec, data_dir)
    try:
        metered.start_all()
        wait_healthy(metered, timeout_s=60)
        yield metered
    finally:
        metered.stop_all()


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return answer.read().decode()


def sample(text: str, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when there is none)."""
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"{name}\{{(.*)\}} (\S+)$", line)
        if match and all(f'{k}="{v}"' in match.group(1) for k, v in labels.items()):
            total += float(match.group(2))
    return total


def test_each_service_serves_rpc_metrics_that_follow_the_traffic(cluster: MeteredCluster) -> None:
    bootstrap = cluster.spec.bootstrap_servers
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(TOPIC, 2, 1)])
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for i in range(50):
            producer.send(TOPIC, b"v%d" % i)
        producer.flush(30)
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": "metered",
        "auto.offset.reset": "earliest",
    }
    with Consumer(config) as consumer:
        consumer.subscribe([TOPIC])
        seen: list[object] = []
        wait_until(
            "50 records consumed", lambda: seen.extend(consumer.poll(0.5)) or len(seen) >= 50
        )
        consumer.commit()

    ports = cluster.metrics_ports
    controller = scrape(ports["controller-1"])
    assert (
        sample(controller, "rpc_server_duration_milliseconds_count", rpc_method="CreateTopics") >= 1
    )
    assert 'service_name="samsa-controller-1"' in controller
    broker = scrape(ports["broker-1"])
    produced = sample(
        broker, "rpc_server_messages_total", rpc_method="ProduceStream", direction="received"
    )
    unary = sample(broker, "rpc_server_duration_milliseconds_count", rpc_method="Produce")
    assert produced + unary >= 1  # the SDK produces over the stream, others unary
    fetched = sample(
        broker, "rpc_server_messages_total", rpc_method="FetchStream", direction="sent"
    )
    assert (
        fetched + sample(broker, "rpc_server_duration_milliseconds_count", rpc_method="Fetch") >= 1
    )
    coordinator = scrape(ports["coordinator-1"])
    beats = sample(
        coordinator, "rpc_server_duration_milliseconds_count", rpc_method="ConsumerGroupHeartbeat"
    )
    assert beats >= 1
    assert (
        sample(coordinator, "rpc_server_duration_milliseconds_count", rpc_method="OffsetCommit")
        >= 1
    )
    # a histogram's buckets hold what its count says
    assert sample(
        coordinator, "rpc_server_duration_milliseconds_bucket", rpc_method="OffsetCommit", le="+Inf"
    ) == sample(coordinator, "rpc_server_duration_milliseconds_count", rpc_method="OffsetCommit")


WATCHED = "watched"


def test_each_service_exports_what_a_kafka_operator_watches(cluster: MeteredCluster) -> None:
    """Records and bytes in and out per topic, partitions and their replication, producer ids
    (broker); the active controller and what its image holds (controller); groups, rebalances,
    lag and open transactions (coordinator). Gauges are refreshed every few seconds and lag
    every 10 s, so each is waited for rather than read once."""
    bootstrap = cluster.spec.bootstrap_servers
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(WATCHED, 2, 1), NewTopic("watched-txn", 1, 1)])
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for i in range(40):
            producer.send(WATCHED, b"w%d" % i, partition=i % 2)
        producer.flush(30)
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": "watchers",
        "auto.offset.reset": "earliest",
    }
    with Consumer(config) as consumer:
        consumer.subscribe([WATCHED])
        seen: list[object] = []
        wait_until(
            "40 records consumed", lambda: seen.extend(consumer.poll(0.5)) or len(seen) >= 40
        )
        consumer.commit()
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for i in range(10):  # the group's lag: 10, spread over both partitions
            producer.send(WATCHED, b"late%d" % i, partition=i % 2)
        producer.flush(30)
    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": "watched-app"})
    try:
        transactional.init_transactions(30)
        transactional.begin_transaction()
        transactional.send("watched-txn", b"pending")
        transactional.flush(30)
        _check_broker(scrape(cluster.metrics_ports["broker-1"]))
        wait_until(
            "broker gauges refreshed",
            lambda: _broker_gauges_hold(scrape(cluster.metrics_ports["broker-1"])),
        )
        wait_until(
            "controller gauges",
            lambda: _controller_gauges_hold(scrape(cluster.metrics_ports["controller-1"])),
        )
        wait_until(
            "coordinator gauges and lag",
            lambda: _coordinator_gauges_hold(scrape(cluster.metrics_ports["coordinator-1"])),
            timeout_s=60,
        )
    finally:
        with contextlib.suppress(Exception):
            transactional.abort_transaction(30)
        transactional.close()


def _check_broker(broker: str) -> None:
    topic = {"topic": WATCHED}
    assert sample(broker, "samsa_broker_records_in_total", **topic) == 50
    produced = sample(broker, "samsa_broker_io_bytes_total", direction="in", **topic)
    consumed = sample(broker, "samsa_broker_io_bytes_total", peer="consumer", **topic)
    assert produced > 50 and consumed > 0, (produced, consumed)
    # the 40 consumed (a fetch answer the consumer dropped in a rebalance would add to it)
    assert sample(broker, "samsa_broker_records_out_total", peer="consumer", **topic) >= 40
    assert sample(broker, "samsa_broker_io_bytes_total", peer="follower", **topic) == 0


def _broker_gauges_hold(broker: str) -> bool:
    led = sample(broker, "samsa_broker_partitions", role="leader")
    return (
        led >= 3  # watched (2) and watched-txn (1), besides the coordinators' topics
        and sample(broker, "samsa_broker_partitions", role="follower") == 0
        and "samsa_broker_partitions_under_replicated{" in broker
        and sample(broker, "samsa_broker_partitions_under_replicated") == 0
        and sample(broker, "samsa_broker_partitions_under_min_isr") == 0
        and sample(broker, "samsa_broker_producer_ids") >= 3  # idempotent producers' entries
    )


def _controller_gauges_hold(controller: str) -> bool:
    return (
        sample(controller, "samsa_controller_active") == 1
        and sample(controller, "samsa_controller_metadata_offset") > 0
        and sample(controller, "samsa_controller_brokers", state="unfenced") == 1
        and "samsa_controller_brokers{" in controller
        and sample(controller, "samsa_controller_brokers", state="fenced") == 0
        and sample(controller, "samsa_controller_topics") >= 3
        and sample(controller, "samsa_controller_partitions") >= 4
        and "samsa_controller_partitions_offline{" in controller
        and sample(controller, "samsa_controller_partitions_offline") == 0
        and sample(controller, "samsa_controller_coordinators", state="live") == 1
    )


def _coordinator_gauges_hold(coordinator: str) -> bool:
    lag = sample(coordinator, "samsa_coordinator_group_lag", group="watchers", topic=WATCHED)
    return (
        lag == 10
        and sample(coordinator, "samsa_coordinator_groups") >= 1
        and sample(coordinator, "samsa_coordinator_group_rebalances_total") >= 1
        and sample(coordinator, "samsa_coordinator_transactions", state="ongoing") >= 1
        and sample(coordinator, "samsa_coordinator_transactions_open") >= 1
    )


@pytest.mark.parametrize(
    ("address", "words"),
    [("nonsense", "HOST:PORT, :PORT or PORT"), ("taken", "cannot serve metrics on 127.0.0.1:")],
)
def test_a_bad_metrics_address_stops_the_service_with_one_line(
    cluster: MeteredCluster, tmp_path: Path, address: str, words: str
) -> None:
    if address == "taken":  # the running controller's metrics port
        address = f"127.0.0.1:{cluster.metrics_ports['controller-1']}"
    command = [
        sys.executable,
        "-m",
        "samsa.services.broker",
        "--broker-id",
        "9",
        "--listen",
        f"127.0.0.1:{free_ports(1)[0]}",
        "--controllers",
        cluster.spec.controllers[0].endpoint,
        "--data-dir",
        str(tmp_path / "broker-9"),
        "--secret-file",
        str(ensure_secret(tmp_path / "cluster.secret")),
        "--metrics-listen",
        address,
    ]
    ended = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert ended.returncode == 2
    assert words in ended.stderr and ended.stderr.strip().count("\n") == 0, ended.stderr
