"""`samsa groups` and `samsa cluster`'s coordinators as a user types them, against a real cluster.

Goal: a person can consume as a member of a group (`samsa consume --group`, which commits
exactly what it printed), and an operator can list, describe, see the lag of, reset the offsets
of and delete consumer groups from the command line, as with Kafka's kafka-consumer-groups.sh: a
reset prints its plan and changes nothing unless --execute (with Kafka's scopes and strategies:
--topic topic:0, --all-topics, --to-current, --by-duration, --dry-run, --export and
--from-file); --execute, delete and delete-offsets of the subscribed topic are refused (exit 1,
saying why) while the group has a live member, and work once it left. `list --state` keeps the
groups in the states named; describe and lag show several groups (or --all-groups) one block
each, saying which do not exist (exit 1); describe's --state, --members and --offsets show one
part; delete --all-groups deletes the empty groups and says why not for the others. The internal
topics are listed only when asked for (`topics list` unless --exclude-internal, as
kafka-topics.sh; Admin.list_topics only with list_internal, as Kafka's admin).

Method: one controller, one broker and two coordinators (real processes from the launcher,
stopped by PID also on failure), 4 partitions of `__consumer_offsets`. The group's one member is a
`RawMember` speaking the heartbeat protocol with plain generated stubs (as in
test_group_coordinator.py); records are produced with the SDK. The commands run as
`python -m samsa.cli.main` subprocesses; committed offsets are checked with the SDK's Admin.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cluster_helpers import FAST_SETTINGS, wait_until

from samsa.cli.launcher import LocalCluster, load_or_create, wait_healthy
from samsa.client import Admin, Producer
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import coordinator_pb2_grpc as cg

pytestmark = pytest.mark.timeout(180)

TOPIC = "orders"
PARTITIONS = 4
GROUP = "payments"
IDLE = "idle"  # a second group, without members: an admin commit creates it
SETTINGS = dict(FAST_SETTINGS) | {
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.num.partitions": "2",
    "coordinator.session.timeout.ms": "3000",
    "coordinator.heartbeat.interval.ms": "300",
    "group.consumer.session.timeout.ms": "30000",  # the member heartbeats only when the test does
    "group.consumer.heartbeat.interval.ms": "300",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("cli-groups")
    spec = load_or_create(data_dir, 1, 1, SETTINGS, coordinators=2)
    cluster = LocalCluster(spec, data_dir)
    try:
        cluster.start_all()
        wait_healthy(cluster, timeout_s=60)
        with Admin({"bootstrap.servers": spec.bootstrap_servers}) as admin:
            admin.create_topic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)
        with Producer({"bootstrap.servers": spec.bootstrap_servers}) as producer:
            for n in range(20):
                producer.send(TOPIC, b"v%d" % n, partition=0)
            producer.flush(30)
        yield cluster
    finally:
        cluster.stop_all()


def samsa(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    bootstrap = cluster.spec.bootstrap_servers
    return subprocess.run(
        [sys.executable, "-m", "samsa.cli.main", *args, "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )


def committed(cluster: LocalCluster, partition: int) -> int | None:
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        offsets = admin.list_consumer_group_offsets(GROUP, [(TOPIC, partition)])
    found = offsets.get((TOPIC, partition))
    return None if found is None else found.offset


class RawMember:
    """A consumer-group member written against the proto alone: it owns what it was told."""

    def __init__(self, group_id: str, member_id: str) -> None:
        self.group_id, self.member_id = group_id, member_id
        self.epoch = 0
        self.owned: set[int] = set()

    def heartbeat(self, stub: cg.GroupCoordinatorServiceStub) -> c.ConsumerGroupHeartbeatResponse:
        request = c.ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.epoch,
            rebalance_timeout_ms=10_000,
            client_id="cli-test",
        )
        if self.epoch == 0:
            request.subscription.topic_names.append(TOPIC)
        request.owned_partitions.topics.add(topic=TOPIC, partitions=sorted(self.owned))
        answer = stub.ConsumerGroupHeartbeat(request, timeout=10)
        if answer.error_code:
            return answer
        self.epoch = answer.member_epoch
        if answer.HasField("assignment"):
            self.owned = {p for t in answer.assignment.topics for p in t.partitions}
        return answer

    def leave(self, stub: cg.GroupCoordinatorServiceStub) -> None:
        request = c.ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=-1
        )
        assert stub.ConsumerGroupHeartbeat(request, timeout=10).error_code == ErrorCode.NONE


def coordinator_of(cluster: LocalCluster, group_id: str) -> cg.GroupCoordinatorServiceStub:
    """A stub of the group's coordinator, as the controller answers once it knows one."""
    lookup = cg.CoordinatorLookupServiceStub(
        grpc.insecure_channel(cluster.spec.controllers[0].endpoint)
    )

    def found() -> c.CoordinatorLocation | None:
        request = c.FindCoordinatorRequest(key_type=c.COORDINATOR_KEY_TYPE_GROUP, keys=[group_id])
        location = lookup.FindCoordinator(request, timeout=5).coordinators[0]
        return None if location.error_code else location

    location = wait_until(f"a coordinator for {group_id}", found, timeout_s=30)
    return cg.GroupCoordinatorServiceStub(grpc.insecure_channel(location.endpoint))


