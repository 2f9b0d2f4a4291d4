"""ListOffsets OFFSET_SPEC_MAX_TIMESTAMP (KIP-734) on the broker's request path.

Goal: the answer is the record with the largest timestamp among those the asker may read — up to
the high watermark under read_uncommitted, the last stable offset under read_committed —, the
first of equals, a transaction marker never; an empty partition answers offset and timestamp -1
with no error; an unset or unknown spec still answers INVALID_REQUEST saying what is accepted.
(tests/unit/log/test_log_max_timestamp.py checks the storage look-up itself against a scan.)

Method: a PartitionHost over real logs in a temp dir, one replica, driven by a metadata image;
transactional data is appended through the log as the produce path does once the coordinator
has verified the partition, and ended by WriteTxnMarkers (as test_broker_transactions.py does).
"""

from __future__ import annotations

import pytest
from broker_host import hosted_partition, two_partition_host  # noqa: F401 (the `host` fixture)

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.list_offsets import list_offsets
from samsa.services.broker.requests.txn_markers import write_txn_markers
from samsa.v1 import broker_pb2 as b
from samsa.v1 import records_pb2

READ_COMMITTED = records_pb2.ISOLATION_LEVEL_READ_COMMITTED


def append(
    host: PartitionHost, timestamps: list[int], *, pid: int = -1, replicate: bool = True
) -> int:
    """Append one batch with these timestamps (transactional when `pid` is set, the coordinator
    having verified it); the high watermark follows unless `replicate` is False. Returns its
    first offset."""
    hosted = hosted_partition(host)
    info = hosted.log.append_as_leader(
        build_batch(
            [b"v"] * len(timestamps),
            timestamps=timestamps,
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=0 if pid >= 0 else -1,
            transactional=pid >= 0,
        ),
        leader_epoch=hosted.leader_epoch,
        now_ms=5,
        allow_transactional=pid >= 0,
    )
    if replicate:
        hosted.advance_high_watermark()
    return info.first_offset


def commit(host: PartitionHost, pid: int, *, now_ms: int) -> None:
    """End `pid`'s transaction with a COMMIT marker stamped `now_ms` (KIP-890: epoch + 1)."""
    request = b.WriteTxnMarkersRequest(
        markers=[
            b.WriteTxnMarkersRequest.TransactionMarker(
                producer_id=pid,
                producer_epoch=1,
                committed=True,
                coordinator_epoch=3,
                topics=[b.WriteTxnMarkersRequest.TopicPartitions(name="t", partitions=[0])],
            )
        ]
    )
    response, waits = write_txn_markers(host, request, now_ms)
    assert waits == [] and response.markers[0].topics[0].partitions[0].error_code == 0


def max_timestamp(
    host: PartitionHost, *, read_committed: bool = False, spec: int = b.OFFSET_SPEC_MAX_TIMESTAMP
) -> b.ListOffsetsResponse.PartitionResponse:
    level = READ_COMMITTED if read_committed else records_pb2.ISOLATION_LEVEL_READ_UNCOMMITTED
    request = b.ListOffsetsRequest(
        isolation_level=level,
        topics=[
            b.ListOffsetsRequest.TopicData(
                name="t", partitions=[b.ListOffsetsRequest.PartitionData(offset_spec=spec)]
            )
        ],
    )
    return list_offsets(host, request).topics[0].partitions[0]


def found(answer: b.ListOffsetsResponse.PartitionResponse) -> tuple[int, int]:
    assert answer.error_code == 0 and not answer.error_message
    return answer.offset, answer.timestamp_ms


def test_the_answer_is_bounded_by_the_high_watermark_or_the_last_stable_offset(host):
    assert append(host, [100, 300, 300]) == 0
    open_at = append(host, [900], pid=7)
    append(host, [500])
    assert found(max_timestamp(host)) == (open_at, 900)
    assert found(max_timestamp(host, read_committed=True)) == (1, 300), "the open one is hidden"
    commit(host, 7, now_ms=5_000)  # a marker newer than every record: never the answer
    assert found(max_timestamp(host)) == (open_at, 900)
    assert found(max_timestamp(host, read_committed=True)) == (open_at, 900)
    late = append(host, [7_000], replicate=False)  # not yet below the high watermark
    assert found(max_timestamp(host)) == (open_at, 900)
    assert found(max_timestamp(host, read_committed=True)) == (open_at, 900)
    hosted_partition(host).advance_high_watermark()
    assert found(max_timestamp(host)) == (late, 7_000)
    answer = max_timestamp(host)
    assert answer.leader_epoch == hosted_partition(host).leader_epoch


def test_an_empty_partition_answers_minus_one_without_an_error(host):
    assert found(max_timestamp(host)) == (-1, -1)
    append(host, [40], replicate=False)
    assert found(max_timestamp(host)) == (-1, -1), "nothing below the high watermark yet"
    hosted_partition(host).advance_high_watermark()
    hosted_partition(host).log.delete_records(1)
    assert found(max_timestamp(host)) == (-1, -1), "nothing left above the log start"


@pytest.mark.parametrize("spec", [b.OFFSET_SPEC_UNSPECIFIED, 9])
def test_an_unset_or_unknown_spec_is_refused_saying_what_is_accepted(host, spec):
    append(host, [100])
    answer = max_timestamp(host, spec=spec)
    assert answer.error_code == ErrorCode.INVALID_REQUEST
    assert (answer.offset, answer.timestamp_ms) == (-1, -1)
    assert "not set or unknown" in answer.error_message
    for name in ("EARLIEST", "LATEST", "TIMESTAMP", "MAX_TIMESTAMP"):
        assert name in answer.error_message


def test_each_answer_carries_the_epoch_of_the_batch_holding_its_offset(host):
    """KIP-320: a consumer that seeks to an offset found by ListOffsets validates its later
    fetches against the epoch that wrote it, so the answer names that epoch, not the leader's
    current one; nothing found answers -1."""
    append(host, [100, 900])  # epoch 0: offsets 0 and 1
    hosted = hosted_partition(host)
    hosted.log.start_leader_epoch(5)
    hosted.log.append_as_leader(
        build_batch([b"v"], timestamps=[300]), leader_epoch=5, now_ms=5
    )  # epoch 5: offset 2
    hosted.advance_high_watermark()

    def epoch(spec: int, timestamp_ms: int = 0) -> tuple[int, int]:
        request = b.ListOffsetsRequest(
            topics=[
                b.ListOffsetsRequest.TopicData(
                    name="t",
                    partitions=[
                        b.ListOffsetsRequest.PartitionData(
                            offset_spec=spec, timestamp_ms=timestamp_ms
                        )
                    ],
                )
            ]
        )
        answer = list_offsets(host, request).topics[0].partitions[0]
        assert answer.error_code == 0, answer.error_message
        return answer.offset, answer.leader_epoch

    assert epoch(b.OFFSET_SPEC_EARLIEST) == (0, 0)
    assert epoch(b.OFFSET_SPEC_LATEST) == (3, 5)
    assert epoch(b.OFFSET_SPEC_MAX_TIMESTAMP) == (1, 0), "the largest timestamp, written in 0"
    assert epoch(b.OFFSET_SPEC_TIMESTAMP, 200) == (1, 0)
    assert epoch(b.OFFSET_SPEC_TIMESTAMP, 950) == (-1, -1), "nothing that late"
    assert max_timestamp(host, spec=9).leader_epoch == -1, "a refusal names no epoch"
