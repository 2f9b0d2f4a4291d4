"""Goal: a task whose range retention deleted (wholly or while it read) fails with
failOnDataLoss, and with failOnDataLoss=false goes on from the partition's first offset, never
yielding an offset twice. This is the stream's usual case: its next range starts at the
checkpointed end of the batch before, whatever retention deleted since. And a task whose topic was
deleted (or deleted and created again) since its range was planned never yields the new topic's
records, and ends (failOnDataLoss=false) rather than time out; a batch read planned while it is
re-created plans the old topic's offsets under the old id.

Method: a stand-in for the worker's PartitionRangeReader serves codec batches of 10 records and
answers OFFSET_OUT_OF_RANGE below its log start, which a test may move while a task reads; for a
topic created again, the SDK's reader over a stand-in broker hosting the new topic
(test_partition_range_topic_id.py). Pure: no Spark session, no cluster."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from samsa.client import KafkaError, partition_range
from samsa.client.partition_range import Chunk
from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.spark import source
from samsa.spark.options import parse_options
from samsa.spark.source import RangePartition, SamsaBatchReader, read_range
from tests.unit.client.test_partition_range_topic_id import NEW, OLD, Broker, reader_on

BOOT = {"samsa.bootstrap.servers": "h:1", "subscribe": "t"}


class Retention:
    """A partition of 10-record batches whose log start is `log_start`; `moves` maps a
    position to the log start retention sets once the reader gets there."""

    def __init__(self, log_start: int, moves: dict[int, int] | None = None) -> None:
        self.log_start = log_start
        self.moves = moves or {}

    def chunks(
        self,
        topic: str,
        partition: int,
        start: int,
        end: int,
        isolation: str,
        topic_id: bytes | None = None,
    ) -> Iterator[Chunk]:
        fetch = start  # the offset each Fetch asks for
        while fetch < end:
            self.log_start = max(self.log_start, self.moves.pop(fetch, 0))
            if fetch < self.log_start:
                raise KafkaError(
                    f"reading {topic}-{partition} at {fetch}: OFFSET_OUT_OF_RANGE",
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                )
            base = fetch - fetch % 10
            values = [b"%d" % offset for offset in range(base, base + 10)]
            yield Chunk(build_batch(values, base_offset=base), ())
            fetch = base + 10


def offsets(monkeypatch: pytest.MonkeyPatch, log: Retention, lenient: bool) -> list[int]:
    monkeypatch.setattr(source, "range_reader", lambda client: log)
    monkeypatch.setattr(source, "first_offset", lambda options, tp: log.log_start)
    options = parse_options(BOOT | {"failOnDataLoss": "false" if lenient else "true"})
    batches = read_range(options, RangePartition("t", 0, 5, 80))
    return [offset for batch in batches for offset in batch.column("offset").to_pylist()]


def test_a_range_whose_start_was_deleted_goes_on_from_the_first_offset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(KafkaError, match="OFFSET_OUT_OF_RANGE"):
        offsets(monkeypatch, Retention(30), lenient=False)
    assert offsets(monkeypatch, Retention(30), lenient=True) == list(range(30, 80))


def test_retention_while_a_task_reads_skips_forward_and_repeats_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Offsets 5..19 are read, then retention deletes up to 50; later, up to 70."""
    with pytest.raises(KafkaError, match="OFFSET_OUT_OF_RANGE"):
        offsets(monkeypatch, Retention(0, {20: 50}), lenient=False)
    read = offsets(monkeypatch, Retention(0, {20: 50, 60: 70}), lenient=True)
    assert read == [*range(5, 20), *range(50, 60), *range(70, 80)]


def test_an_out_of_range_answer_that_is_not_retention_still_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The log start is not past the read (the end moved back, say): no offset to go on from."""

    class Truncated(Retention):
        def chunks(self, *args: object) -> Iterator[Chunk]:
            raise KafkaError("OFFSET_OUT_OF_RANGE", ErrorCode.OFFSET_OUT_OF_RANGE)
            yield

    with pytest.raises(KafkaError, match="OFFSET_OUT_OF_RANGE"):
        offsets(monkeypatch, Truncated(0), lenient=True)


def test_data_loss_in_a_task_names_the_partition_and_failondataloss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As the driver's check (and Kafka's connector) does: the task's error says which records
    went and which option reads on, not only the reader's OFFSET_OUT_OF_RANGE."""
    with pytest.raises(KafkaError, match=r"t-0: offsets from 20 .*failOnDataLoss=false") as raised:
        offsets(monkeypatch, Retention(0, {20: 50}), lenient=False)
    assert raised.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


