"""Goal: cluster-wide topic defaults (KIP-226's --entity-default) set at run time reach a
running broker and every topic without its own value, and survive a restart: DescribeConfigs
reports a defaulted value as DYNAMIC_DEFAULT and a topic's own value as DYNAMIC; the broker
rolls small segments and applies retention to the topic that takes the default, while the
topic with its own retention.ms keeps its records.

Method: 1 controller, 1 broker, retention checked every 300 ms. Two topics are created with no
defaults set: `plain` (no configs) and `own` (retention.ms=-1, keep forever). Then, at run time
through the SDK (bootstrapped from the broker, so the write is forwarded, and the broker's own
replica answers the describe), the defaults message.max.bytes=4096, log.segment.bytes=16384 and
log.retention.hours=-1 (nothing goes while filling: the records' 2020 CreateTime is past the
built-in 7 days); records go to both topics until each holds several segments on disk (a
condition, not a count). Then log.retention.ms=60000 by the CLI, which wins over
log.retention.hours as in Kafka: `plain`'s log start moves past 0 (waited for) while `own`'s
stays 0 in the same state. Last,
the controller and the broker are stopped (SIGTERM) and started again, and the defaults are
still described, by the controller and by the broker's own replica.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster, wait_until

from samsa.cli.launcher import LocalCluster, wait_healthy
from samsa.cli.main import main as samsa_main
from samsa.client import BROKER_DEFAULTS, Admin, NewTopic, Producer

pytestmark = pytest.mark.timeout(300)

OLD_TIMESTAMP_MS = 1_600_000_000_000  # 2020: older than any retention.ms set here
SETTINGS = FAST_SETTINGS | {"log.retention.check.interval.ms": "300"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("defaults"), 1, 1, SETTINGS) as running:
        yield running


def segments(cluster: LocalCluster, topic: str) -> int:
    return len(list((cluster.data_dir / "broker-1" / f"{topic}-0").glob("*.log")))


def log_start(admin: Admin, topic: str) -> int:
    return admin.list_offsets({(topic, 0): "earliest"})[(topic, 0)].offset


def fill(producer: Producer, cluster: LocalCluster, topic: str) -> bool:
    """Send a few records; True once the topic's log holds at least 3 segments."""
    for _ in range(20):
        producer.send(topic, b"x" * 200, partition=0, timestamp=OLD_TIMESTAMP_MS)
    producer.flush()
    return segments(cluster, topic) >= 3


def test_defaults_apply_at_run_time_to_topics_without_their_own_value_and_survive_restart(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    broker = cluster.spec.brokers[0].endpoint
    admin = Admin({"bootstrap.servers": broker})
    producer = Producer(
        {"bootstrap.servers": broker, "batch.size": 1024, "linger.ms": 0, "acks": "all"}
    )
    try:
        admin.create_topics(
            [NewTopic("plain", 1, 1), NewTopic("own", 1, 1, {"retention.ms": "-1"})]
        )
        # Keep everything while filling: the records' 2020 CreateTime is past the built-in 7 days.
        small = {"message.max.bytes": "4096", "log.segment.bytes": "16384"}
        admin.alter_configs(BROKER_DEFAULTS, set=small | {"log.retention.hours": "-1"})
        described = admin.describe_configs("plain")
        assert described["segment.bytes"].value == "16384"
        assert described["segment.bytes"].source == "dynamic default"
        wait_until("plain rolled small segments", lambda: fill(producer, cluster, "plain"))
        wait_until("own rolled small segments", lambda: fill(producer, cluster, "own"))
        assert log_start(admin, "plain") == 0, "log.retention.hours=-1 kept everything"

        argv = ["configs", "--bootstrap-server", broker, "--entity-type", "brokers"]
        argv += ["--entity-default", "--alter", "--add-config", "log.retention.ms=60000"]
        assert samsa_main(argv) == 0
        assert "Completed updating default config" in capsys.readouterr().out
        wait_until("retention to delete plain's old segments", lambda: log_start(admin, "plain"))
        assert log_start(admin, "own") == 0, "own keeps its records (retention.ms=-1)"
        assert segments(cluster, "own") >= 3
        plain, own = admin.describe_configs("plain"), admin.describe_configs("own")
        assert (plain["retention.ms"].value, plain["retention.ms"].source) == (
            "60000",
            "dynamic default",
        )
        assert (own["retention.ms"].value, own["retention.ms"].source) == ("-1", "dynamic")
    finally:
        producer.close()
        admin.close()

    cluster.kill("broker-1", signal.SIGTERM)
    cluster.kill("controller-1", signal.SIGTERM)
    cluster.start("controller-1")
    cluster.start("broker-1")
    wait_healthy(cluster, timeout_s=60)
    for endpoint in (cluster.spec.controllers[0].endpoint, broker):
        with Admin({"bootstrap.servers": endpoint}) as again:
            defaults = wait_until(
                f"the defaults described through {endpoint}",
                lambda again=again: again.describe_configs(BROKER_DEFAULTS),
            )
            assert defaults["log.retention.ms"].value == "60000"
            assert defaults["log.retention.ms"].source == "dynamic default"
            assert again.describe_configs("plain")["segment.bytes"].value == "16384"
    argv = ["configs", "--bootstrap-server", broker, "--entity-type", "brokers"]
    assert samsa_main([*argv, "--entity-default", "--describe"]) == 0
    out = capsys.readouterr().out
    assert "Default configs for brokers in the cluster are:" in out
    assert "log.retention.ms=60000" in out and "DYNAMIC_DEFAULT_BROKER_CONFIG" in out
    # A broker id names its replication throttle rates (none set here), not topic defaults.
    assert samsa_main([*argv, "--entity-name", "1", "--describe"]) == 0
    assert "Dynamic configs for broker 1 are:" in capsys.readouterr().out
    assert samsa_main([*argv, "--entity-name", "b1", "--describe"]) == 2
    assert cluster.exited() == {}
