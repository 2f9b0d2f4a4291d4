"""The streaming source's offsets: what Spark checkpoints, and how far one micro-batch reads.

Theory of operation. An offset is `{topic: {partition: next offset}}` with every key a string
and inserted in sorted order, so that its JSON is canonical: Spark compares offsets as JSON
text, and the same position written in another key order would count as new data (an empty
micro-batch committed for nothing). Beside the positions, `"$topicIds": {topic: id in hex}`
records the id (KIP-516) each topic had when the offset was taken ("$" is in no topic name, and
sorts before every character one may hold, so the key comes first and the JSON is the same as
`json.dumps(offset, sort_keys=True)`). A topic whose id now differs from the one its position
was taken under was deleted and created again under the same name (`recreated`): its position
names records of another log, which the caller treats as data loss (failOnDataLoss). An offset
checkpointed before the ids were recorded has none: its topics are never found re-created
(as then). A micro-batch reads [start, end) per partition. `end`:

- every partition's end offset now, at the read's isolation level (ReadAllAvailable);
- with `maxOffsetsPerTrigger` (ReadMaxRows n): exactly n records in all (when more wait),
  shared between the partitions in proportion to what each has waiting (Spark's Kafka connector
  does the same), after one record each to every partition with records waiting, so none
  starves while n is at least their number; what rounding leaves goes first to partitions that
  would get nothing, those passed over in the most micro-batches in a row first (`passed_over`),
  so that none starves when n is below their number either (Kafka's connector then reads more
  than n: at least one record of each);
- with `minOffsetsPerTrigger` (ReadMinRows n): the start itself (no batch) until n records wait;
- under Trigger.AvailableNow, never past the ends seen when the trigger started (a partition
  new since is not read until the next run).

A new query starts from INITIAL, which names no position. Spark keeps no initial offset of a
Python source: it plans the first micro-batch (at the first trigger, even with nothing new)
from `initialOffset()`, and runs it, or replays it after a restart, from `initialOffset()` asked
again (PySpark 4.3, measured). Resolved against the cluster at each call (startingOffsets=latest,
say), batch 0 ran from where the partitions ended by then, and the records written while it was
planned, or before the restart, were never read. So the first micro-batch reads nothing: it ends
at startingOffsets resolved (Spark checkpoints that end), and the next one reads from there.

A partition new since `start` (the topic grew, or a new topic matches the pattern) starts at its
first offset. A start below a partition's first offset means retention deleted records, and a
partition of `start` the cluster no longer has was deleted: the caller decides (failOnDataLoss).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

TopicPartition = tuple[str, int]
Positions = dict[TopicPartition, int]
TopicIds = Mapping[str, bytes]
# Spark's offset dict: {topic: {partition: position}}, and IDS: {topic: id in hex}.
Offset = dict[str, dict[str, int | str]]
# The offset a new query starts from: startingOffsets, not resolved yet. "$" is in no topic name.
INITIAL: dict[str, dict[str, int]] = {"$startingOffsets": {}}
IDS = "$topicIds"  # the topics' ids in an offset (module docstring)


def is_initial(offset: Mapping[str, object]) -> bool:
    return offset == INITIAL


def to_offset(positions: Mapping[TopicPartition, int], ids: TopicIds | None = None) -> Offset:
    """Positions as Spark's offset dict, keys sorted (canonical JSON), with the id in `ids` of
    each topic they name (a topic with none, or an empty one, is recorded without)."""
    offset: Offset = {}
    ids = ids or {}
    named = {t: ids[t].hex() for t in sorted({t for t, _ in positions}) if ids.get(t)}
    if named:
        offset[IDS] = dict(named)
    for (topic, partition), position in sorted(
        positions.items(), key=lambda i: (i[0][0], str(i[0][1]))
    ):
        offset.setdefault(topic, {})[str(partition)] = position
    return offset


def from_offset(offset: Mapping[str, Mapping[str, object]]) -> Positions:
    """The positions of an offset (its ids left out; an offset without them reads the same)."""
    return {
        (topic, int(p)): int(str(o))
        for topic, ps in offset.items()
        if not topic.startswith("$")
        for p, o in ps.items()
    }


def ids_of(offset: Mapping[str, Mapping[str, object]]) -> dict[str, bytes]:
    """The topic ids an offset records: none for one checkpointed before they were."""
    return {topic: bytes.fromhex(str(h)) for topic, h in offset.get(IDS, {}).items()}


def recreated(before: TopicIds, now: TopicIds) -> dict[str, tuple[bytes, bytes]]:
    """The topics whose id now differs from the one `before` records, as (then, now): deleted
    and created again under the same name since. A topic either side does not know (deleted,
    new, or recorded before the ids were) is not: the other checks judge it."""
    return {
        topic: (then, now[topic])
        for topic, then in sorted(before.items())
        if then and now.get(topic) and now[topic] != then
    }


def without_topics(positions: Mapping[TopicPartition, int], topics: Collection[str]) -> Positions:
    """`positions` less every partition of `topics`."""
    return {tp: p for tp, p in positions.items() if tp[0] not in topics}


def with_new_partitions(start: Positions, first: Mapping[TopicPartition, int]) -> Positions:
    """`start`, plus each partition it does not know at its first offset."""
    return {tp: start[tp] if tp in start else first[tp] for tp in sorted(set(start) | set(first))}


def next_end(
    start: Positions,
    latest: Mapping[TopicPartition, int],
    *,
    max_rows: int | None = None,
    min_rows: int | None = None,
    passed_over: Mapping[TopicPartition, int] | None = None,
) -> Positions:
    """Where the next micro-batch ends (see the module docstring). `start` must hold every
    partition of `latest` (with_new_partitions). `passed_over`: how many micro-batches in a row
    each partition had records waiting and got none (`passed_over_after`)."""
    passed_over = passed_over or {}
    waiting = {tp: max(0, latest[tp] - start[tp]) for tp in latest}
    total = sum(waiting.values())
    if min_rows is not None and total < min_rows:
        return dict(start)
    if max_rows is None or total <= max_rows:
        return {tp: max(start[tp], latest[tp]) for tp in latest}
    # One record each to every partition with records waiting when the limit allows (none
    # starves), then the rest in proportion to what is left waiting, largest remainders first.
    busy = sorted(tp for tp, count in waiting.items() if count)
    floor = 1 if max_rows >= len(busy) else 0
    shares = {tp: floor if waiting[tp] else 0 for tp in waiting}
    rest = {tp: waiting[tp] - shares[tp] for tp in waiting}
    budget, left_total = max_rows - sum(shares.values()), sum(rest.values())
    for tp in waiting:
        shares[tp] += rest[tp] * budget // left_total
    left = max_rows - sum(shares.values())
    order = sorted(
        (tp for tp in busy if waiting[tp] > shares[tp]),
        key=lambda tp: (
            shares[tp] > 0,
            -passed_over.get(tp, 0),
            -(rest[tp] * budget % left_total),
            tp,
        ),
    )
    for tp in order[:left]:
        shares[tp] += 1
    return {tp: start[tp] + shares[tp] for tp in latest}


def passed_over_after(
    passed_over: Mapping[TopicPartition, int],
    start: Positions,
    latest: Mapping[TopicPartition, int],
    end: Positions,
) -> dict[TopicPartition, int]:
    """`passed_over` once the micro-batch [start, end) is planned: one more for each partition
    with records waiting that it reads none of, 0 for the others."""
    return {
        tp: passed_over.get(tp, 0) + 1
        for tp in latest
        if latest[tp] > start[tp] and end[tp] == start[tp]
    }


def capped(end: Positions, cap: Mapping[TopicPartition, int] | None, start: Positions) -> Positions:
    """`end`, not past `cap` (the ends seen when Trigger.AvailableNow started); a partition `cap`
    does not know (new since) stays at `start`: it held nothing then, and read it would let a
    partition written to all the while keep the run from ever ending."""
    if cap is None:
        return end
    return {tp: min(position, cap.get(tp, start[tp])) for tp, position in end.items()}
