"""Goal: the transaction coordinator serves TransactionCoordinatorService over real gRPC: a
transactional id gets a producer id and epoch; partitions join its transaction (unknown and
internal ones are refused) and a broker's verify_only check sees exactly them at exactly that
identity, or, when the produce asks (KIP-890 part 2), the broker adds them itself; a commit
bumps the epoch and writes a COMMIT marker to every partition (phase 2), then records
COMPLETE_COMMIT; a second InitTransactions fences the first instance; a transaction past its
timeout is aborted and its producer fenced; and when the coordinator owning an open
transaction is killed with SIGKILL, the other loads it from `__transaction_state` and ends it.

Method: one controller, two brokers, two coordinators (real processes from the launcher, stopped
by PID also on failure), `__transaction_state` with 2 partitions at RF 2, a short abort interval.
Requests are plain generated stubs, as a client in any language would send them. Markers are
observed as the partitions' log end offsets (a marker is one offset).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator

import grpc
import pytest
from cluster_helpers import FAST_SETTINGS, close_channels, open_channel, wait_until

from samsa.cli.launcher import LocalCluster, load_or_create, wait_healthy
from samsa.client import Admin, Consumer
from samsa.client.transaction_admin import TransactionError
from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.metadata.coordinators import GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE
from samsa.v1 import broker_pb2, broker_pb2_grpc, controller_pb2, controller_pb2_grpc, records_pb2
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import coordinator_pb2_grpc as cg
from samsa.v1 import transaction_records_pb2 as t
from samsa.v1 import transactions_pb2 as x
from samsa.v1 import transactions_pb2_grpc as xg

pytestmark = pytest.mark.timeout(240)

TOPIC = "payments"
SETTINGS = dict(FAST_SETTINGS) | {
    "offsets.topic.num.partitions": "2",
    "transaction.state.log.num.partitions": "2",
    "coordinator.session.timeout.ms": "3000",
    "coordinator.heartbeat.interval.ms": "300",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "300",
}
RETRIABLE = {
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.CONCURRENT_TRANSACTIONS,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("transactions")
    spec = load_or_create(data_dir, 1, 2, SETTINGS, coordinators=2)
    cluster = LocalCluster(spec, data_dir)
    try:
        cluster.start_all()
        wait_healthy(cluster, timeout_s=60)
        stub = controller_pb2_grpc.ControllerServiceStub(open_channel(spec.controllers[0].endpoint))
        topic = controller_pb2.CreateTopicsRequest.Topic(
            name=TOPIC, num_partitions=2, replication_factor=2
        )
        answer = stub.CreateTopics(controller_pb2.CreateTopicsRequest(topics=[topic]), timeout=10)
        assert answer.topics[0].error_code == ErrorCode.NONE, answer
        yield cluster
    finally:
        close_channels()
        cluster.stop_all()


def locate(cluster: LocalCluster, transactional_id: str) -> c.CoordinatorLocation:
    stub = cg.CoordinatorLookupServiceStub(open_channel(cluster.spec.brokers[0].endpoint))

    def found() -> c.CoordinatorLocation | None:
        request = c.FindCoordinatorRequest(key_type=TRANSACTION_KEY_TYPE, keys=[transactional_id])
        location = stub.FindCoordinator(request, timeout=5).coordinators[0]
        return None if location.error_code else location

    return wait_until(f"a coordinator for {transactional_id}", found, timeout_s=30)


def call(cluster: LocalCluster, transactional_id: str, method: str, request: object) -> object:
    """Send `request` to the id's coordinator, retrying retriable answers (finding it again)."""

    def answered() -> object | None:
        location = locate(cluster, transactional_id)
        stub = xg.TransactionCoordinatorServiceStub(open_channel(location.endpoint))
        try:
            response = getattr(stub, method)(request, timeout=10)
        except grpc.RpcError:
            return None
        if method == "DescribeTransactions":
            code = response.transactions[0].error_code
        else:
            code = getattr(response, "error_code", ErrorCode.NONE)
        return None if code in RETRIABLE else response

    return wait_until(f"{method} for {transactional_id}", answered, timeout_s=60)


