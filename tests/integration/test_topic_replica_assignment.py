"""Goal: a topic created with its replicas placed by hand (Kafka's `--replica-assignment`) is
placed exactly so by real processes: describe_topics shows the given replica lists, in order,
each led by its first replica; records produced with acks=all to every partition are read back;
a plan naming an unregistered broker is refused with a message saying so and creates nothing,
and validate_only creates nothing; the CLI form `samsa topics create --replica-assignment`
does the same, and refuses a bad plan in one line (exit 1). Partitions added to a topic
(CreatePartitions, `samsa topics alter --partitions N --replica-assignment`) are placed as
given too. A fenced broker may be named beside a live one: it joins the ISR once it is back.

Method: 1 controller, 3 brokers (FAST_SETTINGS). Every call goes through broker 1 (the SDK's
Admin and the CLI bootstrapped from it alone), so the writes are forwarded to the controller
(KIP-590) and the new field must survive the forwarding. Waits are for conditions, never
sleeps; the cluster's processes are stopped by PID (local_cluster).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster, read_to_end, wait_until

from samsa.cli.launcher import LocalCluster
from samsa.cli.main import main as samsa_main
from samsa.client import Admin, NewTopic, Producer, TopicError
from samsa.common.errors import ErrorCode

pytestmark = pytest.mark.timeout(300)

PLAN = {0: [1, 2], 1: [2, 3], 2: [3, 1]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("assign"), 1, 3, FAST_SETTINGS) as running:
        yield running


@pytest.fixture(scope="module")
def via(cluster: LocalCluster) -> str:
    return next(b.endpoint for b in cluster.spec.brokers if b.broker_id == 1)


def placement(admin: Admin, topic: str) -> list[tuple[list[int], int, list[int]]]:
    """Each partition's (replicas, leader, sorted ISR), by partition."""
    partitions = admin.describe_topics([topic])[topic].partitions
    return [(list(p.replicas), p.leader, sorted(p.isr)) for p in partitions]


def test_the_topic_is_placed_as_given_and_carries_records(via: str) -> None:
    with Admin({"bootstrap.servers": via}) as admin:
        admin.create_topics([NewTopic("placed", replica_assignments=PLAN)])
        expected = [(replicas, replicas[0], sorted(replicas)) for replicas in PLAN.values()]
        wait_until("placed as given", lambda: placement(admin, "placed") == expected)

    values = {p: [f"{p}-{i}".encode() for i in range(20)] for p in PLAN}
    with Producer({"bootstrap.servers": via, "acks": "all"}) as producer:
        futures = [producer.send("placed", value, partition=p) for p in PLAN for value in values[p]]
        for future in futures:
            future.result(timeout=30)
    records = read_to_end(via, [("placed", p) for p in PLAN], "read_uncommitted")
    for p in PLAN:
        assert [value for partition, _, value in records if partition == p] == values[p]


def test_a_plan_naming_an_unregistered_broker_is_refused_and_creates_nothing(via: str) -> None:
    with Admin({"bootstrap.servers": via}) as admin:
        with pytest.raises(TopicError) as refused:
            admin.create_topics([NewTopic("nowhere", replica_assignments={0: [1, 9]})])
        assert refused.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert "brokers [9] that are not registered" in str(refused.value)
        assert "'nowhere'" in str(refused.value)
        admin.create_topics([NewTopic("checked", replica_assignments=PLAN)], validate_only=True)
        assert not {"nowhere", "checked"} & set(admin.list_topics())


def test_the_cli_places_a_topic_and_refuses_a_bad_plan(
    via: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["topics", "create", "by-cli", "--replica-assignment", "3:1,1:2"]
    assert samsa_main([*argv, "--bootstrap-server", via]) == 0
    assert "created by-cli with 2 partition(s)" in capsys.readouterr().out
    with Admin({"bootstrap.servers": via}) as admin:
        expected = [([3, 1], 3, [1, 3]), ([1, 2], 1, [1, 2])]
        wait_until("placed as given", lambda: placement(admin, "by-cli") == expected)

    argv = ["topics", "create", "lopsided", "--replica-assignment", "1:2,3"]
    assert samsa_main([*argv, "--bootstrap-server", via]) == 1
    err = capsys.readouterr().err
    assert "same replication factor" in err and "INVALID_REPLICA_ASSIGNMENT" in err


def test_added_partitions_are_placed_as_given(via: str, capsys: pytest.CaptureFixture[str]) -> None:
    with Admin({"bootstrap.servers": via}) as admin:
        admin.create_topics([NewTopic("growing", replica_assignments={0: [1, 2]})])
        admin.create_partitions({"growing": 2}, replica_assignments={"growing": [[3, 2]]})
        with pytest.raises(TopicError, match=r"brokers \[9\] that are not registered") as refused:
            admin.create_partitions({"growing": 3}, replica_assignments={"growing": [[9, 1]]})
        assert refused.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        argv = ["topics", "alter", "growing", "--partitions", "3"]
        argv += ["--replica-assignment", "1:2,3:2,2:3", "--bootstrap-server", via]
        assert samsa_main(argv) == 0
        assert "growing: partitions 2 -> 3" in capsys.readouterr().out
        expected = [([1, 2], 1, [1, 2]), ([3, 2], 3, [2, 3]), ([2, 3], 2, [2, 3])]
        wait_until("placed as given", lambda: placement(admin, "growing") == expected)


def test_a_fenced_broker_in_the_plan_joins_the_isr_once_it_is_back(
    cluster: LocalCluster, via: str
) -> None:
    """Last in the module: it stops broker 3 (controlled shutdown fences it at once)."""
    cluster.kill("broker-3", signal.SIGTERM)
    with Admin({"bootstrap.servers": via}) as admin:
        wait_until(
            "broker 3 fenced",
            lambda: any(b.broker_id == 3 and b.fenced for b in admin.describe_cluster().brokers),
        )
        admin.create_topics([NewTopic("waiting", replica_assignments={0: [3, 1]})])
        assert placement(admin, "waiting") == [([3, 1], 1, [1])], "broker 1 leads meanwhile"
        with pytest.raises(TopicError, match="fenced"):
            admin.create_topics([NewTopic("offline", replica_assignments={0: [3]})])
        with Producer({"bootstrap.servers": via, "acks": "all"}) as producer:
            producer.send("waiting", b"before", partition=0).result(timeout=30)
        cluster.start("broker-3")
        wait_until(
            "broker 3 back in the ISR",
            lambda: placement(admin, "waiting")[0][2] == [1, 3],
            timeout_s=60,
        )
    records = read_to_end(via, [("waiting", 0)], "read_uncommitted")
    assert [value for _, _, value in records] == [b"before"]
    assert cluster.exited() == {}
