"""Goal: a hanging transaction — committed by its coordinator, but its markers lost, so it stays
open on its partitions and holds their last stable offset back — is found with
Admin.describe_producers, Admin.find_hanging_transactions and `samsa transactions find-hanging`
(which never name an open transaction its coordinator is still ending, nor one whose producer
wrote within the timeout given) and ended with Admin.abort_transaction and `samsa transactions
abort`: refused while its producer wrote there within transaction.max.timeout.ms, written after;
then the partitions' last stable offset reaches their end and read_committed readers see none of
its records (aborted), while read_uncommitted readers still do.

Method: one controller, one broker, one coordinator (real processes from the launcher, stopped by
PID also on failure); the coordinator runs with SAMSA_FAULTS="txn.lose_markers=1" (phase 2 skips
every marker and takes it as written) and transaction.max.timeout.ms 3000. A transactional SDK
producer commits one transaction over both partitions of a topic; partition 0 is aborted through
the SDK, partition 1 through the CLI. Another producer keeps a transaction open on a second
topic, with the partition added, while the search looks.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster, read_to_end

from samsa.cli.launcher import LocalCluster
from samsa.client import Admin, Consumer, NewTopic, Producer
from samsa.client.transaction_admin import TransactionError
from samsa.common.errors import ErrorCode

pytestmark = pytest.mark.timeout(240)

TOPIC = "hung"
MAX_TIMEOUT_MS = 3000
SETTINGS = dict(FAST_SETTINGS) | {
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "coordinator.session.timeout.ms": "3000",
    "coordinator.heartbeat.interval.ms": "300",
    "transaction.max.timeout.ms": str(MAX_TIMEOUT_MS),
}
PARTITIONS = [(TOPIC, 0), (TOPIC, 1)]
LIVE = "live"


def ends(cluster: LocalCluster, isolation: str) -> dict[tuple[str, int], int]:
    """Each partition's end at this isolation: the last stable offset for read_committed."""
    config = {"bootstrap.servers": cluster.spec.bootstrap_servers, "isolation.level": isolation}
    with Consumer(config) as consumer:
        consumer.assign(PARTITIONS)
        consumer.seek_to_end()
        return {tp: consumer.position(tp) for tp in PARTITIONS}


def read_all(cluster: LocalCluster, isolation: str) -> list[bytes]:
    """Every value of TOPIC from the start to the end at this isolation."""
    records = read_to_end(cluster.spec.bootstrap_servers, PARTITIONS, isolation)
    return sorted(value for _, _, value in records)


def commit_one_transaction(cluster: LocalCluster) -> list[bytes]:
    producer = Producer(
        {
            "bootstrap.servers": cluster.spec.bootstrap_servers,
            "transactional.id": "hung-app",
            "transaction.timeout.ms": MAX_TIMEOUT_MS,
            "linger.ms": 5,
        }
    )
    values = [b"lost-%d" % index for index in range(10)]
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        for index, value in enumerate(values):
            producer.send(TOPIC, value, partition=index % 2)
        producer.commit_transaction(30)
    finally:
        producer.close(10)
    return values


