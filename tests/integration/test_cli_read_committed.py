"""Goal: `samsa consume` reads transactions as kafka-console-consumer does: by default
(read_uncommitted) every record written, with `--isolation-level read_committed` (or
`--consumer-property isolation.level=read_committed`) only those of committed transactions, in a
group too, stopping at the last stable offset while a transaction is still open.

Method: one controller, one broker, one coordinator (real processes from the launcher, stopped by
PID also on failure); a transactional producer commits one transaction, aborts one and leaves a
third open while `python -m samsa.cli.main consume` runs in a subprocess; stdout is compared
line by line.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from cluster_helpers import TRANSACTION_SETTINGS, local_cluster

from samsa.cli.launcher import LocalCluster
from samsa.client import Admin, NewTopic, Producer

pytestmark = pytest.mark.timeout(180)

TOPIC = "cli-txn"
COMMITTED = ["committed-0", "committed-1"]
ABORTED = ["aborted-0"]
OPEN = ["open-0"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("cli-read-committed")
    with local_cluster(data_dir, 1, 1, TRANSACTION_SETTINGS, coordinators=1) as running:
        with Admin({"bootstrap.servers": running.spec.bootstrap_servers}) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, 1)])
        yield running


def consume(cluster: LocalCluster, *flags: str) -> list[str]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "samsa.cli.main",
            "consume",
            TOPIC,
            "--timeout-ms",
            "1500",
            *flags,
            "--bootstrap-server",
            cluster.spec.bootstrap_servers,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_consume_reads_committed_records_only_when_asked(cluster: LocalCluster) -> None:
    producer = Producer(
        {"bootstrap.servers": cluster.spec.bootstrap_servers, "transactional.id": "cli-txn-app"}
    )
    try:
        producer.init_transactions(30)
        for values, end in (
            (COMMITTED, producer.commit_transaction),
            (ABORTED, producer.abort_transaction),
        ):
            producer.begin_transaction()
            for value in values:
                producer.send(TOPIC, value.encode(), partition=0)
            producer.flush(30)  # written before it ends (an abort drops what was not sent)
            end(30)
        producer.begin_transaction()
        for value in OPEN:
            producer.send(TOPIC, value.encode(), partition=0)
        producer.flush(30)  # written, its transaction still open

        everything = consume(cluster, "--from-beginning")
        assert everything == COMMITTED + ABORTED + OPEN, "read_uncommitted: every record"
        committed = consume(cluster, "--from-beginning", "--isolation-level", "read_committed")
        assert committed == COMMITTED, "no aborted record, and nothing past the open transaction"
        as_property = consume(
            cluster, "--from-beginning", "--consumer-property", "isolation.level=read_committed"
        )
        assert as_property == COMMITTED
        in_group = consume(
            cluster, "--group", "cli-txn-readers", "--from-beginning", "--isolation-level",
            "read_committed",
        )  # fmt: skip
        assert in_group == COMMITTED
    finally:
        producer.close(10)  # aborts the open transaction