def producer(
    transactional_id: str, identity: x.InitTransactionsResponse
) -> x.TransactionalProducer:
    return x.TransactionalProducer(
        transactional_id=transactional_id,
        producer_id=identity.producer_id,
        producer_epoch=identity.producer_epoch,
    )


def add(who: x.TransactionalProducer, *partitions: int, topic: str = TOPIC, verify: bool = False):
    return x.AddPartitionsToTxnRequest(
        producer=who,
        partitions=[c.TopicPartitions(topic=topic, partitions=list(partitions))],
        verify_only=verify,
    )


def describe(cluster: LocalCluster, transactional_id: str) -> x.DescribedTransaction:
    request = x.DescribeTransactionsRequest(transactional_ids=[transactional_id])
    return call(cluster, transactional_id, "DescribeTransactions", request).transactions[0]  # type: ignore[attr-defined]


def log_ends(cluster: LocalCluster) -> list[int]:
    """The log end offset (read_uncommitted LATEST) of each partition of TOPIC."""
    ends = []
    for partition in (0, 1):
        for broker in cluster.spec.brokers:
            stub = broker_pb2_grpc.BrokerServiceStub(open_channel(broker.endpoint))
            request = broker_pb2.ListOffsetsRequest(
                topics=[
                    broker_pb2.ListOffsetsRequest.TopicData(
                        name=TOPIC,
                        partitions=[
                            broker_pb2.ListOffsetsRequest.PartitionData(
                                partition=partition, offset_spec=broker_pb2.OFFSET_SPEC_LATEST
                            )
                        ],
                    )
                ]
            )
            answer = stub.ListOffsets(request, timeout=5).topics[0].partitions[0]
            if answer.error_code == ErrorCode.NONE:
                ends.append(answer.offset)
                break
        else:
            raise AssertionError(f"no leader answered for {TOPIC}-{partition}")
    return ends


