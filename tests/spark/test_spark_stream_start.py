"""Goal: a new stream starts where startingOffsets says and reads every record from there exactly
once, also when its driver dies before the first micro-batch commits. Spark keeps no initial
offset of a Python source: it plans batch 0 from `initialOffset()` at the first trigger, and
runs it, in that run or in a replay after a restart, from `initialOffset()` asked again
(PySpark 4.3, measured: a probe source's batch 0 was planned from 100 and run from 101, and the
review's probe replayed [100, 150) as [170, 150)), so an initial offset resolved against the
cluster lost the records of batch 0. The initial offset is now the same whatever the cluster
holds; batch 0 reads nothing and ends where startingOffsets resolves (what Spark checkpoints),
whatever the read limits say. A starting offset past a partition's end is refused there, naming
startingOffsets, as a batch read refuses it.

Method: SamsaStreamReader over a stand-in cluster (its subscribed partitions and their
bounds), driven as Spark's micro-batch loop drives it: an offset log, a commit log, batch 0
logged at the first trigger and run from initialOffset() asked again, a driver that dies once a
given batch is logged, and a restart that runs the uncommitted batch first. Pure: no Spark
session, no cluster."""

from __future__ import annotations

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from samsa.spark import source, stream_source
from samsa.spark.options import OptionError, parse_options
from samsa.spark.stream_offsets import from_offset
from samsa.spark.stream_source import SamsaStreamReader

BOOT = {"samsa.bootstrap.servers": "h:1"}


@pytest.fixture(autouse=True)
def no_topic_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planning tasks asks their topics' ids (source.topic_ids): there is no cluster here."""
    monkeypatch.setattr(source, "topic_ids", lambda options, topics: {})


class Cluster:
    """The partitions the stream subscribes to: their first and end offsets, as the test sets."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.first = {("t", 0): 0}
        self.end = {("t", 0): 100}
        self.found: int | None = None  # the first offset at the starting timestamp
        monkeypatch.setattr(
            stream_source, "subscribed_partitions", lambda o, missing_ok=False: sorted(self.end)
        )
        monkeypatch.setattr(stream_source, "partition_bounds", self.bounds)
        monkeypatch.setattr(
            source, "offsets_for_times", lambda o, times: dict.fromkeys(times, self.found)
        )

    def bounds(self, options: object, tps: list) -> tuple[dict, dict]:
        return {tp: self.first.get(tp, 0) for tp in tps}, {tp: self.end[tp] for tp in tps}


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Cluster:
    return Cluster(monkeypatch)


def reader(**options: str) -> SamsaStreamReader:
    return SamsaStreamReader(parse_options(BOOT | {"subscribe": "t"} | options))


class Spark:
    """Spark's micro-batch loop, as far as the source sees it (PySpark 4.3, measured): the first
    trigger logs batch 0 even when its end is its start, and running batch 0 asks
    initialOffset() again, in the run that planned it as in a replay."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.offsets: list[dict] = []  # the offset log: each batch's end
        self.starts: list[dict] = []  # where each batch was planned from
        self.committed = 0  # batches in the commit log
        self.read: list[tuple[str, int, int]] = []  # the records of committed batches

    def run(self, source: SamsaStreamReader, die_at: int | None = None, arriving: int = 0) -> bool:
        """Micro-batches until no new data (True), or until the driver dies once batch
        `die_at` is logged (False); `arriving` records are written while the first batch is
        planned. A batch logged but not committed is run first (replayed)."""
        while True:
            batch = self.committed
            if len(self.offsets) == batch:
                start = self.offsets[-1] if batch else source.initialOffset()
                if not batch:
                    self.cluster.end[("t", 0)] += arriving
                end = source.latestOffset(start, ReadAllAvailable())
                if batch and end == start:
                    return True
                self.offsets.append(end)
                self.starts.append(start)
                if die_at == batch:
                    return False
            start = self.offsets[batch - 1] if batch else source.initialOffset()
            ranges = source.partitions(start, self.offsets[batch])
            self.read += [(r.topic, r.partition, o) for r in ranges for o in range(r.start, r.end)]
            self.committed += 1

    def planned(self) -> list[tuple[str, int, int]]:
        """The records of the committed batches' ranges, as they were planned."""
        return [
            (topic, partition, offset)
            for start, end in zip(self.starts, self.offsets[: self.committed], strict=False)
            for (topic, partition), stop in from_offset(end).items()
            if (topic, partition) in from_offset(start)
            for offset in range(from_offset(start)[(topic, partition)], stop)
        ]


