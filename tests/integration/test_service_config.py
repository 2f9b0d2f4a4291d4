"""Goal: a broker can be configured as a container would configure it — SAMSA_* variables and a
--config file, no other flag — and it binds `listeners` while telling the cluster its
`advertised.listeners`; a bad value stops it at start with one line naming the key.

Method: a real controller (the launcher's, stopped by PID), and a broker started by hand as
`python -m samsa.services.broker --config broker.properties` with SAMSA_BROKER_ID,
SAMSA_LISTENERS=0.0.0.0:PORT and SAMSA_ADVERTISED_LISTENERS=127.0.0.1:PORT in its environment
(stopped by PID in a finally). DescribeCluster must list the advertised address (not 0.0.0.0),
and a producer and a consumer given only the controller find the broker through it. Then the same
broker with SAMSA_BROKER_ID=x, and with an unknown key in the file, must exit with code 2 and one
line on stderr. Timeouts are generous bounds, never assertions.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import FAST_SETTINGS, controller_stub, wait_until

from samsa.cli.launcher import HOST, LocalCluster, free_ports, load_or_create
from samsa.client import Admin, Consumer, NewTopic, Producer
from samsa.common import grpc_experiments
from samsa.v1 import controller_pb2

pytestmark = pytest.mark.timeout(240)

TOPIC = "configured"
RECORDS = 200


def broker_environment(**samsa: str) -> dict[str, str]:
    """This process's environment without SAMSA_* variables and GRPC_EXPERIMENTS (as on a
    machine where nothing set them), plus `samsa`."""
    environ = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("SAMSA_") and name != grpc_experiments.VARIABLE
    }
    return environ | samsa


def write_properties(path: Path, cluster: LocalCluster, extra: str = "") -> Path:
    path.write_text(
        "# A broker's file, Kafka-style; the id and addresses come from the environment.\n"
        f"controller.quorum.bootstrap.servers={cluster.spec.bootstrap_servers}\n"
        f"log.dir={cluster.data_dir / 'broker-1'}\n"
        f"cluster.secret.file={cluster.data_dir / 'cluster.secret'}\n"
        f"broker.heartbeat.interval.ms={FAST_SETTINGS['broker.heartbeat.interval.ms']}\n" + extra
    )
    return path


def broker_command(properties: Path) -> list[str]:
    return [sys.executable, "-m", "samsa.services.broker", "--config", str(properties)]


@contextlib.contextmanager
def registered_broker(
    tmp_path: Path, cluster: LocalCluster, properties: Path, environ: dict[str, str]
) -> Iterator[tuple[controller_pb2.DescribeClusterResponse.Broker, Path]]:
    """The cluster's controller, and a broker started by hand with `properties` and `environ`;
    yields the broker as DescribeCluster lists it once registered and unfenced, and its log.
    Both are stopped by PID on the way out, whatever happens in between."""
    broker: subprocess.Popen[bytes] | None = None
    log_path = tmp_path / "broker-1.log"
    try:
        cluster.start("controller-1")
        with open(log_path, "wb") as log_file:
            broker = subprocess.Popen(
                broker_command(properties),
                env=environ,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

        def registered() -> controller_pb2.DescribeClusterResponse.Broker | None:
            assert broker is not None and broker.poll() is None, log_path.read_text()
            try:
                answer = controller_stub(cluster.spec.controllers[0].endpoint).DescribeCluster(
                    controller_pb2.DescribeClusterRequest(), timeout=2
                )
            except Exception:
                return None
            return next((b for b in answer.brokers if not b.is_fenced), None)

        yield wait_until("the broker registered and unfenced", registered, timeout_s=60), log_path
    finally:
        if broker is not None and broker.poll() is None:
            broker.send_signal(signal.SIGTERM)
            try:
                broker.wait(timeout=15)
            except subprocess.TimeoutExpired:
                broker.kill()
                broker.wait()
        cluster.stop_all()


def test_a_broker_configured_by_environment_and_file_advertises_its_address(
    tmp_path: Path,
) -> None:
    spec = load_or_create(tmp_path / "cluster", 1, 0, dict(FAST_SETTINGS))
    cluster = LocalCluster(spec, tmp_path / "cluster")
    properties = write_properties(tmp_path / "broker.properties", cluster)
    (port,) = free_ports(1)
    advertised = f"{HOST}:{port}"
    environ = broker_environment(
        SAMSA_BROKER_ID="1",
        SAMSA_LISTENERS=f"0.0.0.0:{port}",
        SAMSA_ADVERTISED_LISTENERS=advertised,
    )
    with registered_broker(tmp_path, cluster, properties, environ) as (listed, log_path):
        assert (listed.broker_id, listed.endpoint) == (1, advertised)
        (starting,) = [
            line
            for line in map(json.loads, re.findall(r"^\{.*\}$", log_path.read_text(), re.M))
            if line.get("msg") == "starting"
        ]
        if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
            assert starting["allocator"] == "tuned"  # common/allocator.py
        # common/grpc_experiments.py: chosen by the broker itself, and known to this grpcio.
        assert starting["grpc_experiments"] == grpc_experiments.LEGACY_POLLER
        assert "Unknown experiment" not in log_path.read_text()

        bootstrap = spec.bootstrap_servers  # the controller: the broker is found through it
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, 1)])
            assert {b.endpoint for b in admin.describe_cluster().brokers} == {advertised}
        with Producer({"bootstrap.servers": bootstrap}) as producer:
            sent = [producer.send(TOPIC, b"%d" % n) for n in range(RECORDS)]
            producer.flush(30)
        assert [future.result(timeout=0).offset for future in sent] == list(range(RECORDS))
        received: list[int] = []
        with Consumer({"bootstrap.servers": bootstrap}) as consumer:
            consumer.assign([(TOPIC, 0)])
            consumer.seek_to_beginning()
            deadline = time.monotonic() + 60
            while len(received) < RECORDS and time.monotonic() < deadline:
                received += [int(record.value) for record in consumer.poll(timeout=1)]
        assert received == list(range(RECORDS))


def test_a_broker_listening_on_any_free_port_advertises_the_port_it_bound(
    tmp_path: Path,
) -> None:
    # listeners=127.0.0.1:0 without advertised.listeners registered 127.0.0.1:0: the broker
    # ran, and no client or replica could ever reach it.
    spec = load_or_create(tmp_path / "cluster", 1, 0, dict(FAST_SETTINGS))
    cluster = LocalCluster(spec, tmp_path / "cluster")
    properties = write_properties(tmp_path / "broker.properties", cluster)
    environ = broker_environment(SAMSA_BROKER_ID="1", SAMSA_LISTENERS=f"{HOST}:0")
    with registered_broker(tmp_path, cluster, properties, environ) as (listed, _):
        host, _, port = listed.endpoint.rpartition(":")
        assert host == HOST and int(port) != 0, listed.endpoint
        with Admin({"bootstrap.servers": spec.bootstrap_servers}) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, 1)])
        with Producer({"bootstrap.servers": spec.bootstrap_servers}) as producer:
            sent = producer.send(TOPIC, b"reached")
            producer.flush(30)
        assert sent.result(timeout=0).offset == 0


@pytest.mark.parametrize(
    ("environ", "extra", "line"),
    [
        (
            {"SAMSA_BROKER_ID": "x"},
            "",
            "samsa broker: SAMSA_BROKER_ID='x' (environment): broker.id must be an integer from "
            "0 to 2147483647",
        ),
        (
            {"SAMSA_BROKER_ID": "1"},
            "replica.lag.time.max=100\n",
            "samsa broker: replica.lag.time.max (broker.properties line 6): not a broker key; "
            "did you mean replica.lag.time.max.ms?",
        ),
        (
            {"SAMSA_BROKER_ID": "1"},
            "",
            "samsa broker: listeners='0.0.0.0:1' binds every interface, so advertised.listeners "
            "must say which host:port others dial (e.g. SAMSA_ADVERTISED_LISTENERS=broker-1:9093) "
            "(listeners: SAMSA_LISTENERS (environment); advertised.listeners: not set)",
        ),
    ],
)
def test_a_bad_setting_stops_the_broker_with_one_line_naming_the_key(
    tmp_path: Path, environ: dict[str, str], extra: str, line: str
) -> None:
    spec = load_or_create(tmp_path / "cluster", 1, 0)  # files only: nothing is started
    properties = write_properties(
        tmp_path / "broker.properties", LocalCluster(spec, tmp_path / "cluster"), extra
    )
    # run() waits for the exit; a broker that wrongly started would be killed at the timeout.
    exited = subprocess.run(
        broker_command(properties),
        env=broker_environment(SAMSA_LISTENERS="0.0.0.0:1", **environ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert exited.returncode == 2
    assert exited.stderr.splitlines() == [line]