def test_a_commit_writes_markers_and_a_second_instance_fences_the_first(
    cluster: LocalCluster,
) -> None:
    name = "payments-app"
    first = call(
        cluster,
        name,
        "InitTransactions",
        x.InitTransactionsRequest(transactional_id=name, transaction_timeout_ms=60_000),
    )
    assert first.error_code == ErrorCode.NONE and first.producer_id >= 0, first  # type: ignore[attr-defined]
    assert first.producer_epoch == 0  # type: ignore[attr-defined]
    me = producer(name, first)  # type: ignore[arg-type]

    refused = call(cluster, name, "AddPartitionsToTxn", add(me, 0, 7))
    assert refused.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, refused  # type: ignore[attr-defined]
    internal = call(cluster, name, "AddPartitionsToTxn", add(me, 0, topic="__consumer_offsets"))
    assert internal.error_code == ErrorCode.INVALID_REQUEST, internal  # type: ignore[attr-defined]
    assert describe(cluster, name).state == t.TRANSACTION_STATE_EMPTY, "nothing was added"

    added = call(cluster, name, "AddPartitionsToTxn", add(me, 0, 1))
    assert added.error_code == ErrorCode.NONE, added  # type: ignore[attr-defined]
    verified = call(cluster, name, "AddPartitionsToTxn", add(me, 1, verify=True))
    assert verified.error_code == ErrorCode.NONE, verified  # type: ignore[attr-defined]
    assert [r.error_code for r in verified.results] == [ErrorCode.NONE]  # type: ignore[attr-defined]
    stranger = x.TransactionalProducer(
        transactional_id=name, producer_id=me.producer_id, producer_epoch=me.producer_epoch + 1
    )
    not_it = call(cluster, name, "AddPartitionsToTxn", add(stranger, 1, verify=True))
    assert not_it.error_code == ErrorCode.INVALID_TXN_STATE, not_it  # type: ignore[attr-defined]

    described = describe(cluster, name)
    assert described.state == t.TRANSACTION_STATE_ONGOING
    assert [(p.topic, list(p.partitions)) for p in described.partitions] == [(TOPIC, [0, 1])]
    listed = call(cluster, name, "ListTransactions", x.ListTransactionsRequest())
    assert name in [entry.transactional_id for entry in listed.transactions]  # type: ignore[attr-defined]

    before = log_ends(cluster)
    ended = call(cluster, name, "EndTxn", x.EndTxnRequest(producer=me, committed=True))
    assert ended.error_code == ErrorCode.NONE, ended  # type: ignore[attr-defined]
    assert (ended.producer_id, ended.producer_epoch) == (me.producer_id, 1)  # type: ignore[attr-defined]
    wait_until(
        "COMPLETE_COMMIT",
        lambda: describe(cluster, name).state == t.TRANSACTION_STATE_COMPLETE_COMMIT,
        30,
    )
    assert log_ends(cluster) == [end + 1 for end in before], "one COMMIT marker per partition"
    retry = call(cluster, name, "EndTxn", x.EndTxnRequest(producer=me, committed=True))
    assert retry.error_code == ErrorCode.NONE, "a retried EndTxn answers the same"  # type: ignore[attr-defined]
    assert retry.producer_epoch == 1  # type: ignore[attr-defined]

    second = call(
        cluster,
        name,
        "InitTransactions",
        x.InitTransactionsRequest(transactional_id=name, transaction_timeout_ms=60_000),
    )
    assert (second.producer_id, second.producer_epoch) == (me.producer_id, 2)  # type: ignore[attr-defined]
    after_commit = x.TransactionalProducer(
        transactional_id=name, producer_id=me.producer_id, producer_epoch=1
    )
    fenced = call(cluster, name, "AddPartitionsToTxn", add(after_commit, 0))
    assert fenced.error_code == ErrorCode.PRODUCER_FENCED, fenced  # type: ignore[attr-defined]


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(
    cluster: LocalCluster,
) -> None:
    name = "slow-app"
    identity = call(
        cluster,
        name,
        "InitTransactions",
        x.InitTransactionsRequest(transactional_id=name, transaction_timeout_ms=1_000),
    )
    me = producer(name, identity)  # type: ignore[arg-type]
    before = log_ends(cluster)
    assert call(cluster, name, "AddPartitionsToTxn", add(me, 1)).error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    aborted = wait_until(
        "the timed-out transaction aborted",
        lambda: (d := describe(cluster, name)).state == t.TRANSACTION_STATE_COMPLETE_ABORT and d,
        30,
    )
    assert aborted.producer_epoch == me.producer_epoch + 1, "the abort bumped the epoch"
    assert log_ends(cluster)[1] == before[1] + 1, "one ABORT marker"
    late = call(cluster, name, "EndTxn", x.EndTxnRequest(producer=me, committed=True))
    assert late.error_code == ErrorCode.PRODUCER_FENCED, late  # type: ignore[attr-defined]


