"""Goal: `samsa reassign` moves a partition to other brokers while its records stay whole: the
plan --execute starts prints the assignment to roll back to, --verify exits 1 while the move
runs and 0 once the partition is on its target replicas, `topics describe` then shows those
replicas and nothing being added or removed, and a consumer reads every record produced
before the move, and after it, in order.

Method: `python -m samsa.cli.main` in subprocesses against a 1-controller, 3-broker local
cluster (processes stopped by PID by local_cluster): a one-partition topic of replication
factor 1 is first put on broker 1 (an --execute that completes at once when it is there
already), 300 records are produced with acks=all, then the partition is moved to [2, 3] and
--verify polled (a bounded wait, each poll a bounded subprocess), then everything is read back
with an SDK consumer. Needs the server side of KIP-455 (the controller's reassignment_control
and the brokers forwarding AlterPartitionReassignments): it fails until that is merged.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_helpers import local_cluster, read_to_end, wait_until

from samsa.client import Producer

pytestmark = pytest.mark.timeout(300)

TOPIC = "moving"


def samsa(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "samsa.cli.main", *args, "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=120,
    )


def move(bootstrap: str, plan_file: Path, replicas: list[int]) -> list[int]:
    """Move partition 0 to `replicas` and wait until --verify says it is there; the replicas
    --execute printed as the rollback plan."""
    plan = {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": replicas}]}
    plan_file.write_text(json.dumps(plan))
    started = samsa(bootstrap, "reassign", "--execute", "--reassignment-json-file", str(plan_file))
    assert started.returncode == 0, started.stderr
    lines = started.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment", started.stdout
    assert "Save this to use as the --reassignment-json-file option during rollback" in lines
    assert lines[-1] == f"Successfully started partition reassignments for {TOPIC}-0"

    def verified() -> bool:
        status = samsa(
            bootstrap, "reassign", "--verify", "--reassignment-json-file", str(plan_file)
        )
        assert status.returncode in (0, 1) and "Traceback" not in status.stderr, status.stderr
        return status.returncode == 0 and "is complete." in status.stdout

    wait_until(f"{TOPIC}-0 on brokers {replicas}", verified, timeout_s=120)
    return json.loads(lines[2])["partitions"][0]["replicas"]


def described_row(bootstrap: str) -> list[str]:
    described = samsa(bootstrap, "topics", "describe", TOPIC)
    assert described.returncode == 0, described.stderr
    header, row = described.stdout.splitlines()[1:3]
    assert "adding" not in header, "no reassignment left in progress"
    return row.split()


def test_a_partition_moves_to_other_brokers_and_keeps_every_record(tmp_path: Path) -> None:
    with local_cluster(tmp_path / "cluster", controllers=1, brokers=3) as running:
        bootstrap = running.spec.bootstrap_servers
        created = samsa(
            bootstrap, "topics", "create", TOPIC, "--partitions", "1", "--replication-factor", "1"
        )
        assert created.returncode == 0, created.stderr
        before = int(described_row(bootstrap)[3])
        assert move(bootstrap, tmp_path / "on-1.json", [1]) == [before]
        assert described_row(bootstrap)[3] == "1"

        sent = [b"before %d" % n for n in range(300)]
        with Producer({"bootstrap.servers": bootstrap, "acks": "all"}) as producer:
            for value in sent:
                producer.send(TOPIC, value, partition=0)

        assert move(bootstrap, tmp_path / "on-2-3.json", [2, 3]) == [1]
        partition, leader, _epoch, replicas, isr = described_row(bootstrap)
        assert (partition, replicas, sorted(isr.split(","))) == ("0", "2,3", ["2", "3"])
        assert leader in ("2", "3")
        listed = samsa(bootstrap, "reassign", "--list")
        assert listed.stdout == "no reassignments in progress\n", listed.stderr

        with Producer({"bootstrap.servers": bootstrap, "acks": "all"}) as producer:
            for n in range(100):
                producer.send(TOPIC, b"after %d" % n, partition=0)
        values = [value for _, _, value in read_to_end(bootstrap, [(TOPIC, 0)], "read_committed")]
        assert values == sent + [b"after %d" % n for n in range(100)]
