"""Goal: `PartitionRangeReader` reads a range under one topic id (KIP-516): each Fetch names the
id its metadata showed when the range started (or the caller's), and a topic deleted and created
again under the same name while the range is read is an error (UNKNOWN_TOPIC_ID), never its
records read as the range's; a broker only behind on metadata is asked again. Before, the
reader named no id and read the new topic's records at the old offsets, in silence.

Method: a stand-in broker (the gRPC stub) hosting one partition under an id that a test changes
at a chosen offset, answering UNKNOWN_TOPIC_ID to a fetch naming another, and a stand-in
metadata showing the cluster's id on refresh. No cluster, no network.
"""

from __future__ import annotations

import pytest

from samsa.client import partition_range
from samsa.client.errors import KafkaError
from samsa.client.partition_range import PartitionRangeReader
from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.v1 import broker_pb2

OLD, NEW = b"\x01" * 16, b"\x02" * 16


class Broker:
    """Hosts t-0 under `hosted`: 10-record batches whose values are b"<id byte>:<offset>".
    A fetch at `recreate_at` finds the topic deleted and created again (the cluster's id NEW);
    `lag` fetches after that the broker still hosts the old one (behind on metadata)."""

    def __init__(self, recreate_at: int | None = None, lag: int = 0) -> None:
        self.hosted = self.cluster_id = OLD
        self.recreate_at = recreate_at
        self.lag = lag
        self.requests: list[broker_pb2.FetchRequest] = []
        self.deleted = False  # t deleted: no topic of that name (UNKNOWN_TOPIC_ID to an id)

    def Fetch(
        self, request: broker_pb2.FetchRequest, timeout: float, metadata: object = None
    ) -> broker_pb2.FetchResponse:
        self.requests.append(request)
        topic = request.topics[0]
        offset = topic.partitions[0].fetch_offset
        if offset == self.recreate_at:
            self.cluster_id = NEW
        if self.cluster_id != self.hosted:
            if self.lag == 0:
                self.hosted = self.cluster_id
            self.lag -= 1
        result = broker_pb2.FetchResponse.PartitionResponse(partition=0, high_watermark=100)
        if self.deleted or (topic.topic_id and topic.topic_id != self.hosted):
            result.error_code = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            base = offset - offset % 10
            values = [b"%d:%d" % (self.hosted[0], o) for o in range(base, base + 10)]
            result.records = build_batch(values, base_offset=base)
            result.next_fetch_offset = base + 10
        answer = broker_pb2.FetchResponse()
        answer.topics.add(name=topic.name).partitions.append(result)
        return answer


class Metadata:
    """The reader's metadata: t-0 led by broker 1; a refresh shows the cluster's id, or no
    topic t once the broker's `deleted` is set."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.leaders = {("t", 0): 1}
        self.endpoints = {1: "b:1"}
        self.topic_ids = {"t": broker.cluster_id}
        self.partition_counts = {"t": 1}

    def refresh(self, topics: object = (), timeout_s: float = 0) -> None:
        if self.broker.deleted:
            self.leaders, self.topic_ids, self.partition_counts = {}, {}, {}
            return
        self.topic_ids = {"t": self.broker.cluster_id}


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Broker:
    stand_in = Broker()
    monkeypatch.setattr(partition_range.broker_pb2_grpc, "BrokerServiceStub", lambda _: stand_in)
    return stand_in


def reader_on(broker: Broker) -> PartitionRangeReader:
    reader = PartitionRangeReader({"bootstrap.servers": "b:1", "request.timeout.ms": 2_000})
    reader._metadata = Metadata(broker)  # type: ignore[assignment]
    return reader


def values_read(reader: PartitionRangeReader, end: int, **kwargs: bytes) -> list[bytes]:
    values: list[bytes] = []
    try:
        for record in reader.records("t", 0, 0, end, **kwargs):
            values.append(record.value)
    except KafkaError as error:
        values.append(error.code.name.encode())
    return values


def old(start: int, end: int) -> list[bytes]:
    return [b"1:%d" % offset for offset in range(start, end)]


def test_each_fetch_names_the_topic_id(broker: Broker) -> None:
    with reader_on(broker) as reader:
        assert values_read(reader, 20) == old(0, 20)
    assert [request.topics[0].topic_id for request in broker.requests] == [OLD, OLD]


def test_a_topic_created_again_mid_range_is_an_error_not_its_records(broker: Broker) -> None:
    broker.recreate_at = 20
    with reader_on(broker) as reader:
        assert values_read(reader, 40) == [*old(0, 20), b"UNKNOWN_TOPIC_ID"]
        # The next range is the new topic's: read under its id.
        assert values_read(reader, 10) == [b"2:%d" % offset for offset in range(10)]


def test_a_broker_behind_on_metadata_is_asked_again(broker: Broker) -> None:
    """Its metadata shows the id the range started under, its log an older topic's."""
    broker.hosted = b"\x00" * 16
    broker.lag = 2
    with reader_on(broker) as reader:
        assert values_read(reader, 20) == old(0, 20)
    assert [request.topics[0].topic_id for request in broker.requests] == [OLD] * 4


def test_the_callers_topic_id_wins_over_the_metadata(broker: Broker) -> None:
    """A range planned under an id the cluster no longer has fails on its first fetch."""
    with reader_on(broker) as reader:
        assert values_read(reader, 20, topic_id=NEW) == [b"UNKNOWN_TOPIC_ID"]
        assert values_read(reader, 20, topic_id=OLD) == old(0, 20)


def test_a_topic_deleted_mid_range_is_an_error_once_the_timeout_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The range's topic is deleted after offset 20 was read. The reader asked again for
    request.timeout.ms (a broker may be behind on metadata), then failed with REQUEST_TIMED_OUT,
    "t-0 has no leader now", which a caller (the Spark source's failOnDataLoss=false) cannot
    tell from a cluster that does not answer; now it says the topic was deleted."""

    class DeletedAt20(Broker):
        def Fetch(
            self, request: broker_pb2.FetchRequest, timeout: float, metadata: object = None
        ) -> object:
            if request.topics[0].partitions[0].fetch_offset == 20:
                self.deleted = True
            return super().Fetch(request, timeout)

    gone = DeletedAt20()
    monkeypatch.setattr(partition_range.broker_pb2_grpc, "BrokerServiceStub", lambda _: gone)
    with reader_on(gone) as reader:
        reader.timeout_s = 0.3
        assert values_read(reader, 40) == [*old(0, 20), b"UNKNOWN_TOPIC_ID"]
        # read under no id, a topic the cluster does not have is named as such
        assert values_read(reader, 10, topic_id=b"") == [b"UNKNOWN_TOPIC_OR_PARTITION"]


def test_a_topic_without_a_leader_still_times_out(broker: Broker) -> None:
    """The topic exists (its partition has no leader for now): not taken as deleted."""
    with reader_on(broker) as reader:
        reader.timeout_s = 0.3
        reader._metadata.leaders = {}  # type: ignore[attr-defined]
        reader._metadata.refresh = lambda *args: None  # type: ignore[method-assign]
        assert values_read(reader, 20) == [b"REQUEST_TIMED_OUT"]