def join_and_commit(stub: cg.GroupCoordinatorServiceStub, member: RawMember) -> None:
    """Heartbeat until `member` owns every partition and says so, then commit 5 on partition 0."""

    def owns_all() -> bool:
        answer = member.heartbeat(stub)
        if answer.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return False
        assert answer.error_code == ErrorCode.NONE, answer.error_message
        return len(member.owned) == PARTITIONS

    wait_until("the member to own every partition", owns_all, timeout_s=30)
    assert member.heartbeat(stub).error_code == ErrorCode.NONE  # reports what it owns: Stable
    commit = c.OffsetCommitRequest(group_id=GROUP, member_id="m1", member_epoch=member.epoch)
    commit.topics.add(name=TOPIC).partitions.add(partition=0, committed_offset=5)
    assert stub.OffsetCommit(commit, timeout=10).topics[0].partitions[0].error_code == 0


def test_internal_topics_are_listed_only_when_asked(cluster: LocalCluster) -> None:
    """As Kafka's: Admin.list_topics() leaves them out unless list_internal; `samsa topics
    list` (kafka-topics.sh --list) shows them unless --exclude-internal."""
    internal = {"__consumer_offsets", "__transaction_state"}
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        # The controller creates the internal topics once a coordinator is live: in a random
        # order this test may run before anything else waited for them.
        wait_until(
            "the internal topics",
            lambda: internal <= set(admin.list_topics(list_internal=True)),
            timeout_s=30,
        )
        assert TOPIC in admin.list_topics() and not internal & set(admin.list_topics())
        assert internal | {TOPIC} <= set(admin.list_topics(list_internal=True))
    shown = samsa(cluster, "topics", "list")
    assert shown.returncode == 0 and internal | {TOPIC} <= set(shown.stdout.split()), shown.stderr
    shown = samsa(cluster, "topics", "list", "--exclude-internal")
    assert shown.returncode == 0, shown.stderr
    assert TOPIC in shown.stdout.split() and not internal & set(shown.stdout.split())


def test_cluster_shows_the_coordinators(cluster: LocalCluster) -> None:
    def shown_coordinators() -> list[list[str]] | None:
        shown = samsa(cluster, "cluster")
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        header = next((i for i, line in enumerate(lines) if line.startswith("coordinator")), -1)
        if header < 0:
            return None  # the broker's image shows no coordinator yet
        assert lines[header].split() == ["coordinator", "endpoint", "epoch", "state", "partitions"]
        rows = [line.split() for line in lines[header + 1 : header + 3]]
        if [row[1] for row in rows] != [x.endpoint for x in cluster.spec.coordinators]:
            return None
        if not all(row[3] == "live" for row in rows):
            return None
        return rows if sum(int(row[4]) for row in rows) == 4 else None

    # The cluster is healthy once the controller sees both coordinators live, but it creates and
    # assigns __consumer_offsets after that, and the broker the command asks learns of it from
    # its own metadata log: wait for every partition to be shown owned by a live coordinator.
    wait_until("every partition of __consumer_offsets shown owned", shown_coordinators, 60)


