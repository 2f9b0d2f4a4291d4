"""Goal: a consumed record says what its timestamp is, as Kafka's `ConsumerRecord.timestampType`
does: the producer's (CreateTime) or the broker's, stamped on append (LogAppendTime, every record
of such a batch taking the batch's time), batch by batch within one answer.

Method: decode_records on real encoded batches, one of each kind, back to back as a Fetch answer
carries them.
"""

from __future__ import annotations

from samsa.client import CREATE_TIME, LOG_APPEND_TIME, ConsumerRecord
from samsa.client.consumer_records import decode_records
from samsa.common.record.codec import build_batch


def test_each_record_carries_its_batchs_timestamp_type() -> None:
    created = build_batch([b"a", b"b"], timestamps=[10, 20], base_offset=0)
    appended = build_batch([b"c", b"d"], timestamps=99, base_offset=2, log_append_time=True)
    records, _, corrupt_at = decode_records(("t", 0), created + appended, 0)
    assert corrupt_at is None
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in records] == [
        (0, 10, CREATE_TIME),
        (1, 20, CREATE_TIME),
        (2, 99, LOG_APPEND_TIME),
        (3, 99, LOG_APPEND_TIME),
    ]
    assert (CREATE_TIME, LOG_APPEND_TIME) == (0, 1)  # Kafka's TimestampType ids


def test_a_record_built_by_hand_is_create_time_unless_told() -> None:
    record = ConsumerRecord("t", 0, 5, 1_000, None, b"v", ())
    assert record.timestamp_type == CREATE_TIME
