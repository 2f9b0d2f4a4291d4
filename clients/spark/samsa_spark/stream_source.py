"""`readStream.format("samsa")`: micro-batches of offset ranges, checkpointed by Spark.

Theory of operation (stream_offsets.py has the offset rules). Every call runs in Spark's one
long-lived driver-side Python process for the query: `initialOffset` is the same every time
(stream_offsets.INITIAL), and `latestOffset` from it resolves the starting timestamps or
startingOffsets (latest by default, as the Kafka connector's) into the first micro-batch's end,
which reads nothing; from then on `latestOffset` asks the partitions' ends at the read's
isolation level and applies the read limit; `partitions` turns [start, end) into one
RangePartition per partition with records waiting (split into at least minPartitions tasks, as
a batch read is); `read` runs in a task, exactly as the batch read does. A restarted query
resumes from the end Spark checkpointed: Spark asks for the same ranges again for a batch it had
not committed (the first one too, its start being INITIAL again), so nothing is lost or read
twice.
`failOnDataLoss`: a start that retention has deleted is an error naming the partition, or (false)
the range starts at the first offset still stored; likewise a partition of the checkpointed
offset that no longer exists (its topic was deleted) is an error, or (false) is left out of the
offsets from then on (created again, it is a new partition, read from its start; a new
partition whose first offset is not 0 lost records before the stream saw it, likewise, and so
does one new in a batch that is replayed after its topic was deleted), and a partition whose end
went below the checkpointed position (truncated by an unclean leader election) is an error, or
(false) is read on from its new end.
Topic ids (KIP-516): each offset records the id every topic had when it was taken, asked before
the partitions' offsets (as a batch read asks them: source.planned). A topic whose id now is
not the one `start` records was deleted and created again under the same name: its position is
the old log's, and read on from it the new topic's records below it were skipped in silence (or,
past its end, waited for). That is an error naming the topic and both ids, or (false) a warning
and the new topic is read from its first offset, as a new partition is. The tasks read their
ranges under the ids of the end offset, the ones the plan saw, so a topic re-created while a
micro-batch is planned or read (or before it is replayed) fails the task or ends its range
(source.read_range), and the next micro-batch finds the new id. An offset checkpointed without
ids (before they were recorded) is read as before: a re-created topic shows only as an end gone
back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from samsa.spark import stream_offsets as so
from samsa.spark.options import OptionError, SourceOptions
from samsa.spark.ranges import OffsetRange, refuse_unread, resolve, split
from samsa.spark.source import (
    RangePartition,
    partition_bounds,
    partition_topic_ids,
    planned,
    read_range,
    starting_offsets,
    subscribed_partitions,
)

log = logging.getLogger(__name__)


class SamsaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._available_now: so.Positions | None = None
        self._available_now_ids: dict[str, bytes] = {}  # the topics' ids when it started
        self._last_trigger = time.monotonic()  # the last micro-batch planned, or the start
        # Micro-batches in a row each partition had records waiting and got none of them
        # (maxOffsetsPerTrigger below their number): next_end serves the longest passed over.
        self._passed_over: dict[tuple[str, int], int] = {}

    def initialOffset(self) -> dict:
        """Unresolved: Spark asks again to run the first micro-batch (stream_offsets.py)."""
        return so.INITIAL

    def _starting_offset(self) -> so.Offset:
        """Where startingOffsets (or the starting timestamps) say the stream starts, now, with
        the topics' ids. An offset past a partition's end is refused, as in a batch read (one
        found by time may lie past the end read before it: records came in between)."""
        partitions = subscribed_partitions(self.options)
        refuse_unread(self.options, partitions)
        ids = partition_topic_ids(self.options, partitions)  # before the offsets (planned)
        first, last = partition_bounds(self.options, partitions)
        starting = starting_offsets(self.options, partitions, "latest")
        by_offsets = self.options.starting_times is None
        ranges = resolve(
            partitions, starting, "latest", first, last, self.options.fail_on_data_loss, by_offsets
        )
        return so.to_offset({(r.topic, r.partition): r.start for r in ranges}, ids)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        if so.is_initial(start):  # the first micro-batch: it only fixes where the stream starts
            self._last_trigger = time.monotonic()
            return self._starting_offset()
        partitions = subscribed_partitions(self.options, missing_ok=True)
        ids = partition_topic_ids(self.options, partitions)  # before the offsets (planned)
        first, last = partition_bounds(self.options, partitions)
        positions = self._without_deleted(self._without_recreated(start, ids), first)
        positions = so.with_new_partitions(positions, first)
        positions = {tp: self._checked_start(tp, p, first) for tp, p in positions.items()}
        positions = {tp: self._checked_end(tp, p, last) for tp, p in positions.items()}
        latest = so.capped(
            {tp: last.get(tp, p) for tp, p in positions.items()}, self._cap(ids), positions
        )
        end = so.next_end(
            positions,
            latest,
            max_rows=limit.max_rows if isinstance(limit, ReadMaxRows) else None,
            min_rows=(
                self._min_rows(limit)
                if self._available_now is None and not self._delayed_too_long()
                else None
            ),
            passed_over=self._passed_over,
        )
        if end != positions:
            self._last_trigger = time.monotonic()
            self._passed_over = so.passed_over_after(self._passed_over, positions, latest, end)
        return so.to_offset(end, ids)

    def _min_rows(self, limit: ReadLimit) -> int | None:
        """The records a micro-batch waits for. With both maxOffsetsPerTrigger and
        minOffsetsPerTrigger, Spark hands over the maximum only (PySpark has no composite
        limit): the minimum still applies, as in the Kafka connector."""
        if isinstance(limit, ReadMinRows):
            return limit.min_rows
        if isinstance(limit, ReadMaxRows):
            return self.options.min_offsets_per_trigger
        return None

    def _delayed_too_long(self) -> bool:
        """Whether minOffsetsPerTrigger has held records back for maxTriggerDelay since the
        last micro-batch (or the start): then what waits is read however little (Kafka's)."""
        waited_ms = (time.monotonic() - self._last_trigger) * 1000
        return waited_ms >= self.options.max_trigger_delay_ms

    def prepareForTriggerAvailableNow(self) -> None:
        partitions = subscribed_partitions(self.options, missing_ok=True)
        self._available_now_ids = partition_topic_ids(self.options, partitions)
        self._available_now = partition_bounds(self.options, partitions)[1]

    def _cap(self, ids: Mapping[str, bytes]) -> so.Positions | None:
        """The ends Trigger.AvailableNow stops at, less those of topics created again since it
        started: they were another log's (the new topic is new since, as a new partition)."""
        if self._available_now is None:
            return None
        again = so.recreated(self._available_now_ids, ids)
        return so.without_topics(self._available_now, again)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        if so.is_initial(start):  # the first micro-batch reads nothing (stream_offsets.py)
            return []
        ids = so.ids_of(end)  # the ids seen when the end was planned: the tasks read under them
        begin, stops = so.from_offset(start), so.from_offset(end)
        # A topic created again between start and end (failOnDataLoss=false) is new: read from
        # its first offset (latestOffset), not from the old topic's position.
        begin = so.without_topics(begin, so.recreated(so.ids_of(start), ids))
        new = [tp for tp in stops if tp not in begin]
        if new:  # appeared since `start` was taken: read from their first offset
            there = set(subscribed_partitions(self.options, missing_ok=True))
            stops = self._without_gone_new(stops, [tp for tp in new if tp not in there])
            new = [tp for tp in new if tp in there]
            firsts = partition_bounds(self.options, new)[0] if new else {}
            self._check_new(firsts)
            begin |= firsts
        ranges = [
            OffsetRange(topic, partition, begin[(topic, partition)], stop)
            for (topic, partition), stop in stops.items()
        ]
        return planned(self.options, split(ranges, self.options.min_partitions), ids)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        return read_range(self.options, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: Spark's checkpoint holds the position (no group commit)."""

    def _check_new(self, firsts: dict[tuple[str, int], int]) -> None:
        """A partition that appeared since the last micro-batch whose first offset is not 0 had
        records deleted before the stream could read them (retention or DeleteRecords): an
        error naming it, or (failOnDataLoss=false) read from its first offset (Kafka's)."""
        late = sorted(tp for tp, first in firsts.items() if first != 0)
        if late and self.options.fail_on_data_loss:
            names = ", ".join(f"{t}-{p} starts at {firsts[(t, p)]}" for t, p in late)
            raise OptionError(
                f"partitions added while the stream ran lost records before it read them ({names}"
                ", not 0); set failOnDataLoss=false to read them from their first offset"
            )

    def _without_gone_new(self, stops: so.Positions, gone: list[tuple[str, int]]) -> so.Positions:
        """`stops` less the partitions new in this micro-batch that the cluster no longer has
        (a replay after their topic was deleted): their records are lost, an error naming them
        (failOnDataLoss), or the batch goes on without them, as Kafka's connector does ("Cannot
        find earliest offsets"). Before, their first offsets were asked for, which a missing
        partition answers only when the consumer gives up: session.timeout.ms, 45 s."""
        if gone and self.options.fail_on_data_loss:
            names = ", ".join(f"{topic}-{partition}" for topic, partition in sorted(gone))
            raise OptionError(
                f"{names} appeared after the previous micro-batch and no longer exist (deleted?): "
                "their records cannot be read; set failOnDataLoss=false to go on without them"
            )
        return {tp: stop for tp, stop in stops.items() if tp not in gone}

    def _without_recreated(self, start: dict, ids: Mapping[str, bytes]) -> so.Positions:
        """The positions of `start`, less those of topics deleted and created again under the
        same name since (their id now is not the one `start` records): they name the old log's
        records, so the new topic's below them would be skipped, and past its end the stream
        would wait for nothing. An error naming the topic and both ids (failOnDataLoss), or
        (false) a warning, and the new topic is read from its first offset, as a new partition
        is. Kafka's connector sees only an end gone back (`_checked_end`, still the check for
        an offset checkpointed without ids)."""
        positions = so.from_offset(start)
        again = so.recreated(so.ids_of(start), ids)
        if not again:
            return positions
        what = "; ".join(
            f"topic {topic} was deleted and created again since the last micro-batch (its id "
            f"was {then.hex()}, it is {now.hex()} now)"
            for topic, (then, now) in again.items()
        )
        if self.options.fail_on_data_loss:
            raise OptionError(
                f"{what}: records of the old topic may be lost, and the checkpointed offsets "
                "are not the new topic's; set failOnDataLoss=false to read the new topic from "
                "its first offset"
            )
        log.warning("%s: the new topic is read from its first offset (failOnDataLoss=false)", what)
        return so.without_topics(positions, again)

    def _without_deleted(
        self, positions: so.Positions, first: dict[tuple[str, int], int]
    ) -> so.Positions:
        """`positions` less the partitions the cluster no longer has (their topic was
        deleted): records written to them since the last look may be lost (failOnDataLoss)."""
        gone = sorted(tp for tp in positions if tp not in first)
        if gone and self.options.fail_on_data_loss:
            names = ", ".join(f"{topic}-{partition}" for topic, partition in gone)
            raise OptionError(
                f"{names} no longer exist (deleted?): records written to them since the last "
                "micro-batch may be lost; set failOnDataLoss=false to go on without them"
            )
        return {tp: position for tp, position in positions.items() if tp in first}

    def _checked_end(
        self, tp: tuple[str, int], position: int, last: dict[tuple[str, int], int]
    ) -> int:
        """A partition whose end is now below the position read to lost records it had (an
        unclean leader election truncated it, or, in an offset checkpointed without topic ids,
        its topic was deleted and created again under the same name): an error naming it, or
        (failOnDataLoss=false) the stream goes on from the end, reading what is written there
        from now on, as Spark's Kafka connector does.
        (An end read from a leader just elected never goes backwards: the broker answers
        OFFSET_NOT_AVAILABLE until its high watermark caught up, and the read asks again.)"""
        end = last.get(tp)
        if end is None or end >= position:
            return position
        if self.options.fail_on_data_loss:
            raise OptionError(
                f"{tp[0]}-{tp[1]}: its end offset went back from {position} to {end} (truncated "
                "by an unclean leader election, or the topic was deleted and created again): "
                "records may have been missed; set failOnDataLoss=false to go on from its end"
            )
        return end

    def _checked_start(
        self, tp: tuple[str, int], position: int, first: dict[tuple[str, int], int]
    ) -> int:
        if tp not in first or position >= first[tp]:
            return position
        if self.options.fail_on_data_loss:
            raise OptionError(
                f"{tp[0]}-{tp[1]}: offsets {position}..{first[tp] - 1} were deleted before they "
                "were read; set failOnDataLoss=false to go on from the first stored offset"
            )
        return first[tp]
