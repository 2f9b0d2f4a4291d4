"""Goal: `Admin.list_offsets` and `samsa topics offsets` answer what Kafka's listOffsets and
kafka-get-offsets.sh answer: the log start, the end (the last stable offset under
read_committed), the first record at or after a time, and the record with the largest timestamp
(KIP-734), from each partition's leader; refusals say what to fix.

Method: one controller, two brokers, one coordinator (real processes, stopped by PID also on
failure). Records are written with chosen timestamps (out of order, with a tie at the largest),
DeleteRecords moves one partition's start, and a transaction is left open on another partition;
the answers are compared with what was written. The CLI runs in a subprocess.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from cluster_helpers import TRANSACTION_SETTINGS, local_cluster

from samsa.cli.launcher import LocalCluster
from samsa.client import Admin, NewTopic, Producer, TopicError
from samsa.client.admin import ListedOffset
from samsa.common.errors import ErrorCode

pytestmark = pytest.mark.timeout(180)

TOPIC = "listed"
# partition 0: timestamps out of order, the largest (5_000) twice: at offsets 2 and 4
TIMESTAMPS = [1_000, 3_000, 5_000, 2_000, 5_000, 4_000]
COMMITTED_TS = 7_000  # partition 1: one committed record, then an open transaction's record
OPEN_TS = 9_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("list-offsets")
    with local_cluster(data_dir, 1, 2, TRANSACTION_SETTINGS, coordinators=1) as running:
        bootstrap = running.spec.bootstrap_servers
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topics([NewTopic(TOPIC, 3, 2)])
        with Producer({"bootstrap.servers": bootstrap, "linger.ms": 0}) as producer:
            for n, timestamp in enumerate(TIMESTAMPS):
                producer.send(TOPIC, b"v%d" % n, partition=0, timestamp=timestamp).result(30)
            producer.send(TOPIC, b"c", partition=1, timestamp=COMMITTED_TS).result(30)
        transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": "lister"})
        try:
            transactional.init_transactions(30)
            transactional.begin_transaction()
            transactional.send(TOPIC, b"open", partition=1, timestamp=OPEN_TS)
            transactional.flush(30)
            yield running
        finally:
            transactional.close(5)


def admin(cluster: LocalCluster) -> Admin:
    return Admin({"bootstrap.servers": cluster.spec.bootstrap_servers})


def test_each_spec_answers_what_was_written(cluster: LocalCluster) -> None:
    p0, p1, p2 = ((TOPIC, n) for n in range(3))
    with admin(cluster) as client:
        earliest = client.list_offsets({p0: "earliest", p1: "earliest", p2: "earliest"})
        latest = client.list_offsets({p0: "latest", p1: "latest", p2: "latest"})
        at_time = client.list_offsets({p0: 2_500, p1: 8_000, p2: 0})
        after_all = client.list_offsets({p0: 6_000})
        largest = client.list_offsets({p0: "max_timestamp", p2: "max-timestamp"})
    assert {tp: x.offset for tp, x in earliest.items()} == {p0: 0, p1: 0, p2: 0}
    assert {tp: (x.offset, x.timestamp) for tp, x in latest.items()} == {
        p0: (6, -1),
        p1: (2, -1),  # read_uncommitted: the open transaction's record counts
        p2: (0, -1),
    }
    assert all(x.leader_epoch is not None and x.leader_epoch >= 0 for x in latest.values())
    assert (at_time[p0].offset, at_time[p0].timestamp) == (1, 3_000), "first at or after 2,500"
    assert (at_time[p1].offset, at_time[p1].timestamp) == (1, OPEN_TS)
    assert at_time[p2] == ListedOffset(-1, -1, None), "empty: nothing found, in no epoch"
    assert (after_all[p0].offset, after_all[p0].timestamp) == (-1, -1), "none that late"
    assert (largest[p0].offset, largest[p0].timestamp) == (2, 5_000), "the first of a tie"
    assert (largest[p2].offset, largest[p2].timestamp) == (-1, -1)


def test_read_committed_stops_at_the_open_transaction(cluster: LocalCluster) -> None:
    p1 = (TOPIC, 1)
    with admin(cluster) as client:
        latest = client.list_offsets({p1: "latest"}, isolation_level="read_committed")
        largest = client.list_offsets({p1: "max_timestamp"}, isolation_level="read_committed")
        uncommitted = client.list_offsets({p1: "max_timestamp"})
        hidden = client.list_offsets({p1: 8_000}, isolation_level="read_committed")
    assert latest[p1].offset == 1, "the last stable offset: the open transaction's first"
    assert (largest[p1].offset, largest[p1].timestamp) == (0, COMMITTED_TS)
    assert (uncommitted[p1].offset, uncommitted[p1].timestamp) == (1, OPEN_TS)
    assert hidden[p1].offset == -1, "a record a read_committed reader cannot see yet"


def test_the_log_start_moves_with_delete_records(cluster: LocalCluster) -> None:
    with admin(cluster) as client:
        client.create_topics([NewTopic("trimmed-list", 1, 2)])
        with Producer({"bootstrap.servers": cluster.spec.bootstrap_servers}) as producer:
            for n in range(10):
                producer.send("trimmed-list", b"%d" % n, timestamp=100 - n).result(30)
        client.delete_records({("trimmed-list", 0): 4})
        found = client.list_offsets({("trimmed-list", 0): "earliest"})
        largest = client.list_offsets({("trimmed-list", 0): "max_timestamp"})
    assert found[("trimmed-list", 0)].offset == 4
    assert (largest[("trimmed-list", 0)].offset, largest[("trimmed-list", 0)].timestamp) == (
        4,
        96,
    ), "deleted records are not found"


def test_refusals_say_what_to_fix(cluster: LocalCluster) -> None:
    with admin(cluster) as client:
        with pytest.raises(TopicError) as missing:
            client.list_offsets({(TOPIC, 7): "latest"})
        assert missing.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        with pytest.raises(ValueError, match="max_timestamp"):
            client.list_offsets({(TOPIC, 0): "newest"})
        with pytest.raises(ValueError, match="ms since the epoch"):
            client.list_offsets({(TOPIC, 0): -5})
        with pytest.raises(Exception, match="read_committed"):
            client.list_offsets({(TOPIC, 0): "latest"}, isolation_level="committed")


def samsa(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "samsa.cli.main",
            "topics",
            "offsets",
            *args,
            "--bootstrap-server",
            cluster.spec.bootstrap_servers,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def rows(result: subprocess.CompletedProcess[str]) -> list[list[str]]:
    assert result.returncode == 0, result.stderr
    return [line.split() for line in result.stdout.splitlines()[1:]]


def test_cli_topics_offsets(cluster: LocalCluster) -> None:
    assert rows(samsa(cluster, TOPIC)) == [["0", "6", "-"], ["1", "2", "-"], ["2", "0", "-"]]
    assert rows(samsa(cluster, TOPIC, "--isolation-level", "read_committed", "--partition", "1"))[
        0
    ] == ["1", "1", "-"]
    assert rows(samsa(cluster, TOPIC, "--time", "-2", "--partition", "0")) == [["0", "0", "-"]]
    assert rows(samsa(cluster, TOPIC, "--time", "max-timestamp", "--partition", "0")) == [
        ["0", "2", "5000"]
    ]
    assert rows(samsa(cluster, TOPIC, "--time", "-3", "--partition", "0")) == [["0", "2", "5000"]]
    assert rows(samsa(cluster, TOPIC, "--time", "2500", "--partition", "0")) == [["0", "1", "3000"]]
    missing = samsa(cluster, TOPIC, "--partition", "9")
    assert missing.returncode != 0 and "has partitions 0 to 2" in missing.stderr
    bad = samsa(cluster, TOPIC, "--time", "yesterday")
    assert bad.returncode != 0 and "--time 'yesterday'" in bad.stderr
    assert "Traceback" not in missing.stderr + bad.stderr
