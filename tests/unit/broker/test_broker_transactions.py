"""Transactions on the broker's request paths: read_committed fetches, ListOffsets, markers.

Goal: a read_committed fetch never returns an offset at or above the last stable offset and
lists every aborted transaction overlapping what it returns; read_uncommitted is unchanged;
ListOffsets' latest is the LSO under read_committed; WriteTxnMarkers writes a marker per
partition with the KIP-890 epoch checks (a retry writes nothing, a late marker nothing either);
a producer cannot open a transaction by itself (INVALID_TXN_STATE).

Method: a PartitionHost over real logs in a temp dir, one replica, driven by a metadata image;
transactional data is appended through the log as the produce path will once the coordinator
has verified the partition (`allow_transactional`).
"""

from __future__ import annotations

from broker_host import hosted_partition, two_partition_host  # noqa: F401 (the `host` fixture)

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch, decode_batches
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.describe_producers import describe_producers
from samsa.services.broker.requests.fetch import read_once
from samsa.services.broker.requests.list_offsets import list_offsets
from samsa.services.broker.requests.produce import produce
from samsa.services.broker.requests.txn_markers import write_txn_markers
from samsa.v1 import broker_pb2 as b
from samsa.v1 import records_pb2

READ_COMMITTED = records_pb2.ISOLATION_LEVEL_READ_COMMITTED


def transactional(host: PartitionHost, pid: int, epoch: int, sequence: int, *values: bytes) -> int:
    """Append a verified transactional batch; returns its first offset."""
    partition = hosted_partition(host)
    info = partition.log.append_as_leader(
        build_batch(
            list(values),
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=sequence,
            transactional=True,
        ),
        leader_epoch=partition.leader_epoch,
        now_ms=5,
        allow_transactional=True,
    )
    partition.advance_high_watermark()
    return info.first_offset


def plain(host: PartitionHost, *values: bytes) -> None:
    request = b.ProduceRequest(
        acks=1,
        topics=[
            b.ProduceRequest.TopicData(
                name="t",
                partitions=[
                    b.ProduceRequest.PartitionData(partition=0, records=build_batch(list(values)))
                ],
            )
        ],
    )
    answer, _ = produce(host, request, 5)
    assert answer.topics[0].partitions[0].error_code == 0


def markers(*entries: tuple[int, int, bool], partitions=(0,)) -> b.WriteTxnMarkersRequest:
    return b.WriteTxnMarkersRequest(
        markers=[
            b.WriteTxnMarkersRequest.TransactionMarker(
                producer_id=pid,
                producer_epoch=epoch,
                committed=committed,
                coordinator_epoch=3,
                topics=[b.WriteTxnMarkersRequest.TopicPartitions(name="t", partitions=partitions)],
            )
            for pid, epoch, committed in entries
        ]
    )


def end(host: PartitionHost, request: b.WriteTxnMarkersRequest) -> list[int]:
    response, waits = write_txn_markers(host, request, 6)
    assert waits == [], "one replica: replicated at once"
    return [p.error_code for m in response.markers for t in m.topics for p in t.partitions]


def fetch(host: PartitionHost, offset: int = 0, **options) -> b.FetchResponse.PartitionResponse:
    request = b.FetchRequest(
        topics=[
            b.FetchRequest.TopicData(
                name="t",
                partitions=[b.FetchRequest.PartitionData(partition=0, fetch_offset=offset)],
            )
        ],
        **options,
    )
    response, _, _ = read_once(host, request)
    return response.topics[0].partitions[0]


def values(records: bytes) -> list[bytes | None]:
    return [
        v for batch in decode_batches(records) if not batch.header.is_control for v in batch.values
    ]


def test_read_committed_stops_at_the_first_open_transaction(host):
    plain(host, b"before")
    first = transactional(host, 7, 0, 0, b"t1", b"t2")
    plain(host, b"after")
    committed = fetch(host, isolation_level=READ_COMMITTED)
    assert committed.last_stable_offset == first
    assert committed.high_watermark == first + 3
    assert values(committed.records) == [b"before"]
    assert committed.next_fetch_offset == first
    uncommitted = fetch(host)
    assert uncommitted.last_stable_offset == first, "the LSO is reported at every level"
    assert values(uncommitted.records) == [b"before", b"t1", b"t2", b"after"]


def test_an_abort_lists_the_transaction_and_a_commit_does_not(host):
    aborted_first = transactional(host, 7, 0, 0, b"x")
    committed_first = transactional(host, 8, 0, 0, b"y")
    assert end(host, markers((7, 1, False), (8, 1, True))) == [0, 0]
    answer = fetch(host, isolation_level=READ_COMMITTED)
    assert answer.last_stable_offset == answer.high_watermark == committed_first + 3
    assert [(a.producer_id, a.first_offset) for a in answer.aborted_transactions] == [
        (7, aborted_first)
    ]
    assert values(answer.records) == [b"x", b"y"], "the client drops the aborted records"
    # read_uncommitted gets no aborted list; from past the abort marker there is none to list
    assert list(fetch(host).aborted_transactions) == []
    past = fetch(host, committed_first + 2, isolation_level=READ_COMMITTED)  # the commit marker
    assert list(past.aborted_transactions) == []


