"""The `samsa` cluster commands as a user types them, against a real cluster.

Goal: every command works end to end, and every failure (bad input, an unknown topic, a cluster
that cannot be reached) is one clear line and exit code 1 within seconds, never a traceback or a
silent wait.

Method: `python -m samsa.cli.main` in a subprocess against a 1-controller, 2-broker local cluster
(or a loopback port nothing listens on), checking stdout, stderr, the exit code and that it ended.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from cluster_helpers import local_cluster

from samsa.client import Admin, Consumer, NewTopic, Producer

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory):
    with local_cluster(tmp_path_factory.mktemp("cli"), controllers=1, brokers=2) as running:
        yield running.spec.bootstrap_servers


def samsa(bootstrap: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "samsa.cli.main", *args, "--bootstrap-server", bootstrap],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_create_produce_consume_describe_delete(bootstrap: str) -> None:
    created = samsa(
        bootstrap,
        "topics",
        "create",
        "clicks",
        "--partitions",
        "2",
        "--config",
        "retention.ms=3600000",
    )
    assert created.returncode == 0, created.stderr
    assert "2 partition(s)" in created.stdout
    assert "clicks" in samsa(bootstrap, "topics", "list").stdout.split()

    lines = "".join(f"user-{n % 5}:click {n}\n" for n in range(200))
    produced = samsa(bootstrap, "produce", "clicks", "--key-separator", ":", stdin=lines)
    assert produced.returncode == 0, produced.stderr
    assert "produced 200 records" in produced.stderr

    consumed = samsa(
        bootstrap, "consume", "clicks", "--from-beginning", "--count", "200", "--format", "kv"
    )
    assert consumed.returncode == 0, consumed.stderr
    pairs = [line.split("\t") for line in consumed.stdout.splitlines()]
    assert sorted(pairs) == sorted([f"user-{n % 5}", f"click {n}"] for n in range(200))
    by_key: dict[str, list[int]] = {}
    for key, value in pairs:
        by_key.setdefault(key, []).append(int(value.split()[1]))
    assert all(numbers == sorted(numbers) for numbers in by_key.values()), "order per key"

    from_offset = samsa(
        bootstrap,
        "consume",
        "clicks",
        "--partition",
        "0",
        "--offset",
        "5",
        "--timeout",
        "2",
        "--format",
        "json",
    )
    assert from_offset.returncode == 0, from_offset.stderr
    assert '"offset": 5' in from_offset.stdout.splitlines()[0]

    described = samsa(bootstrap, "topics", "describe", "clicks")
    assert described.returncode == 0, described.stderr
    assert "retention.ms" in described.stdout and "leader" in described.stdout

    cluster = samsa(bootstrap, "cluster")
    assert cluster.returncode == 0, cluster.stderr
    assert "active (Raft leader)" in cluster.stdout and "unfenced" in cluster.stdout
    assert "clicks" in cluster.stdout

    deleted = samsa(bootstrap, "topics", "delete", "clicks")
    assert deleted.returncode == 0, deleted.stderr
    assert "clicks" not in samsa(bootstrap, "topics", "list").stdout.split()


def test_errors_are_one_clear_line(bootstrap: str) -> None:
    missing = samsa(bootstrap, "topics", "delete", "nope")
    assert missing.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr and "Traceback" not in missing.stderr
    # The controller deletes the topics it can: the deleted one is named, beside the error.
    assert samsa(bootstrap, "topics", "create", "doomed", "--partitions", "1").returncode == 0
    partly = samsa(bootstrap, "topics", "delete", "doomed", "nope")
    assert partly.returncode == 1 and partly.stdout == "deleted doomed\n", partly.stderr
    assert partly.stderr == (
        "samsa topics: topic 'nope' does not exist (UNKNOWN_TOPIC_OR_PARTITION)\n"
    )
    assert "doomed" not in samsa(bootstrap, "topics", "list").stdout.split()
    bad = samsa(bootstrap, "topics", "create", "x", "--config", "cleanup.policy=shred")
    assert bad.returncode == 1 and "cleanup.policy" in bad.stderr


def timed_samsa(
    bootstrap: str, *args: str, stdin: str = ""
) -> tuple[subprocess.CompletedProcess[str], float]:
    """`samsa` with a 30 s cap (a hang fails the test) and how long it took."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "samsa.cli.main", *args, "--bootstrap-server", bootstrap],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return result, time.monotonic() - started


# Not a speed assertion: a bound far above the few seconds these take, far below the 60 s
# (the producer's max.block.ms) or 10 s-per-read retries they would hang for without the check.
HANG_S = 15


