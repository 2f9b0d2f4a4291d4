"""Goal: the SDK's transactional producer works end to end against a real cluster: records sent
in a committed transaction reach read_committed consumers (all of them, across partitions),
records of an aborted one never do (while read_uncommitted readers see them), offsets sent in a
transaction take effect exactly when it commits, a second instance with the same
transactional.id fences the first (whose commit then fails for good), and misuse (send outside
a transaction, commit without begin) is refused with a clear error. The asyncio pair
(AsyncProducer's transactional calls, AsyncConsumer at read_committed) does the same. The
TransactionStream those calls travel on answers each request in the field of its kind under its
correlation id, and ends with a status saying what to fix on a message it cannot take.

Method: one controller, two brokers, one coordinator (real processes from the launcher, stopped
by PID also on failure); the SDK's Producer, Consumer and Admin, as an application uses them.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import signal
from collections.abc import Iterator

import grpc
import pytest
from cluster_helpers import TRANSACTION_SETTINGS, read_to_end, wait_until

from samsa.cli.launcher import LocalCluster, load_or_create, wait_healthy
from samsa.client import Admin, AsyncConsumer, AsyncProducer, Consumer, NewTopic, Producer
from samsa.client.errors import KafkaError
from samsa.client.group_admin import GroupError
from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.common.record.codec import CONTROL_TYPE_COMMIT as COMMIT
from samsa.common.record.codec import decode_batch, read_control_marker
from samsa.common.record.header import HEADER_BYTES, read_header
from samsa.v1 import transactions_pb2 as x
from samsa.v1 import transactions_pb2_grpc as xg

pytestmark = pytest.mark.timeout(240)

OUT = "sdk-out"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("txn-sdk")
    # Compaction every half second, so a compacted __consumer_offsets is seen within the test.
    settings = TRANSACTION_SETTINGS | {"log.cleaner.backoff.ms": "500"}
    spec = load_or_create(data_dir, 1, 2, settings, coordinators=1)
    cluster = LocalCluster(spec, data_dir)
    try:
        cluster.start_all()
        wait_healthy(cluster, timeout_s=60)
        with Admin({"bootstrap.servers": spec.bootstrap_servers}) as admin:
            admin.create_topics([NewTopic(OUT, num_partitions=2, replication_factor=2)])
        yield cluster
    finally:
        cluster.stop_all()


def transactional(cluster: LocalCluster, transactional_id: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": cluster.spec.bootstrap_servers,
            "transactional.id": transactional_id,
            "linger.ms": 5,
        }
    )


def read_all(cluster: LocalCluster, isolation: str) -> list[bytes]:
    """Every value of OUT, read from the start until the end offsets (at this isolation)."""
    records = read_to_end(cluster.spec.bootstrap_servers, [(OUT, 0), (OUT, 1)], isolation)
    return sorted(value for _, _, value in records)


def test_commit_and_abort_as_read_committed_readers_see_them(cluster: LocalCluster) -> None:
    producer = transactional(cluster, "sdk-app")
    try:
        with pytest.raises(KafkaError) as early:
            producer.send(OUT, b"too-early")
        assert early.value.code == ErrorCode.INVALID_TXN_STATE
        producer.init_transactions(30)
        with pytest.raises(KafkaError, match="begin_transaction"):
            producer.send(OUT, b"no-transaction")
        producer.begin_transaction()
        for index in range(20):
            producer.send(OUT, b"committed-%d" % index, partition=index % 2)
        producer.commit_transaction(30)

        producer.begin_transaction()
        futures = [producer.send(OUT, b"aborted-%d" % i, partition=i % 2) for i in range(6)]
        producer.flush(30)
        assert all(future.result(10).offset >= 0 for future in futures), "written, then aborted"
        producer.abort_transaction(30)

        producer.begin_transaction()
        producer.send(OUT, b"after-abort", partition=1)
        producer.commit_transaction(30)

        for end in (producer.commit_transaction, producer.abort_transaction):
            producer.begin_transaction()  # nothing sent: it ends without the coordinator
            end(30)
        producer.begin_transaction()
        producer.send(OUT, b"after-empty", partition=0)
        producer.commit_transaction(30)
    finally:
        producer.close(10)
    committed = [b"committed-%d" % index for index in range(20)] + [b"after-abort", b"after-empty"]
    wait_until(
        "the commits visible", lambda: read_all(cluster, "read_committed") == sorted(committed), 30
    )
    everything = read_all(cluster, "read_uncommitted")
    assert sorted(committed + [b"aborted-%d" % i for i in range(6)]) == everything


def test_async_producer_transactions_and_async_read_committed(cluster: LocalCluster) -> None:
    bootstrap = cluster.spec.bootstrap_servers
    topic = "sdk-async"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=2)])

    async def read(isolation: str, count: int) -> list[bytes]:
        config = {
            "bootstrap.servers": bootstrap,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
        }
        async with AsyncConsumer(config) as consumer:
            await consumer.assign([(topic, 0)])
            values: list[bytes] = []
            while len(values) < count:
                batch = await consumer.poll(timeout=10)
                assert batch, f"nothing after {len(values)} of {count} records"
                values += [record.value for record in batch]
            assert await consumer.poll(timeout=0.5) == [], "nothing more"
            return values

    async def main() -> None:
        config = {"bootstrap.servers": bootstrap, "transactional.id": "sdk-async-app"}
        async with AsyncProducer(config) as producer:
            await producer.init_transactions(30)
            producer.begin_transaction()
            for index in range(5):
                await producer.send(topic, b"committed-%d" % index, partition=0)
            await producer.send_offsets_to_transaction({(topic, 0): 5}, "sdk-async-group")
            await producer.commit_transaction(30)
            producer.begin_transaction()
            futures = [await producer.send(topic, b"aborted-%d" % i, partition=0) for i in (0, 1)]
            await producer.flush(30)
            offsets = [(await future).offset for future in futures]
            assert all(offset >= 0 for offset in offsets), "written, then aborted"
            await producer.abort_transaction(30)
            producer.begin_transaction()
            await producer.send(topic, b"last", partition=0)
            await producer.commit_transaction(30)
        committed = [b"committed-%d" % index for index in range(5)] + [b"last"]
        assert await read("read_committed", len(committed)) == committed
        everything = await read("read_uncommitted", len(committed) + 2)
        assert sorted(everything) == sorted([*committed, b"aborted-0", b"aborted-1"])

    asyncio.run(main())
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.list_consumer_group_offsets("sdk-async-group")[(topic, 0)].offset == 5


def test_offsets_sent_in_a_transaction_commit_with_it(cluster: LocalCluster) -> None:
    producer = transactional(cluster, "sdk-offsets")
    admin_config = {"bootstrap.servers": cluster.spec.bootstrap_servers}
    admin = Admin(admin_config)
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send(OUT, b"with-offsets", partition=0)
        producer.send_offsets_to_transaction({(OUT, 1): 17}, "sdk-group")
        producer.abort_transaction(30)
        assert admin.list_consumer_group_offsets("sdk-group") == {}
        producer.begin_transaction()
        producer.send(OUT, b"with-offsets-2", partition=0)
        producer.send_offsets_to_transaction({(OUT, 1): 42}, "sdk-group")
        impatient = Admin({**admin_config, "request.timeout.ms": 1000})
        with impatient, pytest.raises(GroupError) as raised:  # the open transaction holds it
            impatient.list_consumer_group_offsets("sdk-group", [(OUT, 1)], True)
        assert raised.value.code == ErrorCode.UNSTABLE_OFFSET_COMMIT
        assert admin.list_consumer_group_offsets("sdk-group", [(OUT, 1)]) == {}  # not waiting
        producer.commit_transaction(30)
        # the markers may still be on their way: require_stable waits for them, nothing else
        stable = admin.list_consumer_group_offsets("sdk-group", [(OUT, 1)], require_stable=True)
        assert stable[(OUT, 1)].offset == 42
    finally:
        producer.close(10)
        admin.close()


def group_records(cluster: LocalCluster, group: bytes) -> tuple[int, int]:
    """How many records of `__consumer_offsets` (every partition, aborted ones too) name
    `group` in their key, and the partitions' end offsets added up."""
    partitions = [("__consumer_offsets", p) for p in range(2)]  # TRANSACTION_SETTINGS
    config = {"bootstrap.servers": cluster.spec.bootstrap_servers, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        consumer.assign(partitions)
        ends = consumer.end_offsets(partitions)
        found = 0
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            found += sum(group in (r.key or b"") for r in consumer.poll(timeout=2))
        return found, sum(ends.values())


def commit_markers_stored(cluster: LocalCluster) -> int:
    """The COMMIT markers in `__consumer_offsets`' segment files, on every broker (read from
    disk: no reader is ever shown a marker). The cleaner swaps segments under the reader: a scan
    that found a file gone is made again (skipping the file would count its markers as gone)."""
    while True:
        try:
            return _commit_markers_in_files(cluster)
        except FileNotFoundError:
            continue


def _commit_markers_in_files(cluster: LocalCluster) -> int:
    count = 0
    for path in cluster.data_dir.glob("broker-*/__consumer_offsets-*/*.log"):
        data = path.read_bytes()
        position = 0
        while len(data) - position >= HEADER_BYTES:
            header = read_header(data, position)
            end = position + header.size_bytes
            if end > len(data):
                break  # a batch being written
            if header.is_control:
                count += read_control_marker(decode_batch(data[position:end]))[0] == COMMIT
            position = end
    return count


def test_a_compacted_consumer_offsets_keeps_each_transactions_offsets_until_superseded(
    cluster: LocalCluster,
) -> None:
    """An exactly-once pipeline commits its offsets in every transaction: compaction removes the
    aborted transactions' and the superseded ones (before, all 60 stayed for ever), then the
    COMMIT markers of the emptied transactions (delete.retention.ms is 0 here), and a
    coordinator that reloads the compacted partition answers the last committed offset."""
    admin = Admin({"bootstrap.servers": cluster.spec.bootstrap_servers})
    admin.alter_configs(
        "__consumer_offsets",
        # Small segments by age: an internal topic's max.message.bytes (and so its
        # segment.bytes) stays at least the coordinators' batch size.
        {"segment.ms": "10", "delete.retention.ms": "0"},
    )
    group = "sdk-compacted-group"
    producer = transactional(cluster, "sdk-compacted")
    try:
        producer.init_transactions(30)
        _, ends_before = group_records(cluster, group.encode())
        for n in range(1, 61):
            producer.begin_transaction()
            producer.send(OUT, b"eo-%d" % n, partition=0)
            producer.send_offsets_to_transaction({(OUT, 1): n}, group)
            if n % 10 == 5:
                producer.abort_transaction(30)
            else:
                producer.commit_transaction(30)
        _, ends = group_records(cluster, group.encode())
        assert ends - ends_before >= 120, "60 offset records and 60 markers were written"
        wait_until(
            "__consumer_offsets compacted (the last segments are not cleaned yet)",
            lambda: group_records(cluster, group.encode())[0] <= 20,
            30,
        )
        # 50 commits wrote 100 COMMIT markers (two replicas); those of the transactions whose
        # records are gone go, but the last segments, never cleaned, keep theirs.
        wait_until(
            "emptied transactions' COMMIT markers removed",
            lambda: commit_markers_stored(cluster) <= 30,
            30,
        )
        cluster.kill("coordinator-1", signal.SIGTERM)
        cluster.start("coordinator-1")
        wait_until(
            "the last committed offset, after a reload of the compacted partition",
            lambda: (
                (found := admin.list_consumer_group_offsets(group).get((OUT, 1))) is not None
                and found.offset == 60
            ),
            60,
        )
    finally:
        producer.close(10)
        admin.close()


def test_a_second_instance_fences_the_first(cluster: LocalCluster) -> None:
    first = transactional(cluster, "sdk-fenced")
    second = transactional(cluster, "sdk-fenced")
    try:
        first.init_transactions(30)
        first.begin_transaction()
        first.send(OUT, b"zombie", partition=0)
        first.flush(30)
        second.init_transactions(30)  # aborts the first one's open transaction
        with pytest.raises(KafkaError) as fenced:
            first.commit_transaction(30)
        assert fenced.value.code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH)
        with pytest.raises(KafkaError):
            first.begin_transaction()
        second.begin_transaction()
        second.send(OUT, b"successor", partition=0)
        second.commit_transaction(30)
    finally:
        first.close(10)
        second.close(10)
    committed = read_all(cluster, "read_committed")
    assert b"successor" in committed and b"zombie" not in committed


