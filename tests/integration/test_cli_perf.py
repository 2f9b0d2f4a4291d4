"""`samsa perf produce|consume` as a user runs them, against a real cluster.

Goal: the two commands print Kafka's perf-test lines with the right counts, --throughput holds the
rate down, a consumer short of --messages says how many are missing and exits 1, a record the
broker refuses is counted and reported with exit code 1, a bad argument is argparse's exit 2, and
--transaction-duration-ms sends in several committed transactions whose every record a
read_committed reader sees, while a transaction with a refused record is aborted (exit 1).

Method: `python -m samsa.cli.main perf ...` in a subprocess against one 1-controller, 2-broker,
1-coordinator local cluster for the whole file (stopped by PID on the way out, by local_cluster).
Times are only ever bounded from below (a throttled run is slow enough), never from above.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from cluster_helpers import TRANSACTION_SETTINGS, local_cluster, read_to_end

from samsa.cli.perf_stats import CONSUMER_HEADER
from samsa.client import Admin, NewTopic

pytestmark = pytest.mark.timeout(120)

SUMMARY = re.compile(
    r"^(\d+) records sent, ([\d.]+) records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
    r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$"
)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory):
    data_dir = tmp_path_factory.mktemp("perf")
    settings = dict(TRANSACTION_SETTINGS)
    with local_cluster(data_dir, 1, 2, settings, coordinators=1) as running:
        servers = running.spec.bootstrap_servers
        with Admin({"bootstrap.servers": servers}) as admin:
            admin.create_topics(
                [
                    NewTopic("perf", 2, -1),
                    NewTopic("perf-throttled", 1, -1),
                    NewTopic("perf-small", 1, -1, {"max.message.bytes": "1000"}),
                    NewTopic("perf-txn", 1, -1),
                ]
            )
        yield servers


def samsa(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "samsa.cli.main", *args, "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=90,
    )


def summary(result: subprocess.CompletedProcess[str]) -> tuple[int, float]:
    """(records sent, records/sec) of a `perf produce` run's last line."""
    match = SUMMARY.match(result.stdout.splitlines()[-1])
    assert match, result.stdout
    return int(match[1]), float(match[2])


def test_produce_then_consume_20000_records(bootstrap: str) -> None:
    produced = samsa(
        bootstrap,
        "perf",
        "produce",
        "--topic",
        "perf",
        "--num-records",
        "20000",
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--producer-property",
        "acks=all",
    )
    assert produced.returncode == 0, produced.stderr
    assert summary(produced)[0] == 20000

    consumed = samsa(bootstrap, "perf", "consume", "--topic", "perf", "--messages", "20000")
    assert consumed.returncode == 0, consumed.stderr
    header, line = consumed.stdout.splitlines()
    assert header == CONSUMER_HEADER
    fields = line.split(", ")
    assert len(fields) == 10, line
    # data.consumed.in.MB (20,000 x 100 B), data.consumed.in.nMsg, rebalance.time.ms
    assert (fields[2], fields[4], fields[6]) == ("1.9073", "20000", "0")

    short = samsa(
        bootstrap,
        "perf",
        "consume",
        "--topic",
        "perf",
        "--messages",
        "20001",
        "--timeout-ms",
        "1000",
    )
    assert short.returncode == 1
    assert short.stdout.splitlines()[1].split(", ")[4] == "20000"
    assert "1 of 20001 records missing" in short.stderr


def test_throughput_holds_the_rate_down(bootstrap: str) -> None:
    """4000 records at 2000/s take at least ~2 s: the summary's rate (acknowledged records over
    the run's time, flush included) is at most a little over 2000/s."""
    produced = samsa(
        bootstrap,
        "perf",
        "produce",
        "--topic",
        "perf-throttled",
        "--num-records",
        "4000",
        "--record-size",
        "100",
        "--throughput",
        "2000",
    )
    assert produced.returncode == 0, produced.stderr
    sent, records_per_s = summary(produced)
    assert sent == 4000
    assert records_per_s <= 4000 / 1.5, produced.stdout


def test_records_the_broker_refuses_are_counted_and_exit_1(bootstrap: str) -> None:
    refused = samsa(
        bootstrap,
        "perf",
        "produce",
        "--topic",
        "perf-small",
        "--num-records",
        "10",
        "--record-size",
        "2000",
    )
    assert refused.returncode == 1
    assert summary(refused)[0] == 0
    assert (
        "samsa perf produce: 10 of 10 records failed, the first measured one with: "
        in refused.stderr
    )


def test_transactions_commit_each_duration_and_every_record_is_read_committed(
    bootstrap: str,
) -> None:
    """3000 records at 6000/s take ~0.5 s: with a transaction each 100 ms, several transactions,
    each ending in one COMMIT marker on the partition (an offset of its own)."""
    produced = samsa(
        bootstrap,
        "perf",
        "produce",
        "--topic",
        "perf-txn",
        "--num-records",
        "3000",
        "--record-size",
        "100",
        "--throughput",
        "6000",
        "--transaction-duration-ms",
        "100",
    )
    assert produced.returncode == 0, produced.stderr
    assert summary(produced)[0] == 3000
    committed = read_to_end(bootstrap, [("perf-txn", 0)], "read_committed")
    assert len(committed) == 3000
    last_offset = max(offset for _, offset, _ in committed)
    markers = last_offset + 2 - 3000  # the end offset (past the last marker) minus the records
    assert markers >= 3, f"{markers} transaction(s) in ~0.5 s of 100 ms each"


def test_a_transaction_with_a_refused_record_is_aborted_and_exits_1(bootstrap: str) -> None:
    refused = samsa(
        bootstrap,
        "perf",
        "produce",
        "--topic",
        "perf-small",
        "--num-records",
        "10",
        "--record-size",
        "2000",
        "--transactional-id",
        "perf-refused",
    )
    assert refused.returncode == 1
    assert "samsa perf produce: a transaction failed and was aborted" in refused.stderr
    assert "MESSAGE_TOO_LARGE" in refused.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--topic", "perf", "--num-records", "10", "--record-size", "0"), "--record-size"),
        (("--num-records", "10", "--record-size", "100"), "--topic"),
    ],
)
def test_a_bad_argument_exits_2(bootstrap: str, args: tuple[str, ...], message: str) -> None:
    result = samsa(bootstrap, "perf", "produce", *args)
    assert result.returncode == 2
    assert "error:" in result.stderr and message in result.stderr