@pytest.mark.parametrize("command", ["produce", "consume"])
def test_an_unknown_topic_is_one_line_that_says_how_to_create_it(
    bootstrap: str, command: str
) -> None:
    result, elapsed = timed_samsa(bootstrap, command, "no-such-topic", stdin="hello\n")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "samsa: topic 'no-such-topic' does not exist "
        "(create it with `samsa topics create no-such-topic`)"
    ), result.stderr
    assert "Traceback" not in result.stderr
    assert elapsed < HANG_S


def test_producing_to_a_partition_the_topic_lacks_is_one_line_at_once(bootstrap: str) -> None:
    """The producer waits max.block.ms for a partition to appear (one just added may not be in
    its metadata yet, as in Kafka); the command knows the count and says so at once."""
    samsa(bootstrap, "topics", "create", "two-partitions", "--partitions", "2")
    result, elapsed = timed_samsa(
        bootstrap, "produce", "two-partitions", "--partition", "2", stdin="hello\n"
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "samsa produce: partition 2 of 'two-partitions' does not exist (it has 2: 0 to 1)"
    ), result.stderr
    assert elapsed < HANG_S


def unused_port() -> int:
    """A loopback port nothing listens on (bound, then released): connections are refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


UNREACHABLE_COMMANDS = [
    ("topics", "list"),
    ("cluster",),
    ("produce", "clicks"),
    ("consume", "clicks"),
]


def test_an_unreachable_cluster_is_one_line_for_every_command() -> None:
    """Every command at once (each retries a refused connection for a few seconds, in case a
    cluster is starting, then says so in one line): they wait side by side, not in a row."""
    address = f"127.0.0.1:{unused_port()}"
    with ThreadPoolExecutor(len(UNREACHABLE_COMMANDS)) as pool:
        runs = list(pool.map(lambda a: timed_samsa(address, *a, stdin="x\n"), UNREACHABLE_COMMANDS))
    for args, (result, elapsed) in zip(UNREACHABLE_COMMANDS, runs, strict=True):
        assert result.returncode == 1, args
        assert result.stderr.strip() == (
            f"samsa: cannot reach the cluster at {address} (connection refused); is `samsa up` "
            "running? check --bootstrap-server or $SAMSA_BOOTSTRAP"
        ), (args, result.stderr)
        assert elapsed < HANG_S, args


def test_produce_takes_kafka_producer_properties(bootstrap: str) -> None:
    """`--producer-property KEY=VALUE` (repeatable) reaches the SDK producer: valid settings
    produce, and a bad value, an unknown key or a missing `=` is one line naming it."""
    assert samsa(bootstrap, "topics", "create", "props", "--partitions", "1").returncode == 0
    lines = "".join(f"value {n}\n" for n in range(20))
    ok = samsa(
        bootstrap,
        "produce",
        "props",
        "--producer-property",
        "acks=1",
        "--producer-property",
        "linger.ms=5",
        stdin=lines,
    )
    assert ok.returncode == 0, ok.stderr
    assert "produced 20 records" in ok.stderr
    consumed = samsa(bootstrap, "consume", "props", "--from-beginning", "--count", "20")
    assert consumed.stdout.splitlines() == [f"value {n}" for n in range(20)]
    # --bootstrap-server wins over a bootstrap.servers property (nothing listens on port 1).
    elsewhere = "bootstrap.servers=127.0.0.1:1"
    flagged = samsa(bootstrap, "produce", "props", "--producer-property", elsewhere, stdin="x\n")
    assert flagged.returncode == 0 and "produced 1 records" in flagged.stderr, flagged.stderr
    read = samsa(
        bootstrap, "consume", "props", "--offset", "20", "--count", "1",
        "--consumer-property", elsewhere,
    )  # fmt: skip
    assert read.returncode == 0 and read.stdout == "x\n", read.stderr

    bad = samsa(bootstrap, "produce", "props", "--producer-property", "acks=2", stdin="x\n")
    assert bad.returncode == 1 and "acks" in bad.stderr and len(bad.stderr.splitlines()) == 1
    unknown = samsa(bootstrap, "produce", "props", "--producer-property", "ack=1", stdin="x\n")
    assert unknown.returncode == 1 and "'ack'" in unknown.stderr
    malformed = samsa(bootstrap, "produce", "props", "--producer-property", "acks", stdin="x\n")
    assert malformed.returncode != 0 and "--producer-property 'acks' is not KEY=VALUE" in (
        malformed.stderr
    )


def test_produce_and_consume_speak_the_kafka_console_tools_flags(bootstrap: str) -> None:
    """What a kafka-console-producer/consumer user types: `--topic`, `--property parse.key=true
    --property key.separator=:` on the way in, `--property print.key=true` (and partition,
    offset, headers) with `--max-messages` and `--timeout-ms` on the way out, in Kafka's field
    order; a property the tools do not know is one line naming it, before connecting."""
    assert samsa(bootstrap, "topics", "create", "console", "--partitions", "1").returncode == 0
    lines = "".join(f"user-{n}:click {n}\n" for n in range(5)) + "no key here\n"
    produced = samsa(
        bootstrap,
        "produce",
        "--topic",
        "console",
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        stdin=lines,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = samsa(
        bootstrap,
        *("consume", "--topic", "console", "--from-beginning", "--max-messages", "6"),
        *("--timeout-ms", "20000"),
        *("--property", "print.key=true", "--property", "print.partition=true"),
        *("--property", "print.offset=true", "--property", "print.headers=true"),
        *("--property", "key.separator=|"),
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == [
        *(f"Partition:0|Offset:{n}|NO_HEADERS|user-{n}|click {n}" for n in range(5)),
        "Partition:0|Offset:5|NO_HEADERS|null|no key here",
    ]
    stamped = samsa(
        bootstrap,
        *("topics", "create", "stamped", "--partitions", "1"),
        *("--config", "message.timestamp.type=LogAppendTime"),
    )
    assert stamped.returncode == 0, stamped.stderr
    assert samsa(bootstrap, "produce", "stamped", stdin="v\n").returncode == 0
    for topic, kind in (("console", "CreateTime"), ("stamped", "LogAppendTime")):
        shown = samsa(
            bootstrap,
            *("consume", topic, "--from-beginning", "--max-messages", "1"),
            *("--property", "print.timestamp=true"),
        )
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.startswith(f"{kind}:"), shown.stdout
    unknown = samsa(bootstrap, "consume", "console", "--property", "print.colour=true")
    assert unknown.returncode == 2 and "--property print.colour" in unknown.stderr
    assert len(unknown.stderr.splitlines()) == 1


def test_topics_alter_adds_partitions_and_sets_and_resets_configs(bootstrap: str) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic("alterable", 2, 1)])

        def state() -> tuple[int, dict[str, str]]:
            configs = admin.describe_configs("alterable")
            overrides = {k: e.value for k, e in configs.items() if e.source != "default"}
            return len(admin.describe_topics(["alterable"])["alterable"].partitions), overrides

        altered = samsa(
            bootstrap,
            "topics",
            "alter",
            "alterable",
            "--partitions",
            "4",
            "--config",
            "retention.ms=60000",
            "--config",
            "cleanup.policy=compact",
        )
        assert altered.returncode == 0, altered.stderr
        assert "alterable: partitions 2 -> 4" in altered.stdout
        assert "alterable: set retention.ms=60000" in altered.stdout
        assert state() == (4, {"retention.ms": "60000", "cleanup.policy": "compact"})

        reset = samsa(
            bootstrap, "topics", "alter", "alterable", "--delete-config", "cleanup.policy"
        )
        assert reset.returncode == 0, reset.stderr
        assert state() == (4, {"retention.ms": "60000"})

        shrink = samsa(bootstrap, "topics", "alter", "alterable", "--partitions", "1")
        assert shrink.returncode == 1 and "Traceback" not in shrink.stderr
        assert "INVALID_PARTITIONS" in shrink.stderr
        bad = samsa(bootstrap, "topics", "alter", "alterable", "--config", "cleanup.policy=shred")
        assert bad.returncode == 1 and "cleanup.policy" in bad.stderr
        assert state() == (4, {"retention.ms": "60000"}), "a refused alteration changed nothing"


def test_topics_delete_records_moves_the_log_start_and_refuses_uncommitted_offsets(
    bootstrap: str,
) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic("trimmed", 1, 1)])
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for n in range(100):
            producer.send("trimmed", b"%d" % n)
    deleted = samsa(bootstrap, "topics", "delete-records", "trimmed", "--offset", "40")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.splitlines()[1].split() == ["0", "40"]
    with Consumer({"bootstrap.servers": bootstrap}) as consumer:
        assert consumer.beginning_offsets([("trimmed", 0)]) == {("trimmed", 0): 40}

    above = samsa(bootstrap, "topics", "delete-records", "trimmed", "--offset", "101")
    assert above.returncode == 1 and "Traceback" not in above.stderr
    assert "high watermark 100" in above.stderr

    # One partition refused (10 records, not 40): the other's records are deleted all the same,
    # and its new low watermark is shown beside the refusal.
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic("halves", 2, 1)])
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for n in range(60):
            producer.send("halves", b"%d" % n, partition=0 if n < 50 else 1)
    partly = samsa(bootstrap, "topics", "delete-records", "halves", "--offset", "40")
    assert partly.returncode == 1
    assert [line.split() for line in partly.stdout.splitlines()][1:] == [["0", "40"]]
    assert "halves-1" in partly.stderr and "OFFSET_OUT_OF_RANGE" in partly.stderr
    with Consumer({"bootstrap.servers": bootstrap}) as consumer:
        assert consumer.beginning_offsets([("halves", 0), ("halves", 1)]) == {
            ("halves", 0): 40,
            ("halves", 1): 0,
        }