def open_transaction(cluster: LocalCluster) -> Producer:
    """A producer whose transaction is open on LIVE-0 (added there, one record written)."""
    producer = Producer(
        {
            "bootstrap.servers": cluster.spec.bootstrap_servers,
            "transactional.id": "live-app",
            "transaction.timeout.ms": MAX_TIMEOUT_MS,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.send(LIVE, b"open", partition=0)
    producer.flush(30)
    return producer


def test_a_hanging_transaction_is_aborted_once_its_producer_is_silent_long_enough(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAMSA_FAULTS", "txn.lose_markers=1")
    with (
        local_cluster(tmp_path, controllers=1, brokers=1, settings=SETTINGS, coordinators=1) as c,
        Admin({"bootstrap.servers": c.spec.bootstrap_servers}) as admin,
    ):
        admin.create_topics(
            [NewTopic(name, num_partitions=2, replication_factor=1) for name in (TOPIC, LIVE)]
        )
        values = commit_one_transaction(c)
        assert admin.find_hanging_transactions(PARTITIONS, MAX_TIMEOUT_MS) == [], "too recent"
        live = open_transaction(c)
        try:
            time.sleep(0.7)
            short_ms = 500  # a search told a shorter timeout than the real one
            found = admin.find_hanging_transactions([*PARTITIONS, (LIVE, 0)], short_ms)
        finally:
            live.close(10)  # aborts it (its markers lost too; LIVE is not looked at again)
        assert [(x.topic, x.partition, x.start_offset) for x in found] == [
            (TOPIC, 0, 0),
            (TOPIC, 1, 0),
        ], "committed, markers lost: hanging; LIVE-0's is still Ongoing: not"

        producers = admin.describe_producers(PARTITIONS)
        assert all(len(states) == 1 for states in producers.values()), producers
        hanging = {tp: states[0] for tp, states in producers.items()}
        assert all(state.current_txn_start_offset == 0 for state in hanging.values())
        with pytest.raises(TransactionError) as unknown:
            admin.describe_producers([(TOPIC, 2)])
        assert unknown.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        producer_id = hanging[(TOPIC, 0)].producer_id
        epoch = hanging[(TOPIC, 0)].producer_epoch
        with pytest.raises(TransactionError) as recent:
            admin.abort_transaction(TOPIC, 0, producer_id, epoch)
        assert recent.value.code == ErrorCode.CONCURRENT_TRANSACTIONS
        assert "transaction.max.timeout.ms" in str(recent.value)

        assert ends(c, "read_committed") == dict.fromkeys(PARTITIONS, 0), "the LSO is held back"
        assert ends(c, "read_uncommitted") == dict.fromkeys(PARTITIONS, 5), "no marker written"

        with pytest.raises(TransactionError) as wrong_epoch:
            admin.abort_transaction(TOPIC, 0, producer_id, epoch + 1)
        assert wrong_epoch.value.code == ErrorCode.INVALID_TXN_STATE
        last_write_ms = max(state.last_timestamp_ms for state in hanging.values())
        time.sleep(max(0.0, (last_write_ms + MAX_TIMEOUT_MS + 200) / 1000 - time.time()))

        admin.abort_transaction(TOPIC, 0, producer_id, epoch)
        (still,) = admin.find_hanging_transactions(PARTITIONS, MAX_TIMEOUT_MS)
        assert (still.partition, still.producer_id, still.producer_epoch) == (1, producer_id, epoch)
        (after,) = admin.describe_producers([(TOPIC, 0)])[(TOPIC, 0)]
        assert (after.current_txn_start_offset, after.producer_epoch) == (-1, epoch + 1)
        with pytest.raises(TransactionError) as again:
            admin.abort_transaction(TOPIC, 0, producer_id, epoch)
        assert again.value.code == ErrorCode.INVALID_TXN_STATE

        cli = [sys.executable, "-m", "samsa.cli.main", "transactions"]
        where = [
            "--topic",
            TOPIC,
            "--partition",
            "1",
            "--bootstrap-server",
            c.spec.bootstrap_servers,
        ]
        shown = subprocess.run(
            [*cli, "describe-producers", *where], capture_output=True, text=True, timeout=60
        )
        assert shown.returncode == 0, shown.stderr
        assert str(producer_id) in shown.stdout and "open txn start" in shown.stdout
        timeout = ["--max-transaction-timeout", str(MAX_TIMEOUT_MS / 60_000)]
        for scope in (["--topic", TOPIC], ["--broker-id", "1"]):  # the only broker leads all
            search = [*cli, "find-hanging", *scope, *timeout, *where[-2:]]
            listed = subprocess.run(search, capture_output=True, text=True, timeout=60)
            assert listed.returncode == 0, listed.stderr
            rows = [line.split()[:4] for line in listed.stdout.splitlines()]
            assert [TOPIC, "1", str(producer_id), str(epoch)] in rows, listed.stdout
            assert [TOPIC, "0", str(producer_id), str(epoch)] not in rows, "aborted already"
        identity = ["--producer-id", str(producer_id), "--producer-epoch", str(epoch)]
        aborted = subprocess.run(
            [*cli, "abort", *where, *identity], capture_output=True, text=True, timeout=60
        )
        assert aborted.returncode == 0, aborted.stderr
        assert f"aborted the transaction of producer {producer_id}" in aborted.stdout

        assert ends(c, "read_committed") == dict.fromkeys(PARTITIONS, 6), "past the markers"
        search = [*cli, "find-hanging", "--topic", TOPIC, *timeout, *where[-2:]]
        none_left = subprocess.run(search, capture_output=True, text=True, timeout=60)
        assert none_left.stdout.strip() == "no hanging transactions", none_left.stdout
        assert read_all(c, "read_committed") == []
        assert read_all(c, "read_uncommitted") == sorted(values)
        refused = subprocess.run(
            [*cli, "abort", *where, *identity], capture_output=True, text=True, timeout=60
        )
        assert refused.returncode == 1
        assert "INVALID_TXN_STATE" in refused.stderr and "no open transaction" in refused.stderr