@pytest.mark.parametrize("die_at", [None, 0, 1])
def test_every_record_of_the_first_micro_batch_is_read_once(
    cluster: Cluster, die_at: int | None
) -> None:
    """startingOffsets=latest (the default), the partition ends at 100, and 50 records arrive
    while the first micro-batch is planned: batch 0 was planned as [100, 150) and read from
    initialOffset() asked again, [150, 150) or, its driver dead before batch 0 committed and
    more records in, [170, 150): 100..149 were never read. Now batch 0 holds no record and
    every record after its end is read, once, whether the driver dies before batch 0 or batch 1
    commits, or not at all."""
    spark, first_run = Spark(cluster), reader()
    if spark.run(first_run, die_at, arriving=50):
        cluster.end[("t", 0)] = 160
        spark.run(first_run, die_at)
    cluster.end[("t", 0)] = 170
    assert spark.run(reader())
    assert spark.read == spark.planned()
    assert spark.read == [("t", 0, offset) for offset in range(150, 170)]


def test_the_initial_offset_asks_nothing_of_the_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_cluster(*args: object, **kwargs: object) -> None:
        raise AssertionError("the initial offset must not depend on the cluster")

    monkeypatch.setattr(stream_source, "subscribed_partitions", no_cluster)
    monkeypatch.setattr(stream_source, "partition_bounds", no_cluster)
    initial = reader().initialOffset()
    assert reader().initialOffset() == initial
    for options in (
        {"startingOffsets": "earliest"},
        {"startingOffsets": '{"t": {"0": 5}}'},
        {"startingTimestamp": "1700000000000"},
    ):
        assert reader(**options).initialOffset() == initial
        assert reader(**options, minPartitions="3").partitions(initial, {"t": {"0": 9}}) == []


def test_the_first_micro_batch_ends_where_the_stream_starts_whatever_the_limits(
    cluster: Cluster,
) -> None:
    """Batch 0 holds no record, so no read limit applies to it (nor holds it back); a partition
    created after it is read from its first offset, as Kafka's connector reads one created
    after the stream started."""
    initial = reader().initialOffset()
    for limit in (ReadMaxRows(1), ReadMinRows(1000)):
        assert reader().latestOffset(initial, limit) == {"t": {"0": 100}}
    earliest = reader(startingOffsets="earliest")
    assert earliest.latestOffset(initial, ReadMaxRows(1)) == {"t": {"0": 0}}
    cluster.end[("t", 1)] = 4
    ranges = reader().partitions({"t": {"0": 100}}, {"t": {"0": 100, "1": 4}})
    assert [(r.partition, r.start, r.end) for r in ranges] == [(1, 0, 4)]


def test_the_first_micro_batch_refuses_or_skips_deleted_starting_offsets(
    cluster: Cluster,
) -> None:
    """startingOffsets names offset 5, which retention deleted: failOnDataLoss names it, false
    starts at the first offset still stored."""
    initial = reader().initialOffset()
    deleted = {"startingOffsets": '{"t": {"0": 5}}'}
    assert reader(**deleted).latestOffset(initial, ReadAllAvailable()) == {"t": {"0": 5}}
    cluster.first[("t", 0)] = 10
    with pytest.raises(OptionError, match="offset 5 was deleted"):
        reader(**deleted).latestOffset(initial, ReadAllAvailable())
    lenient = reader(**deleted, failOnDataLoss="false")
    assert lenient.latestOffset(initial, ReadAllAvailable()) == {"t": {"0": 10}}


def test_a_starting_offset_past_the_end_is_refused_naming_startingoffsets(
    cluster: Cluster,
) -> None:
    """startingOffsets 500 where the partition ends at 100, as a batch read refuses it: the
    stream took it, and its next micro-batch failed blaming an unclean leader election or a
    re-created topic (with failOnDataLoss=false it went on from 100 in silence). An offset at
    the end, or found by time past the end read (records came in between), is a start."""
    initial = reader().initialOffset()
    for lenient in ("true", "false"):
        past = reader(startingOffsets='{"t": {"0": 500}}', failOnDataLoss=lenient)
        with pytest.raises(OptionError, match=r"t-0: startingOffsets 500 is after the end, 100"):
            past.latestOffset(initial, ReadAllAvailable())
    at_end = reader(startingOffsets='{"t": {"0": 100}}')
    assert at_end.latestOffset(initial, ReadAllAvailable()) == {"t": {"0": 100}}
    cluster.found = 104
    by_time = reader(startingTimestamp="1700000000000")
    assert by_time.latestOffset(initial, ReadAllAvailable()) == {"t": {"0": 104}}
