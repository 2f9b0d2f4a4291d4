"""Goal: offsets a transactional pipeline commits (send_offsets_to_transaction) resume a group
member exactly there after the input partition has changed leaders, the exactly-once promise of
consume-transform-produce. The SDK sent a bare offset's TxnOffsetCommit without a leader epoch,
which proto3 read as epoch 0: a member starting at that offset fetched with last_fetched_epoch 0,
the leader answered that epoch 0 ended below it (at the first leader change), and the member
went back there and copied those records again. The slow transactional history loop found it:
240 input records copied twice over 51 rounds.

Method: one controller, two brokers, one coordinator (real processes, stopped by PID also on
failure). Records are written to a partition at two leader epochs (controlled shutdown of the
first leader between them); a transaction commits offset 8 for a group, as a bare offset and, for
a second group, as an OffsetAndMetadata naming the current epoch; a member of each group then
reads from offset 8 exactly. A plain OffsetCommit sent without the field, as a client in another
language may send it, stores no epoch either.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from cluster_helpers import TRANSACTION_SETTINGS, local_cluster, open_channel, wait_until

from samsa.cli.launcher import LocalCluster
from samsa.client import Admin, Consumer, NewTopic, Producer
from samsa.client.group_admin import OffsetAndMetadata
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import coordinator_pb2_grpc as cg

pytestmark = pytest.mark.timeout(240)

IN, OUT = "epoch-in", "epoch-out"
TP = (IN, 0)
COMMITTED = 8


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("txn-offsets-epoch")
    with local_cluster(data_dir, 1, 2, TRANSACTION_SETTINGS, coordinators=1) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def epoch(cluster: LocalCluster) -> int:
    """IN-0 holds offsets 0-4 at its first leader epoch and 5-9 at a later one; the epoch now."""
    bootstrap = cluster.spec.bootstrap_servers
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(IN, 1, 2), NewTopic(OUT, 1, 2)])

        def leader() -> tuple[int, int] | None:
            (info,) = admin.describe_topics([IN])[IN].partitions
            return (info.leader, info.leader_epoch) if info.leader >= 0 else None

        first, first_epoch = wait_until("a leader", leader)
        produce(bootstrap, range(5))
        cluster.kill(f"broker-{first}", signal.SIGTERM)  # controlled shutdown: leadership moves
        _, epoch = wait_until(
            "a new leader", lambda: (now := leader()) and now[1] > first_epoch and now
        )
        produce(bootstrap, range(5, 10))
        cluster.start(f"broker-{first}")
        return epoch


def produce(bootstrap: str, numbers: range) -> None:
    with Producer({"bootstrap.servers": bootstrap, "acks": "all"}) as producer:
        for n in numbers:
            producer.send(IN, b"%d" % n, partition=0)
        producer.flush(30)


def commit_in_transaction(cluster: LocalCluster, group: str, at: int | OffsetAndMetadata) -> None:
    producer = Producer(
        {"bootstrap.servers": cluster.spec.bootstrap_servers, "transactional.id": f"{group}-t"}
    )
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send(OUT, b"copy", partition=0)
        producer.send_offsets_to_transaction({TP: at}, group)
        producer.commit_transaction(30)
    finally:
        producer.close(10)


def first_offsets_read(cluster: LocalCluster, group: str) -> list[int]:
    """What a new member of `group` reads of IN-0 (it starts at the group's committed offset)."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.spec.bootstrap_servers,
            "group.id": group,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,  # the group's offset stays what the test committed
        }
    )
    try:
        consumer.subscribe([IN])
        read: list[int] = []
        wait_until("records", lambda: read.extend(r.offset for r in consumer.poll(0.5)) or read)
        return read
    finally:
        consumer.close()


def committed(cluster: LocalCluster, group: str) -> OffsetAndMetadata:
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        return admin.list_consumer_group_offsets(group, [TP], require_stable=True)[TP]


def test_a_bare_offset_committed_in_a_transaction_resumes_there(
    cluster: LocalCluster, epoch: int
) -> None:
    commit_in_transaction(cluster, "bare", COMMITTED)
    read = first_offsets_read(cluster, "bare")
    assert read[0] == COMMITTED, f"went back to {read[0]}: records would be copied twice"
    assert committed(cluster, "bare") == OffsetAndMetadata(COMMITTED, leader_epoch=-1)


def test_an_offset_with_its_epoch_is_checked_and_resumes_there(
    cluster: LocalCluster, epoch: int
) -> None:
    commit_in_transaction(cluster, "with-epoch", OffsetAndMetadata(COMMITTED, epoch, "m"))
    assert committed(cluster, "with-epoch") == OffsetAndMetadata(COMMITTED, epoch, "m")
    assert first_offsets_read(cluster, "with-epoch")[0] == COMMITTED


def test_a_plain_commit_without_the_epoch_field_stores_none(
    cluster: LocalCluster, epoch: int
) -> None:
    request = c.OffsetCommitRequest(group_id="plain", member_epoch=-1)
    request.topics.add(name=IN).partitions.add(partition=0, committed_offset=COMMITTED)

    def accepted() -> bool:
        lookup = cg.CoordinatorLookupServiceStub(open_channel(cluster.spec.brokers[0].endpoint))
        find = c.FindCoordinatorRequest(key_type=c.COORDINATOR_KEY_TYPE_GROUP, keys=["plain"])
        location = lookup.FindCoordinator(find, timeout=5).coordinators[0]
        if location.error_code:
            return False
        stub = cg.GroupCoordinatorServiceStub(open_channel(location.endpoint))
        answer = stub.OffsetCommit(request, timeout=10)
        return answer.topics[0].partitions[0].error_code == 0

    wait_until("the commit accepted", accepted)
    assert committed(cluster, "plain") == OffsetAndMetadata(COMMITTED, leader_epoch=-1)
    assert first_offsets_read(cluster, "plain")[0] == COMMITTED