def test_list_describe_lag_reset_and_delete_a_group(cluster: LocalCluster, tmp_path: Path) -> None:
    stub = coordinator_of(cluster, GROUP)
    member = RawMember(GROUP, "m1")
    join_and_commit(stub, member)

    listed = samsa(cluster, "groups", "list")
    assert listed.returncode == 0, listed.stderr
    assert [GROUP, "Stable", "1"] in [line.split() for line in listed.stdout.splitlines()]

    described = samsa(cluster, "groups", "describe", GROUP)
    assert described.returncode == 0, described.stderr
    assert f"group {GROUP}  state Stable" in described.stdout
    member_row = next(line.split() for line in described.stdout.splitlines() if "m1" in line)
    everything = "orders:0,1,2,3"
    assert member_row == ["m1", "-", "cli-test", str(member.epoch), everything, everything]

    lag = samsa(cluster, "groups", "lag", GROUP)
    assert lag.returncode == 0, lag.stderr
    rows = [line.split() for line in lag.stdout.splitlines()]
    assert [TOPIC, "0", "5", "20", "15", "m1"] in rows
    assert [TOPIC, "1", "-", "0", "-", "m1"] in rows
    assert rows[-1][:3] == ["total", "lag", "15"]
    several_groups_and_views(cluster, stub, member, lag.stdout)

    # While the member is in the group, a reset (dry run or --execute) and delete are refused
    # in one line, as Kafka's tool refuses them.
    for mode in ("--dry-run", "--execute"):
        refused = samsa(
            cluster, "groups", "reset-offsets", GROUP, "--topic", TOPIC, "--partitions", "0",
            "--to-offset", "2", mode,
        )  # fmt: skip
        assert refused.returncode == 1
        assert f"the group '{GROUP}' is inactive, but the current state is Stable" in refused.stderr
        assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
        assert refused.stdout == ""
    assert committed(cluster, 0) == 5
    not_empty = samsa(cluster, "groups", "delete", GROUP)
    assert not_empty.returncode == 1 and "NON_EMPTY_GROUP" in not_empty.stderr
    # Nor may the offsets of a topic the member subscribes to be deleted (KIP-496).
    subscribed = samsa(cluster, "groups", "delete-offsets", GROUP, "--topic", f"{TOPIC}:0")
    assert subscribed.returncode == 1
    rows = [line.split() for line in subscribed.stdout.splitlines()]
    assert rows[-1] == [TOPIC, "0", "Error:", "GROUP_SUBSCRIBED_TO_TOPIC"]
    assert f"subscribes to '{TOPIC}'" in subscribed.stderr
    assert committed(cluster, 0) == 5

    # Once it left, a dry run prints the plan and changes nothing; the reset commits (clamped
    # to the log: 30 is past its end, 20) and the group can be deleted.
    member.leave(stub)
    dry = samsa(cluster, "groups", "reset-offsets", GROUP, "--topic", TOPIC, "--to-earliest")
    assert dry.returncode == 0, dry.stderr
    assert [TOPIC, "0", "5", "0"] in [line.split() for line in dry.stdout.splitlines()]
    assert "dry run" in dry.stderr
    assert committed(cluster, 0) == 5
    executed = samsa(
        cluster, "groups", "reset-offsets", GROUP, "--topic", TOPIC, "--partitions", "0",
        "--to-offset", "30", "--execute",
    )  # fmt: skip
    assert executed.returncode == 0, executed.stderr
    assert [TOPIC, "0", "5", "20"] in [line.split() for line in executed.stdout.splitlines()]
    assert committed(cluster, 0) == 20
    shifted = samsa(
        cluster, "groups", "reset-offsets", GROUP, "--topic", TOPIC, "--partitions", "0",
        "--shift-by", "-7", "--execute",
    )  # fmt: skip
    assert shifted.returncode == 0, shifted.stderr
    assert committed(cluster, 0) == 13

    # Kafka's other flags: a partition named in --topic, --to-current and an explicit --dry-run;
    # then every partition the group committed (only 0), an hour back: before every record.
    current = samsa(
        cluster, "groups", "reset-offsets", GROUP, "--topic", f"{TOPIC}:0", "--to-current",
        "--dry-run",
    )  # fmt: skip
    assert current.returncode == 0, current.stderr
    assert [line.split() for line in current.stdout.splitlines()][-1] == [TOPIC, "0", "13", "13"]
    assert "dry run" in current.stderr
    hour_back = samsa(
        cluster, "groups", "reset-offsets", GROUP, "--all-topics", "--by-duration", "PT1H",
        "--execute",
    )  # fmt: skip
    assert hour_back.returncode == 0, hour_back.stderr
    assert [line.split() for line in hour_back.stdout.splitlines()][-1] == [TOPIC, "0", "13", "0"]
    assert committed(cluster, 0) == 0

    # A plan exported as Kafka's CSV (a dry run) and applied from the file.
    exported = samsa(
        cluster, "groups", "reset-offsets", GROUP, "--topic", f"{TOPIC}:0", "--to-offset", "7",
        "--export",
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout == f"{TOPIC},0,7\n"
    assert committed(cluster, 0) == 0
    plan = tmp_path / "plan.csv"
    plan.write_text(exported.stdout)
    applied = samsa(
        cluster, "groups", "reset-offsets", GROUP, "--from-file", str(plan), "--execute"
    )
    assert applied.returncode == 0, applied.stderr
    assert committed(cluster, 0) == 7

    # With no member left, the named offsets go (a partition with none succeeds as it is) and
    # the group keeps the others. (A group left with no offset and no member is deleted by the
    # next expiry pass, as in Kafka: partition 1 keeps this one alive for the delete below.)
    kept = samsa(
        cluster, "groups", "reset-offsets", GROUP, "--topic", f"{TOPIC}:1", "--to-latest",
        "--execute",
    )  # fmt: skip
    assert kept.returncode == 0, kept.stderr
    offsets_gone = samsa(cluster, "groups", "delete-offsets", GROUP, "--topic", f"{TOPIC}:0,3")
    assert offsets_gone.returncode == 0, offsets_gone.stderr
    rows = [line.split() for line in offsets_gone.stdout.splitlines()]
    assert [TOPIC, "0", "Successful"] in rows and [TOPIC, "3", "Successful"] in rows
    assert committed(cluster, 0) is None

    deleted = samsa(cluster, "groups", "delete", GROUP, "never-existed")
    assert deleted.returncode == 1
    assert deleted.stdout.strip() == f"deleted {GROUP}"
    assert "GROUP_ID_NOT_FOUND" in deleted.stderr
    assert GROUP not in samsa(cluster, "groups", "list").stdout
    gone = samsa(cluster, "groups", "describe", GROUP)
    assert gone.returncode == 1 and "GROUP_ID_NOT_FOUND" in gone.stderr


def several_groups_and_views(
    cluster: LocalCluster, stub: cg.GroupCoordinatorServiceStub, member: RawMember, lag: str
) -> None:
    """Kafka's --state filter, several groups and --all-groups, describe's views, and delete
    --all-groups, while GROUP is Stable with `member` and IDLE is Empty. The member heartbeats
    between the commands, so that their time does not run out its session."""
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        admin.alter_consumer_group_offsets(IDLE, {(TOPIC, 0): 12})

    def names(listed: subprocess.CompletedProcess[str]) -> list[str]:
        assert listed.returncode == 0, listed.stderr
        return [line.split()[0] for line in listed.stdout.splitlines()[1:]]

    stable = names(samsa(cluster, "groups", "list", "--state", "STABLE"))
    assert GROUP in stable and IDLE not in stable
    empty = names(samsa(cluster, "groups", "list", "--state", "empty,Assigning"))
    assert IDLE in empty and GROUP not in empty

    # A group that does not exist is said on stderr; the others are shown, a blank line between.
    heads = samsa(cluster, "groups", "describe", GROUP, "never-existed", IDLE, "--state")
    assert heads.returncode == 1
    shown = heads.stdout.splitlines()
    assert [shown[0].split()[:4], shown[1], shown[2].split()[:4]] == [
        ["group", GROUP, "state", "Stable"],
        "",
        ["group", IDLE, "state", "Empty"],
    ]
    assert len(shown) == 3
    assert "'never-existed' does not exist (GROUP_ID_NOT_FOUND)" in heads.stderr
    assert member.heartbeat(stub).error_code == ErrorCode.NONE

    members = samsa(cluster, "groups", "describe", GROUP, "--members")
    assert members.returncode == 0, members.stderr
    rows = [line.split() for line in members.stdout.splitlines()]
    assert rows[0] == ["member", "instance", "client", "epoch", "assignment", "target"]
    assert rows[1][:3] == ["m1", "-", "cli-test"] and len(rows) == 2
    offsets = samsa(cluster, "groups", "describe", GROUP, "--offsets")
    assert (offsets.returncode, offsets.stdout) == (0, lag)
    assert member.heartbeat(stub).error_code == ErrorCode.NONE

    every = samsa(cluster, "groups", "describe", "--all-groups")
    assert every.returncode == 0, every.stderr
    assert f"group {GROUP}  state Stable" in every.stdout
    assert f"group {IDLE}  state Empty" in every.stdout
    every_lag = samsa(cluster, "groups", "lag", "--all-groups")
    assert every_lag.returncode == 0, every_lag.stderr
    blocks = every_lag.stdout.split("\n\ngroup ")
    titles = [block.splitlines()[0].removeprefix("group ") for block in blocks]
    assert GROUP in titles and IDLE in titles
    idle_rows = [line.split() for line in blocks[titles.index(IDLE)].splitlines()]
    assert [TOPIC, "0", "12", "20", "8", "-"] in idle_rows  # no member owns it
    assert member.heartbeat(stub).error_code == ErrorCode.NONE

    # Every group listed is deleted or refused on its own line: GROUP has a member.
    deleted = samsa(cluster, "groups", "delete", "--all-groups")
    assert deleted.returncode == 1
    assert f"deleted {IDLE}" in deleted.stdout.splitlines()
    assert f"deleted {GROUP}" not in deleted.stdout
    assert (
        f"group '{GROUP}' has 1 member:" in deleted.stderr and "NON_EMPTY_GROUP" in deleted.stderr
    )
    assert IDLE not in names(samsa(cluster, "groups", "list"))
    assert member.heartbeat(stub).error_code == ErrorCode.NONE


def test_consume_in_a_group_resumes_where_the_last_run_stopped(cluster: LocalCluster) -> None:
    """`samsa consume --group` commits exactly what it printed: a second run prints the rest,
    and the group's lag is then zero."""
    first = samsa(
        cluster, "consume", TOPIC, "--group", "console", "--from-beginning", "--count", "7"
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == [f"v{n}" for n in range(7)]
    # Stop after the 13 left (the idle timeout only bounds a failure): joining the group may
    # take seconds on a loaded machine, and an idle timeout counts them.
    rest = samsa(
        cluster, "consume", TOPIC, "--group", "console", "--count", "13", "--timeout", "30"
    )
    assert rest.returncode == 0, rest.stderr
    assert rest.stdout.split() == [f"v{n}" for n in range(7, 20)]
    lag = samsa(cluster, "groups", "lag", "console")
    assert lag.returncode == 0, lag.stderr
    assert lag.stdout.split("\n")[1].split() == ["orders", "0", "20", "20", "0", "-"]
    assert "total lag 0" in lag.stdout

    refused = samsa(cluster, "consume", TOPIC, "--group", "console", "--partition", "1")
    assert refused.returncode != 0 and "--group takes no --partition" in refused.stderr


def test_all_topics_leaves_out_a_topic_deleted_since_the_commit(cluster: LocalCluster) -> None:
    """A group's offsets of a topic deleted since are not reset: the coordinator deletes them
    with the topic (as Kafka's), and a reset that lists them before it did leaves them out,
    said on stderr (test_cli_groups_reset_scope.py has that case alone); the others are reset
    at once. Their log offsets were waited for instead, 45 s, before a LEADER_NOT_AVAILABLE
    failure."""
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        admin.create_topic("gone", num_partitions=1, replication_factor=1)
        admin.alter_consumer_group_offsets("leaver", {(TOPIC, 0): 5, ("gone", 0): 0})
        admin.delete_topics(["gone"])
    started = time.monotonic()
    reset = samsa(cluster, "groups", "reset-offsets", "leaver", "--all-topics", "--to-earliest")
    assert time.monotonic() - started < 20, reset.stderr
    assert reset.returncode == 0, reset.stderr
    assert "left out" not in reset.stderr or "left out gone-0" in reset.stderr
    assert reset.stdout.splitlines()[1].split() == [TOPIC, "0", "5", "0"]
    assert len(reset.stdout.splitlines()) == 2
