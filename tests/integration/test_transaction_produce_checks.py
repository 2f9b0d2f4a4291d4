"""Goal: brokers check every transactional produce with the transaction coordinator (KIP-890):
a batch for a partition never added to the transaction is refused, read_committed sees only
committed batches; a produce that asks (transactions version 2) has its leader add the
partition itself; a broker's checks and adds on one AddPartitionsToTxnStream are answered by
correlation id; and a producer's first add right after EndTxn is answered once the last
transaction's markers are written, not with CONCURRENT_TRANSACTIONS.

Method: the cluster of transaction_test_helpers.py (real processes), transactional batches
produced to the partition's leader and read back with both isolation levels through plain
generated stubs (and the SDK's Consumer).
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from cluster_helpers import open_channel, wait_until
from transaction_test_helpers import (
    TOPIC,
    add,
    call,
    describe,
    init_transactions,
    locate,
    log_ends,
    producer,
    transactions_cluster,
)

from samsa.cli.launcher import LocalCluster
from samsa.client import Consumer
from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.v1 import broker_pb2, broker_pb2_grpc, records_pb2
from samsa.v1 import transaction_records_pb2 as t
from samsa.v1 import transactions_pb2 as x
from samsa.v1 import transactions_pb2_grpc as xg

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with transactions_cluster(tmp_path_factory.mktemp("transaction-produce")) as cluster:
        yield cluster


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
    identity = init_transactions(cluster, name)
    me = producer(name, identity)
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
    me = producer(name, init_transactions(cluster, name))
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
    me = producer(name, init_transactions(cluster, name))
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
    who = producer(name, init_transactions(cluster, name))
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