def test_admin_and_cli_list_and_describe_transactions(cluster: LocalCluster) -> None:
    name = "listed-app"
    identity = call(
        cluster,
        name,
        "InitTransactions",
        x.InitTransactionsRequest(transactional_id=name, transaction_timeout_ms=60_000),
    )
    me = producer(name, identity)  # type: ignore[arg-type]
    assert call(cluster, name, "AddPartitionsToTxn", add(me, 1)).error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        ongoing = admin.list_transactions(states=["Ongoing"])
        assert [(t.transactional_id, t.state) for t in ongoing] == [(name, "Ongoing")]
        assert name in [t.transactional_id for t in admin.list_transactions()]
        assert admin.list_transactions(producer_ids=[me.producer_id])[0].transactional_id == name
        described = admin.describe_transactions([name])[name]
        assert (described.state, described.producer_id, described.partitions) == (
            "Ongoing",
            me.producer_id,
            ((TOPIC, 1),),
        )
        with pytest.raises(TransactionError) as unknown:
            admin.describe_transactions(["never-seen"])
        assert unknown.value.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    bootstrap = cluster.spec.bootstrap_servers
    cli = [sys.executable, "-m", "samsa.cli.main", "transactions"]
    listed = subprocess.run(
        [*cli, "list", "--state", "ongoing", "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert name in listed.stdout and "Ongoing" in listed.stdout
    shown = subprocess.run(
        [*cli, "describe", name, "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert f"partitions {TOPIC}:1" in shown.stdout
    ended = call(cluster, name, "EndTxn", x.EndTxnRequest(producer=me, committed=False))
    assert ended.error_code == ErrorCode.NONE  # type: ignore[attr-defined]


def test_an_open_transaction_survives_its_coordinator_killed(cluster: LocalCluster) -> None:
    name = "survivor"
    identity = call(
        cluster,
        name,
        "InitTransactions",
        x.InitTransactionsRequest(transactional_id=name, transaction_timeout_ms=120_000),
    )
    me = producer(name, identity)  # type: ignore[arg-type]
    assert call(cluster, name, "AddPartitionsToTxn", add(me, 0)).error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    owner = locate(cluster, name).coordinator_id
    cluster.kill(f"coordinator-{owner}", signal.SIGKILL)
    wait_until(
        "another coordinator for the id",
        lambda: locate(cluster, name).coordinator_id != owner,
        30,
    )
    described = describe(cluster, name)
    assert described.state == t.TRANSACTION_STATE_ONGOING, "loaded from __transaction_state"
    assert (described.producer_id, described.producer_epoch) == (me.producer_id, 0)
    before = log_ends(cluster)
    ended = call(cluster, name, "EndTxn", x.EndTxnRequest(producer=me, committed=False))
    assert ended.error_code == ErrorCode.NONE, ended  # type: ignore[attr-defined]
    wait_until(
        "COMPLETE_ABORT",
        lambda: describe(cluster, name).state == t.TRANSACTION_STATE_COMPLETE_ABORT,
        30,
    )
    assert log_ends(cluster)[0] == before[0] + 1


def group_call(cluster: LocalCluster, group_id: str, method: str, request: object) -> object:
    """Send `request` to the group's coordinator (TxnOffsetCommit, OffsetFetch), retrying
    while it moves or loads."""
    lookup = cg.CoordinatorLookupServiceStub(open_channel(cluster.spec.brokers[0].endpoint))

    def answered() -> object | None:
        find = c.FindCoordinatorRequest(key_type=GROUP_KEY_TYPE, keys=[group_id])
        location = lookup.FindCoordinator(find, timeout=5).coordinators[0]
        if location.error_code:
            return None
        channel = open_channel(location.endpoint)
        try:
            if method == "OffsetFetch":
                response = cg.GroupCoordinatorServiceStub(channel).OffsetFetch(request, timeout=10)
                code = response.error_code
            else:
                response = xg.TransactionCoordinatorServiceStub(channel).TxnOffsetCommit(
                    request, timeout=10
                )
                code = response.results[0].error_code
        except grpc.RpcError:
            return None
        return None if code in RETRIABLE else response

    return wait_until(f"{method} for {group_id}", answered, timeout_s=60)


def committed_offset(cluster: LocalCluster, group_id: str) -> tuple[int, int]:
    """(offset, error code) of TOPIC-0 for the group, with require_stable."""
    request = c.OffsetFetchRequest(
        group_id=group_id,
        topics=[c.TopicPartitions(topic=TOPIC, partitions=[0])],
        require_stable=True,
    )
    answer = group_call(cluster, group_id, "OffsetFetch", request).topics[0].partitions[0]  # type: ignore[attr-defined]
    return answer.committed_offset, answer.error_code


def offsets_in_transaction(
    cluster: LocalCluster, name: str, group_id: str, offset: int
) -> x.TransactionalProducer:
    """Init `name`, add the group's offsets to its transaction and commit `offset` in it."""
    identity = call(
        cluster,
        name,
        "InitTransactions",
        x.InitTransactionsRequest(transactional_id=name, transaction_timeout_ms=60_000),
    )
    me = producer(name, identity)  # type: ignore[arg-type]
    added = call(
        cluster, name, "AddOffsetsToTxn", x.AddOffsetsToTxnRequest(producer=me, group_id=group_id)
    )
    assert added.error_code == ErrorCode.NONE, added  # type: ignore[attr-defined]
    request = x.TxnOffsetCommitRequest(
        producer=me, group_id=group_id, member_id="", member_epoch=-1
    )
    request.topics.add(name=TOPIC).partitions.add(partition=0, committed_offset=offset)
    answer = group_call(cluster, group_id, "TxnOffsetCommit", request)
    assert [r.error_code for r in answer.results] == [ErrorCode.NONE], answer  # type: ignore[attr-defined]
    return me


def test_offsets_committed_in_a_transaction_appear_at_its_commit_only(
    cluster: LocalCluster,
) -> None:
    me = offsets_in_transaction(cluster, "copier", "copy-group", 42)
    assert committed_offset(cluster, "copy-group") == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    ended = call(
        cluster, me.transactional_id, "EndTxn", x.EndTxnRequest(producer=me, committed=True)
    )
    assert ended.error_code == ErrorCode.NONE, ended  # type: ignore[attr-defined]
    wait_until(
        "the offset committed",
        lambda: committed_offset(cluster, "copy-group") == (42, ErrorCode.NONE),
        30,
    )

    aborted = offsets_in_transaction(cluster, "copier", "copy-group", 99)
    assert committed_offset(cluster, "copy-group") == (42, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    ended = call(cluster, "copier", "EndTxn", x.EndTxnRequest(producer=aborted, committed=False))
    assert ended.error_code == ErrorCode.NONE, ended  # type: ignore[attr-defined]
    wait_until(
        "the abort resolved",
        lambda: committed_offset(cluster, "copy-group") == (42, ErrorCode.NONE),
        30,
    )


def test_offsets_of_a_group_not_added_to_the_transaction_are_refused(
    cluster: LocalCluster,
) -> None:
    """KIP-890 for offsets: TxnOffsetCommit without AddOffsetsToTxn would leave offsets that no
    marker resolves (the group's partition is not in the transaction): the group coordinator
    asks the transaction coordinator first and refuses with INVALID_TXN_STATE, writing
    nothing (the group's offset stays stable)."""
    name, group_id = "no-add-app", "no-add-group"
    init = x.InitTransactionsRequest(transactional_id=name, transaction_timeout_ms=60_000)
    me = producer(name, call(cluster, name, "InitTransactions", init))  # type: ignore[arg-type]
    request = x.TxnOffsetCommitRequest(
        producer=me, group_id=group_id, member_id="", member_epoch=-1
    )
    request.topics.add(name=TOPIC).partitions.add(partition=0, committed_offset=7)
    answer = group_call(cluster, group_id, "TxnOffsetCommit", request).results[0]  # type: ignore[attr-defined]
    assert answer.error_code == ErrorCode.INVALID_TXN_STATE, answer
    assert "AddOffsetsToTxn" in answer.error_message
    assert committed_offset(cluster, group_id) == (-1, ErrorCode.NONE), "nothing pending"


def test_pending_offsets_survive_the_group_coordinator_killed(cluster: LocalCluster) -> None:
    for name in sorted(cluster.killed):
        if name.startswith("coordinator-"):
            cluster.start(name)  # an earlier test killed one: two are needed here
    lookup = cg.CoordinatorLookupServiceStub(open_channel(cluster.spec.brokers[0].endpoint))

    def owner() -> int | None:
        find = c.FindCoordinatorRequest(key_type=GROUP_KEY_TYPE, keys=["moving-group"])
        location = lookup.FindCoordinator(find, timeout=5).coordinators[0]
        return None if location.error_code else location.coordinator_id

    wait_until(
        "both coordinators registered",
        lambda: (
            len(
                {
                    c.coordinator_id
                    for c in lookup.FindCoordinator(
                        c.FindCoordinatorRequest(
                            key_type=GROUP_KEY_TYPE, keys=[f"g{i}" for i in range(16)]
                        ),
                        timeout=5,
                    ).coordinators
                    if not c.error_code
                }
            )
            == 2
        ),
        60,
    )
    me = offsets_in_transaction(cluster, "mover", "moving-group", 7)
    first = wait_until("the group's coordinator", owner, 30)
    cluster.kill(f"coordinator-{first}", signal.SIGKILL)
    wait_until("another coordinator for the group", lambda: owner() not in (None, first), 30)
    assert committed_offset(cluster, "moving-group") == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT), (
        "the pending offset was loaded from __consumer_offsets"
    )
    ended = call(cluster, "mover", "EndTxn", x.EndTxnRequest(producer=me, committed=True))
    assert ended.error_code == ErrorCode.NONE, ended  # type: ignore[attr-defined]
    wait_until(
        "the offset committed at the new owner",
        lambda: committed_offset(cluster, "moving-group") == (7, ErrorCode.NONE),
        30,
    )


def leader_stub(cluster: LocalCluster, partition: int) -> broker_pb2_grpc.BrokerServiceStub:
    """The stub of the broker leading TOPIC-`partition` (the one that answers ListOffsets)."""
    request = broker_pb2.ListOffsetsRequest(
        topics=[
            broker_pb2.ListOffsetsRequest.TopicData(
                name=TOPIC,
                partitions=[
                    broker_pb2.ListOffsetsRequest.PartitionData(
                        partition=partition, offset_spec=broker_pb2.OFFSET_SPEC_LATEST
                    )
                ],
            )
        ]
    )
    for broker in cluster.spec.brokers:
        stub = broker_pb2_grpc.BrokerServiceStub(open_channel(broker.endpoint))
        if stub.ListOffsets(request, timeout=5).topics[0].partitions[0].error_code == 0:
            return stub
    raise AssertionError(f"no leader for {TOPIC}-{partition}")


def produce_txn(
    cluster: LocalCluster,
    me: x.TransactionalProducer,
    partition: int,
    values: list[bytes],
    seq: int,
    *,
    add_partitions: bool = False,
) -> broker_pb2.ProduceResponse.PartitionResponse:
    batch = build_batch(
        values,
        producer_id=me.producer_id,
        producer_epoch=me.producer_epoch,
        base_sequence=seq,
        transactional=True,
    )
    request = broker_pb2.ProduceRequest(
        acks=-1,
        transactional_id=me.transactional_id,
        add_partitions_to_txn=add_partitions,
        topics=[
            broker_pb2.ProduceRequest.TopicData(
                name=TOPIC,
                partitions=[
                    broker_pb2.ProduceRequest.PartitionData(partition=partition, records=batch)
                ],
            )
        ],
    )
    return leader_stub(cluster, partition).Produce(request, timeout=15).topics[0].partitions[0]


def read(cluster: LocalCluster, partition: int, start: int, committed: bool) -> list[bytes]:
    isolation = (
        records_pb2.ISOLATION_LEVEL_READ_COMMITTED
        if committed
        else records_pb2.ISOLATION_LEVEL_READ_UNCOMMITTED
    )
    request = broker_pb2.FetchRequest(
        max_wait_ms=0,
        isolation_level=isolation,
        decode_records=True,
        topics=[
            broker_pb2.FetchRequest.TopicData(
                name=TOPIC,
                partitions=[
                    broker_pb2.FetchRequest.PartitionData(partition=partition, fetch_offset=start)
                ],
            )
        ],
    )
    answer = leader_stub(cluster, partition).Fetch(request, timeout=10).topics[0].partitions[0]
    assert answer.error_code == 0, answer.error_message
    return [record.value for record in answer.decoded_records]


def test_transactional_produce_is_verified_and_read_committed_sees_only_commits(
    cluster: LocalCluster,
) -> None:
    name = "verified-writer"
    identity = call(
        cluster,
        name,
        "InitTransactions",
        x.InitTransactionsRequest(transactional_id=name, transaction_timeout_ms=60_000),
    )
    me = producer(name, identity)  # type: ignore[arg-type]
    start = log_ends(cluster)
    assert call(cluster, name, "AddPartitionsToTxn", add(me, 0)).error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    written = produce_txn(cluster, me, 0, [b"a", b"b"], 0)
    assert written.error_code == ErrorCode.NONE, written.error_message
    stray = produce_txn(cluster, me, 1, [b"stray"], 0)
    assert stray.error_code == ErrorCode.INVALID_TXN_STATE, "partition 1 was never added"
    assert "not added" in stray.error_message or "AddPartitionsToTxn" in stray.error_message
    more = produce_txn(cluster, me, 0, [b"c"], 2)  # the transaction is open there: no new check
    assert more.error_code == ErrorCode.NONE, more.error_message
    assert read(cluster, 0, start[0], committed=False) == [b"a", b"b", b"c"]
    assert read(cluster, 0, start[0], committed=True) == [], "held back at the LSO"
    ended = call(cluster, name, "EndTxn", x.EndTxnRequest(producer=me, committed=True))
    assert ended.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    wait_until(
        "the commit visible to read_committed",
        lambda: read(cluster, 0, start[0], committed=True) == [b"a", b"b", b"c"],
        30,
    )

    late = produce_txn(cluster, me, 0, [b"late"], 3)
    assert late.error_code != ErrorCode.NONE, "a batch of the ended transaction never lands"
    nxt = x.TransactionalProducer(
        transactional_id=name,
        producer_id=ended.producer_id,
        producer_epoch=ended.producer_epoch,  # type: ignore[attr-defined]
    )
    assert call(cluster, name, "AddPartitionsToTxn", add(nxt, 0)).error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    assert produce_txn(cluster, nxt, 0, [b"doomed"], 0).error_code == ErrorCode.NONE
    aborted = call(cluster, name, "EndTxn", x.EndTxnRequest(producer=nxt, committed=False))
    assert aborted.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    wait_until(
        "the abort's marker",
        lambda: describe(cluster, name).state == t.TRANSACTION_STATE_COMPLETE_ABORT,
        30,
    )
    assert read(cluster, 0, start[0], committed=False)[-1] == b"doomed"
    assert read(cluster, 0, start[0], committed=True) == [b"a", b"b", b"c"], "never shown"

    for isolation, expected in (
        ("read_committed", [b"a", b"b", b"c"]),
        ("read_uncommitted", [b"a", b"b", b"c", b"doomed"]),
    ):
        config = {
            "bootstrap.servers": cluster.spec.bootstrap_servers,
            "isolation.level": isolation,
        }
        with Consumer(config) as consumer:
            consumer.assign([(TOPIC, 0)])
            consumer.seek((TOPIC, 0), start[0])
            got: list[bytes] = []
            while len(got) < len(expected):
                records = consumer.poll(timeout=10)
                assert records, f"{isolation}: read {got} only"
                got += [record.value for record in records]
            assert got == expected, isolation
            end = log_ends(cluster)[0]
            wait_until(
                f"{isolation}: the position past the markers",
                lambda consumer=consumer, end=end: (
                    consumer.poll(timeout=0.2) == [] and consumer.position((TOPIC, 0)) == end
                ),
                15,
            )


def test_a_leader_adds_the_partitions_itself_when_the_produce_asks(
    cluster: LocalCluster,
) -> None:
    """Transactions version 2 (KIP-890 part 2): a produce with add_partitions_to_txn needs no
    AddPartitionsToTxn. Its leader adds the partition to the open transaction before the
    append, the commit's marker ends it there, and read_committed sees it. Back to back, the
    next transaction's first batch (at the bumped epoch) is added once the last one's markers
    are written; a late batch of an ended transaction (its old epoch) is never added nor
    written, even though it asks."""
    name = "implicit-add-writer"
    init = x.InitTransactionsRequest(transactional_id=name, transaction_timeout_ms=60_000)
    me = producer(name, call(cluster, name, "InitTransactions", init))  # type: ignore[arg-type]
    start = log_ends(cluster)
    committed: list[bytes] = []
    for round_number in range(3):
        values = [f"v{round_number}-{i}".encode() for i in range(2)]
        written = produce_txn(cluster, me, 1, values, 0, add_partitions=True)
        assert written.error_code == ErrorCode.NONE, written.error_message
        described = describe(cluster, name)
        assert described.state == t.TRANSACTION_STATE_ONGOING, described
        assert [(p.topic, list(p.partitions)) for p in described.partitions] == [(TOPIC, [1])]
        ended = call(cluster, name, "EndTxn", x.EndTxnRequest(producer=me, committed=True))
        assert ended.error_code == ErrorCode.NONE, ended  # type: ignore[attr-defined]
        committed += values
        old, me = me, producer(name, ended)  # type: ignore[arg-type]
        assert me.producer_epoch == old.producer_epoch + 1, "the epoch moves at every end"
    wait_until(
        "every commit visible to read_committed",
        lambda: read(cluster, 1, start[1], committed=True) == committed,
        30,
    )
    late = produce_txn(cluster, old, 1, [b"late"], 2, add_partitions=True)
    assert late.error_code != ErrorCode.NONE, "a batch of an ended transaction never lands"
    assert describe(cluster, name).state != t.TRANSACTION_STATE_ONGOING, "nor opens one"
    assert read(cluster, 1, start[1], committed=False)[-1] != b"late"


def test_brokers_checks_and_adds_on_one_stream_are_answered_by_correlation_id(
    cluster: LocalCluster,
) -> None:
    """AddPartitionsToTxnStream, as a broker uses it: a check before any add answers
    INVALID_TXN_STATE, an add answers NONE, and checks after it confirm that partition and
    refuse another, each by its own correlation id; a request the unary call would refuse (too
    many partitions) ends the stream with the same status."""
    name = "streamed-checks"
    init = x.InitTransactionsRequest(transactional_id=name, transaction_timeout_ms=60_000)
    me = producer(name, call(cluster, name, "InitTransactions", init))  # type: ignore[arg-type]
    channel = open_channel(locate(cluster, name).endpoint)
    stub = xg.TransactionCoordinatorServiceStub(channel)

    def stream(*requests: x.AddPartitionsToTxnRequest) -> dict[int, object]:
        items = [
            x.AddPartitionsToTxnStreamRequest(correlation_id=10 + i, request=request)
            for i, request in enumerate(requests)
        ]
        answers = stub.AddPartitionsToTxnStream(iter(items), timeout=15)
        return {answer.correlation_id: answer.response for answer in answers}

    try:
        (before,) = stream(add(me, 0, verify=True)).values()
        assert before.error_code == ErrorCode.INVALID_TXN_STATE, "no open transaction yet"  # type: ignore[attr-defined]
        (added,) = stream(add(me, 0)).values()
        assert added.error_code == ErrorCode.NONE, added  # type: ignore[attr-defined]
        answers = stream(add(me, 0, verify=True), add(me, 1, verify=True))
        assert sorted(answers) == [10, 11]
        assert answers[10].results[0].error_code == ErrorCode.NONE  # type: ignore[attr-defined]
        assert answers[11].results[0].error_code == ErrorCode.INVALID_TXN_STATE  # type: ignore[attr-defined]
        huge = x.AddPartitionsToTxnRequest(producer=me)
        huge.partitions.add(topic=TOPIC, partitions=range(limits.admin_request_items_max + 1))
        with pytest.raises(grpc.RpcError) as refused:
            stream(huge)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        channel.close()
    aborted = call(cluster, name, "EndTxn", x.EndTxnRequest(producer=me, committed=False))
    assert aborted.error_code == ErrorCode.NONE, aborted  # type: ignore[attr-defined]
    wait_until(  # its marker is written before the next test measures the log ends
        "the abort complete",
        lambda: describe(cluster, name).state == t.TRANSACTION_STATE_COMPLETE_ABORT,
        30,
    )


def test_the_next_transaction_is_answered_when_the_last_ones_markers_are_written(
    cluster: LocalCluster,
) -> None:
    """A producer's first AddPartitionsToTxn right after EndTxn meets phase 2 of the transaction
    it just ended. The coordinator holds it until phase 2 is done (SETTLE_WAIT_S) instead of
    answering CONCURRENT_TRANSACTIONS, so a client does not pay a retry backoff on every
    transaction: every call below is answered NONE the first time."""
    name = "back-to-back-app"
    init = x.InitTransactionsRequest(transactional_id=name, transaction_timeout_ms=60_000)
    who = producer(name, call(cluster, name, "InitTransactions", init))  # type: ignore[arg-type]
    channel = open_channel(locate(cluster, name).endpoint)
    stub = xg.TransactionCoordinatorServiceStub(channel)
    try:
        for _ in range(5):
            added = stub.AddPartitionsToTxn(add(who, 0, 1), timeout=10)
            assert added.error_code == ErrorCode.NONE, added.error_message
            ended = stub.EndTxn(x.EndTxnRequest(producer=who, committed=True), timeout=10)
            assert ended.error_code == ErrorCode.NONE, ended.error_message
            who = producer(name, ended)  # type: ignore[arg-type]
    finally:
        channel.close()
