"""`samsa consume --group` among other members and stopped by a signal, against a real cluster.

Goal: the console consumer commits exactly what it printed (README) at every point where a
partition leaves it, as Kafka's console consumer does: when it is stopped by SIGTERM (`timeout`,
`kill`, a service manager), as by Ctrl-C, it commits and leaves the group; when another member
joins, it commits what it printed of the partitions it gives up, so that their new owner goes on
from there.

Method: one controller, one broker and one coordinator (real processes from the launcher, stopped
by PID also on failure); the console consumer runs as `python -m samsa.cli.main`, the other member
is the SDK's Consumer, committed offsets are read with the SDK's Admin.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cluster_helpers import TRANSACTION_SETTINGS, local_cluster, wait_until

from samsa.client import Admin, Consumer, Producer

pytestmark = pytest.mark.timeout(180)

TopicPartition = tuple[str, int]


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir: Path = tmp_path_factory.mktemp("cli-group-consume")
    with local_cluster(data_dir, 1, 1, TRANSACTION_SETTINGS, coordinators=1) as cluster:
        yield cluster.spec.bootstrap_servers


def topic_with_records(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topic(topic, num_partitions=partitions, replication_factor=1)
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for n in range(records):
            producer.send(topic, b"v%d" % n, partition=n % partitions)
        producer.flush(30)


def console_consumer(bootstrap: str, topic: str, group: str) -> subprocess.Popen[str]:
    command = ["consume", topic, "--group", group, "--from-beginning"]
    return subprocess.Popen(
        [sys.executable, "-m", "samsa.cli.main", *command, "--bootstrap-server", bootstrap],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_lines(process: subprocess.Popen[str], count: int) -> list[str]:
    assert process.stdout is not None
    return [process.stdout.readline().strip() for _ in range(count)]


def stop(process: subprocess.Popen[str]) -> tuple[int, str]:
    """SIGTERM, then its exit code and stderr; killed by PID if it does not end."""
    try:
        process.terminate()
        _, stderr = process.communicate(timeout=60)
        return process.returncode, stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_stopped_by_sigterm_it_commits_and_leaves(bootstrap: str) -> None:
    """It used to die at once: nothing committed (the next run printed everything again) and
    its member holding the partitions until the session timeout."""
    topic_with_records(bootstrap, "stopped", 1, 20)
    process = console_consumer(bootstrap, "stopped", "stopped")
    try:
        assert read_lines(process, 20) == [f"v{n}" for n in range(20)]
    finally:
        code, stderr = stop(process)
    assert code == 0, stderr  # as after Ctrl-C
    assert "Traceback" not in stderr and "consumed 20 records" in stderr
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        offsets = admin.list_consumer_group_offsets("stopped", [("stopped", 0)])
        assert offsets[("stopped", 0)].offset == 20
        assert not admin.describe_consumer_groups(["stopped"])["stopped"].members


def test_it_commits_what_it_printed_of_partitions_it_gives_up(bootstrap: str) -> None:
    """It used to commit only as it stopped, so a partition's new owner began at
    auto.offset.reset: earliest printed the records again, latest skipped those not yet
    printed."""
    topic_with_records(bootstrap, "pair", 2, 20)
    first = console_consumer(bootstrap, "pair", "pair")
    try:
        assert sorted(read_lines(first, 20)) == sorted(f"v{n}" for n in range(20))
        config = {"bootstrap.servers": bootstrap, "group.id": "pair"}
        with Consumer(config | {"auto.offset.reset": "earliest"}) as second:
            second.subscribe(["pair"])
            taken = wait_until("the second member's partition", assignment_of(second), 60)
            with Admin({"bootstrap.servers": bootstrap}) as admin:
                offsets = admin.list_consumer_group_offsets("pair", taken)
            assert {tp: x.offset for tp, x in offsets.items()} == dict.fromkeys(taken, 10)
    finally:
        code, stderr = stop(first)
    assert code == 0, stderr


def assignment_of(consumer: Consumer) -> Callable[[], list[TopicPartition] | None]:
    """A probe that polls `consumer` (so that it joins and takes its partitions) and returns its
    assignment once it has one; it must read nothing, all being printed already."""

    def probe() -> list[TopicPartition] | None:
        assert not consumer.poll(timeout=0.2), "read again what the first member printed"
        return consumer.assignment() or None

    return probe
