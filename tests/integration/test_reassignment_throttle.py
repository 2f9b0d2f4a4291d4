"""Goal: a partition move runs under KIP-73's replication throttles as the README says, with real
processes: `samsa reassign --execute --throttle` caps how fast the new replica copies the
partition (far below unthrottled), removing the throttle lets the move complete, and
`reassign --verify` removes the throttle configs once it has.

Method: 1 controller, 2 brokers. ~3 MB of incompressible records go to a partition placed on
broker 1; the CLI (a subprocess) moves it to [1, 2] with a 200 KB/s throttle. The copied bytes
of broker 2's new replica are sampled through DescribeLogDirs over at least 3 s of wall clock
once copying has begun: their rate must stay under 3x the throttle (a slow machine only lowers
it), and the move is still in progress then (at 200 KB/s, 3 MB take ~15 s). `--verify` then
exits 1 and leaves the configs; the rates are deleted (`samsa configs --entity-name ID`), the
move completes (waited for), and `--verify` exits 0, says the throttle was removed, and the
topic's throttled-replica lists are back to their defaults.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster, wait_until

from samsa.cli.launcher import LocalCluster
from samsa.client import Admin, ConfigResource, NewTopic, Producer

pytestmark = pytest.mark.timeout(300)

TOPIC = "moved"
THROTTLE = 200_000  # bytes per second
RECORD_BYTES = 1000
RECORDS = 3000  # ~3 MB
SAMPLE_S = 3.0
RATE_KEYS = "leader.replication.throttled.rate,follower.replication.throttled.rate"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("throttle"), 1, 2, FAST_SETTINGS) as running:
        yield running


def samsa(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    bootstrap = cluster.spec.bootstrap_servers
    return subprocess.run(
        [sys.executable, "-m", "samsa.cli.main", *args, "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=120,
    )


def copied_bytes(admin: Admin, broker_id: int) -> int:
    """The bytes of the topic's replica on `broker_id` (0 before it exists)."""
    described = admin.describe_log_dirs([broker_id], [TOPIC])[broker_id]
    return sum(
        replica.size for log_dir in described.values() for replica in log_dir.replicas.values()
    )


def test_a_throttled_move_copies_slowly_and_verify_removes_the_throttle(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    config = {"bootstrap.servers": cluster.spec.bootstrap_servers}
    with Admin(config) as admin:
        admin.create_topics([NewTopic(TOPIC, replica_assignments={0: [1]})])
        with Producer({**config, "acks": "all", "linger.ms": 5}) as producer:
            for _ in range(RECORDS):
                producer.send(TOPIC, os.urandom(RECORD_BYTES), partition=0)
            producer.flush(timeout=60)
        total = copied_bytes(admin, 1)
        assert total >= RECORDS * RECORD_BYTES

        plan = tmp_path / "plan.json"
        plan.write_text(
            json.dumps(
                {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [1, 2]}]}
            )
        )
        started = samsa(
            cluster,
            "reassign",
            "--execute",
            "--throttle",
            str(THROTTLE),
            "--reassignment-json-file",
            str(plan),
        )
        assert started.returncode == 0, started.stderr
        assert f"throttle limit was set to {THROTTLE} B/s on brokers 1,2" in started.stdout
        topic_configs = admin.describe_configs(TOPIC)
        assert topic_configs["leader.replication.throttled.replicas"].value == "0:1"
        assert topic_configs["follower.replication.throttled.replicas"].value == "0:2"

        # The rate the new replica copies at, once it has begun, over >= SAMPLE_S of wall clock.
        first = wait_until("copying began", lambda: copied_bytes(admin, 2) or None)
        began = time.monotonic()
        while time.monotonic() - began < SAMPLE_S:
            time.sleep(0.5)
        later = copied_bytes(admin, 2)
        rate = (later - first) / (time.monotonic() - began)
        assert rate < 3 * THROTTLE, f"copied at {rate:.0f} B/s under a {THROTTLE} B/s throttle"
        assert later < total, "the whole partition was copied within the sample"

        verified = samsa(cluster, "reassign", "--verify", "--reassignment-json-file", str(plan))
        assert verified.returncode == 1, verified.stdout + verified.stderr
        assert "still in progress" in verified.stdout
        assert admin.describe_configs(TOPIC)["follower.replication.throttled.replicas"].value

        for broker in ("1", "2"):
            rates = ConfigResource("broker", broker)
            assert admin.describe_configs(rates)["leader.replication.throttled.rate"].value == (
                str(THROTTLE)
            )
            deleted = samsa(
                cluster,
                "configs",
                "--entity-type",
                "brokers",
                "--entity-name",
                broker,
                "--alter",
                "--delete-config",
                RATE_KEYS,
            )
            assert deleted.returncode == 0, deleted.stderr

        def complete() -> bool:
            described = admin.describe_topics([TOPIC])[TOPIC].partitions[0]
            return sorted(described.isr) == [1, 2] and not admin.list_partition_reassignments()

        wait_until("the move completed once unthrottled", complete, timeout_s=60)
        verified = samsa(cluster, "reassign", "--verify", "--reassignment-json-file", str(plan))
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert "Throttle was removed" in verified.stdout
        topic_configs = admin.describe_configs(TOPIC)
        for key in ("leader", "follower"):
            entry = topic_configs[f"{key}.replication.throttled.replicas"]
            assert (entry.value, entry.source) == ("", "default")