def test_a_prepared_transaction_is_completed_by_another_client(cluster: LocalCluster) -> None:
    """KIP-939's shape, as the Spark sink uses it: one producer writes and prepares, an Admin
    (any process) commits or aborts with the identity it handed out; asking again is safe."""
    bootstrap = cluster.spec.bootstrap_servers
    topic = "sdk-prepared"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=2)])
        prepared = []
        for name, count in (("prepared-commit", 4), ("prepared-abort", 3)):
            producer = transactional(cluster, name)
            try:
                producer.init_transactions(30)
                producer.begin_transaction()
                for i in range(count):
                    producer.send(topic, b"%s-%d" % (name.encode(), i), partition=0)
                prepared.append(producer.prepare_transaction(30))
                with pytest.raises(KafkaError, match="complete_transaction"):
                    producer.commit_transaction(5)
            finally:
                producer.close(10)
        assert read_to_end(bootstrap, [(topic, 0)], "read_committed") == [], "still open"
        admin.complete_transaction(prepared[0], commit=True)
        admin.complete_transaction(prepared[0], commit=True)  # a retry: the same answer
        admin.complete_transaction(prepared[1], commit=False)
        # EndTxn answers once the decision is durable (PrepareCommit); the markers follow
        wait_until(
            "the completed commit",
            lambda: (
                admin.describe_transactions(["prepared-commit"])["prepared-commit"].state
                == "CompleteCommit"
            ),
        )
    values = [value for _, _, value in read_to_end(bootstrap, [(topic, 0)], "read_committed")]
    assert values == [b"prepared-commit-%d" % i for i in range(4)]


