"""Which offset ranges a batch read covers, and how they are cut into tasks. Pure: no I/O.

`resolve` turns the options' starting and ending offsets (earliest, latest, or per-partition
JSON with -2/-1) into one [start, end) per partition, given each partition's first and end
offsets at the read's isolation level. A start below the first offset means retention deleted
records: with failOnDataLoss it is an error naming the partition, else the range starts at the
first offset; JSON naming a partition the read does not cover is refused (`refuse_unread`),
as in Kafka's connector. Offsets by time (startingTimestamp and the like) become such JSON first:
`timestamps_for` says which timestamp each partition asks for, and `offsets_at_times` turns the
cluster's answers (the first offset at or after it, or none) into offsets. `split` cuts the
ranges so that there are at least `min_partitions` tasks, each range into pieces proportional
to its size (Spark's Kafka connector does the same).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise

from samsa.spark.options import EARLIEST, LATEST, OptionError, SourceOptions, Times

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int  # exclusive

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def resolve(
    partitions: list[TopicPartition],
    starting: str | Mapping[str, Mapping[int, int]],
    ending: str | Mapping[str, Mapping[int, int]],
    first: Mapping[TopicPartition, int],
    last: Mapping[TopicPartition, int],
    fail_on_data_loss: bool,
    refuse_crossed: bool = False,
) -> list[OffsetRange]:
    """One [start, end) per partition. `refuse_crossed` (explicit offsets): a start past the end
    is an error naming it, as in Kafka's connector: a batch read of it read nothing, a stream
    failed later blaming a truncation."""
    ranges = []
    for tp in partitions:
        start = _pick(starting, tp, first[tp], last[tp])
        end = _pick(ending, tp, first[tp], last[tp])
        if end > last[tp]:
            raise OptionError(
                f"endingOffsets: {tp[0]}-{tp[1]} ends at {last[tp]}, not {end} (use -1: latest)"
            )
        if refuse_crossed and start > end:
            if ending == "latest":
                why = "the partition's end offset: it holds no such offset yet"
            else:
                why = "endingOffsets, or the partition's end offset: nothing could be read"
            raise OptionError(
                f"{tp[0]}-{tp[1]}: startingOffsets {start} is after the end, {end} ({why})"
            )
        if start < first[tp]:
            if fail_on_data_loss:
                raise OptionError(
                    f"{tp[0]}-{tp[1]}: offset {start} was deleted (the partition starts at "
                    f"{first[tp]}); set failOnDataLoss=false to start there instead"
                )
            start = first[tp]  # past an end below it: an empty range (all of it was deleted)
        ranges.append(OffsetRange(tp[0], tp[1], start, max(start, end)))
    return ranges


def refuse_unread(options: SourceOptions, partitions: list[TopicPartition]) -> None:
    """Refuse per-partition JSON (of the options in use: by time wins over startingOffsets)
    naming a partition the read does not cover, as Kafka's connector does (it asserts that the
    JSON names exactly the partitions read): a topic the subscription does not name, or a
    partition its topic does not have, was left out in silence, as if read from there."""
    named: list[tuple[str, object]] = [
        ("startingOffsetsByTimestamp", options.starting_times),
        ("endingOffsetsByTimestamp", options.ending_times),
    ]
    if options.starting_times is None:
        named.append(("startingOffsets", options.starting))
    if options.ending_times is None:
        named.append(("endingOffsets", options.ending))
    read = set(partitions)
    for option, spec in named:
        if not isinstance(spec, Mapping):
            continue
        extra = sorted((t, p) for t, ps in spec.items() for p in ps if (t, p) not in read)
        if extra:
            names = ", ".join(f"{topic}-{partition}" for topic, partition in extra)
            raise OptionError(
                f"{option} names partitions this read does not cover ({names}): the "
                "subscription names no such topic, or the topic has no such partition"
            )


def timestamps_for(
    times: Times, partitions: list[TopicPartition], option: str
) -> dict[TopicPartition, int]:
    """The timestamp (ms) each partition is read from or to."""
    if isinstance(times, int):
        return {tp: times for tp in partitions}
    wanted = {}
    for topic, partition in partitions:
        ms = times.get(topic, {}).get(partition)
        if ms is None:
            raise OptionError(f"{option} names no timestamp for {topic}-{partition}: add it")
        wanted[(topic, partition)] = ms
    return wanted


def offsets_at_times(
    found: Mapping[TopicPartition, int | None],
    wanted: Mapping[TopicPartition, int],
    option: str,
    latest_when_none: bool,
    ends: Mapping[TopicPartition, int] | None = None,
) -> dict[str, dict[int, int]]:
    """Offsets JSON (for `resolve`) from each partition's first offset at or after its
    timestamp. A partition with no record that late ends up at its end (`latest_when_none`),
    else it is an error naming it. `ends` (an ending by time): the ends read before the look
    by time; an offset found past one (records came in between the two looks) is that end,
    where `latest` would have stopped the read, not an ending past the end."""
    offsets: dict[str, dict[int, int]] = {}
    for tp, offset in sorted(found.items()):
        if offset is None:
            if not latest_when_none:
                raise OptionError(
                    f"{option}: {tp[0]}-{tp[1]} holds no record at or after {wanted[tp]} ms; "
                    "set startingOffsetsByTimestampStrategy=latest to start at its end"
                )
            offset = LATEST
        elif ends is not None and tp in ends:
            offset = min(offset, ends[tp])
        offsets.setdefault(tp[0], {})[tp[1]] = offset
    return offsets


def split(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    nonempty = [r for r in ranges if r.size]
    total = sum(r.size for r in nonempty)
    if min_partitions is None or len(nonempty) >= min_partitions:
        return nonempty
    pieces = []
    for r in nonempty:
        count = min(r.size, max(1, -(-r.size * min_partitions // total)))  # ceil, <= size
        bounds = [r.start + r.size * i // count for i in range(count + 1)]
        pieces += [OffsetRange(r.topic, r.partition, a, b) for a, b in pairwise(bounds)]
    return pieces


def _pick(
    spec: str | Mapping[str, Mapping[int, int]], tp: TopicPartition, first: int, last: int
) -> int:
    if spec == "earliest":
        return first
    if spec == "latest":
        return last
    assert isinstance(spec, Mapping)
    offset = spec.get(tp[0], {}).get(tp[1])
    if offset is None:
        raise OptionError(f"the offsets JSON names no offset for {tp[0]}-{tp[1]}: add it")
    return {EARLIEST: first, LATEST: last}.get(offset, offset)
