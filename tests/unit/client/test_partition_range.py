"""Goal: `PartitionRangeReader.chunks` yields the answers from A up to B in order, following each
answer's next offset; it asks for the next answer while the caller holds the current one, never
more than one fetch at a time, and stops fetching when the caller stops reading; an answer with
no batches is asked again until request.timeout.ms, then REQUEST_TIMED_OUT. An empty range reads
nothing; a batch that cannot be decoded is raised by `records`, never skipped.

Method: the reader's `_fetch_once` is replaced by a fake log (one batch-sized byte string per
offset) that records what was asked and how many fetches overlapped. No cluster, no network.
"""

from __future__ import annotations

import threading
import time

import pytest

from samsa.client.errors import KafkaError
from samsa.client.partition_range import PartitionRangeReader
from samsa.common.errors import CorruptRecordError, ErrorCode
from samsa.common.record.codec import build_batch
from samsa.v1 import broker_pb2


class FakeLog:
    """Offsets [0, readable) each hold b"<offset>;"; an answer holds up to `per_answer` of them."""

    def __init__(self, readable: int, per_answer: int) -> None:
        self.readable = readable
        self.per_answer = per_answer
        self.asked: list[int] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()

    def fetch_once(
        self, topic: str, partition: int, offset: int, level: int, topic_id: bytes = b""
    ) -> tuple[broker_pb2.FetchResponse.PartitionResponse, str]:
        with self._lock:
            self.asked.append(offset)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        time.sleep(0.01)  # long enough for a second fetch to overlap, were one started
        with self._lock:
            self.in_flight -= 1
        stop = min(offset + self.per_answer, self.readable)
        records = b"".join(b"%d;" % o for o in range(offset, stop))
        answer = broker_pb2.FetchResponse.PartitionResponse(
            partition=partition,
            high_watermark=self.readable,
            records=records,
            next_fetch_offset=max(offset, stop),
        )
        return answer, ""


def reader_over(log: FakeLog, timeout_ms: int = 30_000) -> PartitionRangeReader:
    reader = PartitionRangeReader(
        {"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": timeout_ms}
    )
    reader._fetch_once = log.fetch_once  # type: ignore[method-assign]
    return reader


def test_answers_follow_the_next_offset_up_to_the_end_one_fetch_at_a_time() -> None:
    log = FakeLog(readable=100, per_answer=7)
    with reader_over(log) as reader:
        chunks = []
        for chunk in reader.chunks("t", 0, 10, 40):
            time.sleep(0.02)  # the caller is slow: the next fetch runs meanwhile
            chunks.append(chunk)
    assert b"".join(c.data for c in chunks) == b"".join(b"%d;" % o for o in range(10, 45))
    assert log.asked == [10, 17, 24, 31, 38], "nothing asked from 40 on"
    assert log.most_in_flight == 1
    assert all(c.aborted == () for c in chunks)


def test_a_caller_that_stops_reading_stops_the_fetches() -> None:
    log = FakeLog(readable=1000, per_answer=10)
    with reader_over(log) as reader:
        chunks = reader.chunks("t", 0, 0, 1000)
        next(chunks)
        chunks.close()  # waits for the one fetch ahead, starts no other
        asked = list(log.asked)
        time.sleep(0.05)
    assert asked == [0, 10]
    assert log.asked == asked


def test_an_end_beyond_what_is_readable_times_out_naming_the_offset() -> None:
    log = FakeLog(readable=20, per_answer=10)
    with reader_over(log, timeout_ms=200) as reader:
        chunks = reader.chunks("t", 0, 0, 30)
        assert next(chunks).data.startswith(b"0;")
        assert next(chunks).data.startswith(b"10;")
        with pytest.raises(KafkaError) as raised:
            next(chunks)
    assert raised.value.code == ErrorCode.REQUEST_TIMED_OUT
    assert "stopped at 20" in str(raised.value)
    assert "not readable yet" in str(raised.value)


def test_an_empty_range_yields_nothing_and_fetches_nothing() -> None:
    log = FakeLog(readable=100, per_answer=10)
    with reader_over(log) as reader:
        assert list(reader.chunks("t", 0, 40, 40)) == []
        assert list(reader.records("t", 0, 40, 40)) == []
        assert list(reader.records("t", 0, 50, 40)) == []
    assert log.asked == []


class BatchLog:
    """Answers every fetch with `data` (real batches) and next_fetch_offset `next_offset`."""

    def __init__(self, data: bytes, next_offset: int) -> None:
        self.data = data
        self.next_offset = next_offset

    def fetch_once(
        self, topic: str, partition: int, offset: int, level: int, topic_id: bytes = b""
    ) -> tuple[broker_pb2.FetchResponse.PartitionResponse, str]:
        answer = broker_pb2.FetchResponse.PartitionResponse(
            partition=partition,
            high_watermark=100,
            records=self.data
            if offset < self.next_offset
            else build_batch([b"x"], base_offset=offset),
            next_fetch_offset=max(self.next_offset, offset + 1),
        )
        return answer, ""


def test_a_batch_that_cannot_be_decoded_after_good_ones_is_raised_not_skipped() -> None:
    """The answer's next offset is past the corrupt batch: reading on from there returned the
    records after it as if the corrupt batch's offsets held nothing."""
    corrupt = bytearray(build_batch([b"c", b"d"], base_offset=2))
    corrupt[-1] ^= 0xFF  # the CRC no longer matches
    log = BatchLog(build_batch([b"a", b"b"], base_offset=0) + bytes(corrupt), next_offset=4)
    reader = PartitionRangeReader({"bootstrap.servers": "127.0.0.1:1"})
    reader._fetch_once = log.fetch_once  # type: ignore[method-assign]
    with reader:
        read = []
        with pytest.raises(CorruptRecordError, match=r"offsets 2\.\.3"):
            for record in reader.records("t", 0, 0, 6):
                read.append(record.value)
    assert read == [b"a", b"b"]


def test_a_negative_start_is_refused_at_once() -> None:
    """The broker refuses a negative fetch offset (INVALID_ARGUMENT), and the reader retried
    that like an unreachable leader, for request.timeout.ms, before failing."""
    log = FakeLog(readable=100, per_answer=10)
    with reader_over(log) as reader, pytest.raises(KafkaError) as raised:
        next(reader.chunks("t", 0, -1, 10))
    assert raised.value.code == ErrorCode.INVALID_REQUEST
    assert log.asked == []


def test_an_error_code_this_client_does_not_know_is_raised_as_unknown_server_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A newer broker's code: KafkaError UNKNOWN_SERVER_ERROR naming its number (ErrorCode(999)
    raised ValueError out of the read instead)."""

    class Stub:
        def __init__(self, channel: object) -> None:
            pass

        def Fetch(self, request: object, timeout: float, metadata: object = None) -> object:
            answer = broker_pb2.FetchResponse()
            topic = answer.topics.add(name="t")
            result = topic.partitions.add(partition=0, error_message="why")
            result.error_code = 999  # type: ignore[assignment]
            return answer

    reader = PartitionRangeReader({"bootstrap.servers": "127.0.0.1:1"})
    monkeypatch.setattr(reader, "_leader", lambda topic, partition: "127.0.0.1:1")
    monkeypatch.setattr("samsa.client.partition_range.broker_pb2_grpc.BrokerServiceStub", Stub)
    try:
        with pytest.raises(KafkaError) as raised:
            reader._fetch_once("t", 0, 0, 0)
    finally:
        reader.close()
    assert raised.value.code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert "error code 999: why" in str(raised.value)