@contextlib.contextmanager
def open_stream(
    endpoint: str,
) -> Iterator[tuple[queue.Queue, Iterator[x.TransactionStreamResponse]]]:
    """A raw TransactionStream: put requests on the queue, read the answers; ended on exit."""
    requests: queue.Queue[x.TransactionStreamRequest | None] = queue.Queue()

    def outgoing() -> Iterator[x.TransactionStreamRequest]:
        while (item := requests.get()) is not None:
            yield item

    with grpc.insecure_channel(endpoint) as channel:
        answers = xg.TransactionCoordinatorServiceStub(channel).TransactionStream(
            outgoing(), timeout=60
        )
        try:
            yield requests, answers
        finally:
            requests.put(None)
            answers.cancel()


def test_the_transaction_stream_answers_each_kind_under_its_correlation_id(
    cluster: LocalCluster,
) -> None:
    endpoint = cluster.spec.coordinators[0].endpoint  # the one coordinator owns every id
    with grpc.insecure_channel(endpoint) as channel:
        stub = xg.TransactionCoordinatorServiceStub(channel)
        init = wait_until(
            "the transactional id initialized",
            lambda: (
                answer
                if (
                    answer := stub.InitTransactions(
                        x.InitTransactionsRequest(
                            transactional_id="raw-stream", transaction_timeout_ms=60_000
                        ),
                        timeout=10,
                    )
                ).error_code
                == ErrorCode.NONE
                else None
            ),
        )
        producer = x.TransactionalProducer(
            transactional_id="raw-stream",
            producer_id=init.producer_id,
            producer_epoch=init.producer_epoch,
        )
        with open_stream(endpoint) as (requests, answers):
            requests.put(
                x.TransactionStreamRequest(
                    correlation_id=41,
                    add_offsets_to_txn=x.AddOffsetsToTxnRequest(producer=producer, group_id="raw"),
                )
            )
            added = next(answers)
            assert (
                added.correlation_id == 41 and added.WhichOneof("response") == "add_offsets_to_txn"
            )
            assert added.add_offsets_to_txn.error_code == ErrorCode.NONE, added
            requests.put(
                x.TransactionStreamRequest(
                    correlation_id=42, end_txn=x.EndTxnRequest(producer=producer, committed=True)
                )
            )
            ended = next(answers)
            assert ended.correlation_id == 42 and ended.WhichOneof("response") == "end_txn"
            assert ended.end_txn.error_code == ErrorCode.NONE, ended
            assert ended.end_txn.producer_epoch == init.producer_epoch + 1  # bumped (KIP-890)
            # The same EndTxn again (a retry of a lost answer): answered as the unary call would.
            requests.put(
                x.TransactionStreamRequest(
                    correlation_id=43, end_txn=x.EndTxnRequest(producer=producer, committed=True)
                )
            )
            again = next(answers)
            assert again.correlation_id == 43 and again.WhichOneof("response") == "end_txn"
            assert again.end_txn == stub.EndTxn(x.EndTxnRequest(producer=producer, committed=True))
            requests.put(x.TransactionStreamRequest(correlation_id=44))  # no request in it
            with pytest.raises(grpc.RpcError) as ended_stream:
                next(answers)
            assert ended_stream.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "carries no request" in ended_stream.value.details()

        with open_stream(endpoint) as (requests, answers):
            too_many = x.TxnOffsetCommitRequest(producer=producer, group_id="raw")
            topic = too_many.topics.add(name=OUT)
            for partition in range(limits.admin_request_items_max + 1):
                topic.partitions.add(partition=partition, committed_offset=1)
            requests.put(x.TransactionStreamRequest(correlation_id=1, txn_offset_commit=too_many))
            with pytest.raises(grpc.RpcError) as refused:
                next(answers)
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "1001 offsets in one request" in refused.value.details()