@pytest.mark.parametrize("lenient", [False, True], ids=["failOnDataLoss", "lenient"])
def test_a_range_whose_topic_was_created_again_never_reads_the_new_one(
    monkeypatch: pytest.MonkeyPatch, lenient: bool
) -> None:
    """Planned while t had the id OLD, its task runs once t was deleted and created again: the
    reader's metadata (refreshed by a failed first attempt, say) shows NEW. The task read the
    new topic's records at the planned offsets; now it reads under the planned id: an error
    naming the partition and failOnDataLoss, or (false) an empty range."""
    broker = Broker()
    monkeypatch.setattr(partition_range.broker_pb2_grpc, "BrokerServiceStub", lambda _: broker)
    broker.hosted = broker.cluster_id = NEW
    reader = reader_on(broker)
    monkeypatch.setattr(source, "range_reader", lambda client: reader)
    options = parse_options(BOOT | {"failOnDataLoss": "false" if lenient else "true"})
    batches = read_range(options, RangePartition("t", 0, 0, 20, topic_id=OLD))
    if lenient:
        assert list(batches) == []
        return
    with pytest.raises(KafkaError, match=r"t-0: the topic was deleted .*0\.\.19"):
        list(batches)


@pytest.mark.parametrize("lenient", [False, True], ids=["failOnDataLoss", "lenient"])
@pytest.mark.parametrize("planned_id", [OLD, b""], ids=["planned-before", "planned-after"])
def test_a_range_whose_topic_was_deleted_ends_or_fails_naming_it(
    monkeypatch: pytest.MonkeyPatch, lenient: bool, planned_id: bytes
) -> None:
    """t was deleted once its range was planned (under its id), or between the stream's
    latestOffset and the planning (no id: a replayed batch after a restart). The reader asked
    again until request.timeout.ms and the task failed with REQUEST_TIMED_OUT ("no leader now"),
    failOnDataLoss=false or not, so a stream stopped on a deleted topic it is meant to leave
    out; now it fails naming the deletion and failOnDataLoss, or (false) the range ends."""
    broker = Broker()
    broker.deleted = True
    monkeypatch.setattr(partition_range.broker_pb2_grpc, "BrokerServiceStub", lambda _: broker)
    reader = reader_on(broker)
    reader.timeout_s = 0.3
    monkeypatch.setattr(source, "range_reader", lambda client: reader)
    options = parse_options(BOOT | {"failOnDataLoss": "false" if lenient else "true"})
    batches = read_range(options, RangePartition("t", 0, 0, 20, topic_id=planned_id))
    if lenient:
        assert list(batches) == []
        return
    with pytest.raises(KafkaError, match=r"t-0: the topic was deleted .*failOnDataLoss=false"):
        list(batches)


class RecreatedWhilePlanned:
    """A cluster whose topic t is deleted and created again right after the batch read asked its
    offsets: an Admin answering t's id as it is (monkeypatched into samsa.spark.source), and
    partition_bounds reading the offsets of t as it is, then re-creating it."""

    def __init__(self) -> None:
        self.topic_id = OLD
        self.offsets_of: bytes | None = None

    def admin(self, config: dict) -> RecreatedWhilePlanned:
        return self

    def __enter__(self) -> RecreatedWhilePlanned:
        return self

    def __exit__(self, *exc: object) -> None: ...
    def list_topics(self) -> list[str]:
        return ["t"]

    def describe_topics(self, names: list[str]) -> dict:
        partitions = [SimpleNamespace(partition=0)]
        return {"t": SimpleNamespace(partitions=partitions, topic_id=self.topic_id)}

    def bounds(self, options: object, partitions: list) -> tuple[dict, dict]:
        self.offsets_of, self.topic_id = self.topic_id, NEW
        return dict.fromkeys(partitions, 0), dict.fromkeys(partitions, 20)


def test_a_batch_read_plans_a_range_under_the_id_of_the_topic_its_offsets_are_of(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ids were asked after the offsets: t's offsets 0..19 of OLD were planned under NEW,
    and the task read the new topic's records at them as the old topic's. Asked before, the
    range has OLD, and its task fails or ends as the test above shows."""
    cluster = RecreatedWhilePlanned()
    monkeypatch.setattr(source, "Admin", cluster.admin)
    monkeypatch.setattr(source, "partition_bounds", cluster.bounds)
    [task] = SamsaBatchReader(parse_options(BOOT)).partitions()
    assert isinstance(task, RangePartition)
    assert (task.start, task.end, cluster.offsets_of) == (0, 20, OLD)
    assert task.topic_id == OLD