def test_decoded_records_leave_out_markers_and_under_read_committed_aborted_records(host):
    transactional(host, 7, 0, 0, b"aborted")
    transactional(host, 8, 0, 0, b"committed")
    plain(host, b"plain")
    end(host, markers((7, 1, False), (8, 1, True)))
    committed = fetch(host, isolation_level=READ_COMMITTED, decode_records=True)
    assert [r.value for r in committed.decoded_records] == [b"committed", b"plain"]
    assert list(committed.aborted_transactions) == [], "decoded records are already filtered"
    uncommitted = fetch(host, decode_records=True)
    assert [r.value for r in uncommitted.decoded_records] == [b"aborted", b"committed", b"plain"]
    assert (
        committed.next_fetch_offset
        == uncommitted.next_fetch_offset
        == hosted_partition(host).log.log_end_offset
    )


def test_list_offsets_latest_is_the_last_stable_offset_under_read_committed(host):
    plain(host, b"a")
    first = transactional(host, 7, 0, 0, b"t")
    request = b.ListOffsetsRequest(
        topics=[
            b.ListOffsetsRequest.TopicData(
                name="t",
                partitions=[
                    b.ListOffsetsRequest.PartitionData(
                        partition=0, offset_spec=b.OFFSET_SPEC_LATEST
                    )
                ],
            )
        ]
    )
    assert list_offsets(host, request).topics[0].partitions[0].offset == first + 1
    request.isolation_level = READ_COMMITTED
    assert list_offsets(host, request).topics[0].partitions[0].offset == first


def test_markers_are_retried_safely_and_late_ones_refused(host):
    transactional(host, 7, 0, 0, b"x")
    assert end(host, markers((7, 1, True))) == [0]
    log_end = hosted_partition(host).log.log_end_offset
    assert end(host, markers((7, 1, True))) == [0], "a retry succeeds"
    assert hosted_partition(host).log.log_end_offset == log_end, "and writes nothing"
    transactional(host, 7, 1, 0, b"next")  # the producer's next transaction, at the new epoch
    assert end(host, markers((7, 1, False))) == [ErrorCode.INVALID_PRODUCER_EPOCH]
    assert fetch(host, isolation_level=READ_COMMITTED).last_stable_offset == log_end


def test_markers_for_partitions_not_led_here_are_refused(host):
    codes = end(
        host,
        b.WriteTxnMarkersRequest(
            markers=[
                b.WriteTxnMarkersRequest.TransactionMarker(
                    producer_id=7,
                    producer_epoch=1,
                    topics=[b.WriteTxnMarkersRequest.TopicPartitions(name="gone", partitions=[0])],
                )
            ]
        ),
    )
    assert codes == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]


def test_a_producer_cannot_open_a_transaction_by_itself(host):
    request = b.ProduceRequest(
        acks=1,
        topics=[
            b.ProduceRequest.TopicData(
                name="t",
                partitions=[
                    b.ProduceRequest.PartitionData(
                        partition=0,
                        records=build_batch(
                            [b"x"],
                            producer_id=3,
                            producer_epoch=0,
                            base_sequence=0,
                            transactional=True,
                        ),
                    )
                ],
            )
        ],
    )
    answer, _ = produce(host, request, 5)
    result = answer.topics[0].partitions[0]
    assert result.error_code == ErrorCode.INVALID_TXN_STATE
    assert "AddPartitionsToTxn" in result.error_message
    assert hosted_partition(host).log.log_end_offset == 0


def test_describe_producers_names_the_open_transaction_that_holds_the_lso(host):
    plain(host, b"a")
    transactional(host, 7, 0, 0, b"x", b"y")
    open_at = transactional(host, 8, 2, 0, b"z")
    end(host, markers((7, 1, True)))
    request = b.DescribeProducersRequest(
        topics=[b.DescribeProducersRequest.TopicRequest(name="t", partitions=[0, 5])]
    )
    answer = describe_producers(host, request, 5 + 2_000).topics[0]
    found, missing = answer.partitions
    producers = {
        p.producer_id: (p.producer_epoch, p.last_sequence, p.current_txn_start_offset)
        for p in found.active_producers
    }
    assert producers == {7: (1, -1, -1), 8: (2, 0, open_at)}
    (open_one,) = [p for p in found.active_producers if p.producer_id == 8]
    assert open_one.last_append_age_ms == 2_000, "by the leader's clock (appended at 5)"
    assert fetch(host, isolation_level=READ_COMMITTED).last_stable_offset == open_at
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_markers_wait_is_bounded_as_a_produce_wait_is():
    # Goal: a WriteTxnMarkers (or stream request) cannot hold a broker task and its answer for
    # as long as the caller names: its replication wait is capped as an acks=all produce's is.
    from samsa.common import limits
    from samsa.services.broker.requests.txn_markers import timeout_s

    huge = b.WriteTxnMarkersRequest(timeout_ms=2**31 - 1)
    assert timeout_s(huge) == limits.produce_timeout_ms_max / 1000
    assert timeout_s(b.WriteTxnMarkersRequest(timeout_ms=1_500)) == 1.5
    assert timeout_s(b.WriteTxnMarkersRequest()) == 30.0


def test_a_markers_request_is_bounded_in_markers_as_in_partitions():
    # Goal: WriteTxnMarkers refuses whole (RESOURCE_EXHAUSTED) a request naming more partitions,
    # or more markers (each answered with an entry, even with no partition), than a request may.
    import grpc

    from samsa.common import limits
    from samsa.services.broker.requests.txn_markers import markers_refusal

    many = b.WriteTxnMarkersRequest(
        markers=[
            b.WriteTxnMarkersRequest.TransactionMarker(producer_id=n)
            for n in range(limits.request_partitions_max + 1)
        ]
    )
    refused = markers_refusal(many)
    assert refused is not None and refused[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert markers_refusal(markers((1, 1, True), partitions=(0, 1))) is None
