"""Goal: the SDK consumer under isolation.level=read_committed never hands out a record of an
aborted transaction, at any isolation level never hands out a transaction marker, shows
committed transactions and plain batches, moves its position past a response whose batches were
all hidden (so it does not fetch them again for ever), and asks for its isolation level in every
Fetch and ListOffsets.

Method: FetchState and decode_records driven with real encoded batches (transactional data,
COMMIT/ABORT markers from the codec) and the aborted transactions a broker would list; the
requests FetchState builds and the driver's ListOffsets request are read back.
"""

from __future__ import annotations

from samsa.client.config import ConsumerConfig
from samsa.client.consumer_driver import list_offsets_request
from samsa.client.consumer_records import decode_records
from samsa.client.fetch_state import FetchState, isolation_level
from samsa.common.record.codec import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    build_batch,
    build_control_batch,
)
from samsa.v1 import broker_pb2, records_pb2

T0 = ("t", 0)
COMMITTER, ABORTER = 7, 8


def txn(base: int, producer_id: int, *values: bytes) -> bytes:
    return build_batch(
        list(values),
        base_offset=base,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=base,
        transactional=True,
    )


def marker(base: int, producer_id: int, kind: int) -> bytes:
    return build_control_batch(
        kind,
        producer_id=producer_id,
        producer_epoch=1,
        coordinator_epoch=0,
        timestamp=0,
        base_offset=base,
    )


# offsets: 0 c1 (committed txn), 1 a1 (aborted txn), 2 plain, 3 c2, 4 a2, 5 COMMIT(7), 6 ABORT(8)
LOG = b"".join(
    [
        txn(0, COMMITTER, b"c1"),
        txn(1, ABORTER, b"a1"),
        build_batch([b"plain"], base_offset=2),
        txn(3, COMMITTER, b"c2"),
        txn(4, ABORTER, b"a2"),
        marker(5, COMMITTER, CONTROL_TYPE_COMMIT),
        marker(6, ABORTER, CONTROL_TYPE_ABORT),
    ]
)
ABORTED = [(ABORTER, 1)]  # what a read_committed fetch of this range lists


def values(records: list) -> list[bytes]:
    return [r.value for r in records]


def consumer_config(isolation: str) -> ConsumerConfig:
    return ConsumerConfig.from_dict(
        {
            "bootstrap.servers": "localhost:9092",
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
        }
    )


def test_read_committed_hides_aborted_records_and_markers() -> None:
    records, _, corrupt = decode_records(T0, LOG, 0, ABORTED)
    assert corrupt is None
    assert values(records) == [b"c1", b"plain", b"c2"]


def test_read_uncommitted_shows_every_data_record_but_never_a_marker() -> None:
    records, _, _ = decode_records(T0, LOG, 0)
    assert values(records) == [b"c1", b"a1", b"plain", b"c2", b"a2"]
    assert all(r.offset < 5 for r in records)


def test_the_filter_sees_batches_before_the_fetch_offset() -> None:
    records, _, _ = decode_records(T0, LOG, 3, ABORTED)
    assert values(records) == [b"c2"], "a2 is still the aborted transaction begun at 1"


def test_the_position_moves_past_a_response_with_nothing_to_show() -> None:
    state = FetchState(consumer_config("read_committed"))
    state.assign([T0])
    state.seek(T0, 4)
    plan = state.fetches_to_send({T0: 1}, 1_000)
    ((node, request),) = plan.requests
    assert request.isolation_level == records_pb2.ISOLATION_LEVEL_READ_COMMITTED
    hidden = b"".join(
        [
            txn(4, ABORTER, b"a2"),
            marker(5, COMMITTER, CONTROL_TYPE_COMMIT),
            marker(6, ABORTER, CONTROL_TYPE_ABORT),
        ]
    )
    response = broker_pb2.FetchResponse(
        topics=[
            broker_pb2.FetchResponse.TopicResponse(
                name="t",
                partitions=[
                    broker_pb2.FetchResponse.PartitionResponse(
                        partition=0,
                        records=hidden,
                        next_fetch_offset=7,
                        high_watermark=7,
                        aborted_transactions=[
                            broker_pb2.FetchResponse.AbortedTransaction(
                                producer_id=ABORTER, first_offset=1
                            )
                        ],
                    )
                ],
            )
        ]
    )
    state.on_fetch_answer(node, response)
    assert state.take(10) == []
    assert state.position(T0) == 7


def test_the_isolation_level_goes_out_in_fetch_and_list_offsets() -> None:
    committed = consumer_config("read_committed")
    uncommitted = consumer_config("read_uncommitted")
    assert isolation_level(committed) == records_pb2.ISOLATION_LEVEL_READ_COMMITTED
    assert isolation_level(uncommitted) == records_pb2.ISOLATION_LEVEL_READ_UNCOMMITTED
    request = list_offsets_request(
        {T0: (broker_pb2.OFFSET_SPEC_LATEST, -1)}, isolation_level(committed)
    )
    assert request.isolation_level == records_pb2.ISOLATION_LEVEL_READ_COMMITTED


def test_the_position_after_the_last_shown_record_skips_the_hidden_ones_after_it() -> None:
    state = FetchState(consumer_config("read_committed"))
    state.assign([T0])
    state.seek(T0, 0)
    ((node, _),) = state.fetches_to_send({T0: 1}, 1_000).requests
    response = broker_pb2.FetchResponse(
        topics=[
            broker_pb2.FetchResponse.TopicResponse(
                name="t",
                partitions=[
                    broker_pb2.FetchResponse.PartitionResponse(
                        partition=0,
                        records=LOG,
                        next_fetch_offset=7,
                        high_watermark=7,
                        aborted_transactions=[
                            broker_pb2.FetchResponse.AbortedTransaction(
                                producer_id=ABORTER, first_offset=1
                            )
                        ],
                    )
                ],
            )
        ]
    )
    state.on_fetch_answer(node, response)
    assert values(state.take(2)) == [b"c1", b"plain"]
    assert state.position(T0) == 3
    assert values(state.take(10)) == [b"c2"]
    assert state.position(T0) == 7, "past the aborted a2 and both markers"
