"""Goal: the source's options parse as Spark's Kafka connector's do, and every mistake is refused
with a message naming the option; offsets resolve to the right [start, end) per partition (-2/-1,
data loss refused or skipped as failOnDataLoss says) and split into at least minPartitions tasks
covering exactly the same offsets. Pure: no Spark session, no cluster."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from samsa.spark import source
from samsa.spark.options import OptionError, canonical, parse_options
from samsa.spark.ranges import OffsetRange, offsets_at_times, resolve, split, timestamps_for
from samsa.spark.stream_offsets import capped, from_offset, next_end, to_offset, with_new_partitions

BOOT = {"samsa.bootstrap.servers": "h:1"}


@pytest.fixture(autouse=True)
def no_topic_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planning tasks asks their topics' ids (source.topic_ids): there is no cluster here."""
    monkeypatch.setattr(source, "topic_ids", lambda options, topics: {})


def test_subscribe_and_defaults() -> None:
    parsed = parse_options(BOOT | {"subscribe": "a, b", "samsa.client.id": "x"})
    assert parsed.subscribe == ("a", "b") and parsed.client == {
        "bootstrap.servers": "h:1",
        "client.id": "x",
    }
    # startingOffsets unset (None): earliest for a batch read, latest for a stream
    assert (parsed.starting, parsed.ending, parsed.isolation) == (None, "latest", "read_committed")
    assert parsed.matches("a") and not parsed.matches("c")
    assert parse_options(BOOT | {"subscribePattern": "ev.*"}).matches("events")


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"subscribe": "a"}, "samsa.bootstrap.servers"),
        (BOOT, "exactly one of subscribe"),
        (BOOT | {"subscribe": "a", "assign": '{"a": [0]}'}, "exactly one of subscribe"),
        (BOOT | {"assign": "[0]"}, "assign must map"),
        (BOOT | {"subscribePattern": "("}, "is not a regex"),
        (BOOT | {"subscribe": "a", "startingOffsets": "soon"}, "startingOffsets must be"),
        (BOOT | {"subscribe": "a", "endingOffsets": "earliest"}, "endingOffsets cannot"),
        (BOOT | {"subscribe": "a", "startingOffsets": '{"a": {"0": -3}}'}, "below -2"),
        (BOOT | {"subscribe": "a", "includeHeaders": "yes"}, "includeHeaders must be"),
        (BOOT | {"subscribe": "a", "isolation.level": "dirty"}, "isolation.level"),
        (BOOT | {"subscribe": "a", "minPartitions": "0"}, "minPartitions"),
    ],
)
def test_mistakes_are_refused_naming_the_option(options: dict, words: str) -> None:
    with pytest.raises(OptionError, match=words):
        parse_options(options)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"a": {"0": true}}', "must be"),  # was offset 1
        ('{"a": {"0": 12.9}}', "must be"),  # was 12
        ('{"a": {"0": "12"}}', "must be"),  # was 12
        ('{"a": {"0": 99999999999999999999}}', "must be"),  # not a long
        ('{"a": {"00": 7}}', "must be"),  # was partition 0
        ('{"a": {" 1": 5}}', "must be"),  # was partition 1
        ('{"a": {"0": 5, "0": 7}}', "names '0' twice"),  # was 7
        ('{"a": {"0": 5}, "a": {"1": 7}}', "names 'a' twice"),  # was a-1 only
    ],
)
@pytest.mark.parametrize("name", ["startingOffsets", "endingOffsets", "endingOffsetsByTimestamp"])
def test_offsets_json_is_read_strictly(name: str, text: str, words: str) -> None:
    """Each was read as something (in the comment) in silence: json.loads keeps the last of
    two keys, and int() takes true, floats and strings."""
    with pytest.raises(OptionError, match=f"{name} {words}"):
        parse_options(BOOT | {"subscribe": "a", name: text})


def test_offsets_json_is_canonical() -> None:
    assert canonical({"b": {1: 5, 0: 3}, "a": {0: 1}}) == '{"a":{"0":1},"b":{"0":3,"1":5}}'


def test_resolve_ranges_and_data_loss() -> None:
    tps = [("t", 0), ("t", 1)]
    first, last = {("t", 0): 10, ("t", 1): 0}, {("t", 0): 50, ("t", 1): 7}
    got = resolve(tps, {"t": {0: -2, 1: 3}}, {"t": {0: 40, 1: -1}}, first, last, True)
    assert got == [OffsetRange("t", 0, 10, 40), OffsetRange("t", 1, 3, 7)]
    with pytest.raises(OptionError, match="failOnDataLoss"):
        resolve(tps, {"t": {0: 2, 1: 0}}, "latest", first, last, True)
    skipped = resolve(tps, {"t": {0: 2, 1: 0}}, "latest", first, last, False)
    assert skipped[0] == OffsetRange("t", 0, 10, 50)
    with pytest.raises(OptionError, match="names no offset"):
        resolve(tps, {"t": {0: 1}}, "latest", first, last, False)


@given(st.lists(st.integers(0, 500), min_size=1, max_size=5), st.integers(1, 20))
@example([0, 2], 2)  # an empty range must not count as a task
def test_split_covers_the_same_offsets_in_enough_tasks(sizes: list[int], wanted: int) -> None:
    ranges = [OffsetRange("t", p, 100, 100 + size) for p, size in enumerate(sizes)]
    pieces = split(ranges, wanted)
    covered = sorted((r.partition, o) for r in pieces for o in range(r.start, r.end))
    assert covered == sorted((r.partition, o) for r in ranges for o in range(r.start, r.end))
    assert all(r.size for r in pieces), "no empty task"
    assert len(pieces) >= min(wanted, sum(sizes))


def test_stream_offsets_are_canonical_and_round_trip() -> None:
    positions = {("b", 10): 5, ("a", 2): 1, ("b", 9): 0}
    offset = to_offset(positions)
    assert list(offset) == ["a", "b"] and list(offset["b"]) == ["10", "9"]  # string order
    assert from_offset(offset) == positions
    assert with_new_partitions({("a", 0): 4}, {("a", 0): 0, ("a", 1): 7}) == {
        ("a", 0): 4,
        ("a", 1): 7,
    }


@given(
    st.lists(st.tuples(st.integers(0, 50), st.integers(0, 500)), min_size=1, max_size=6),
    st.one_of(st.none(), st.integers(1, 300)),
)
@example(pairs=[(0, 1), (0, 1), (0, 4)], max_rows=3)  # the floors once gave the big one 2
def test_a_micro_batch_never_overshoots_and_never_starves_a_partition(
    pairs: list[tuple[int, int]], max_rows: int | None
) -> None:
    start = {("t", p): s for p, (s, _) in enumerate(pairs)}
    latest = {("t", p): s + w for p, (s, w) in enumerate(pairs)}
    end = next_end(start, latest, max_rows=max_rows)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in start)
    read = sum(end[tp] - start[tp] for tp in start)
    waiting = sum(latest[tp] - start[tp] for tp in start)
    if max_rows is None or waiting <= max_rows:
        assert end == latest
    else:
        assert read == max_rows, "exactly the limit"
        busy = [tp for tp in start if latest[tp] > start[tp]]
        if max_rows >= len(busy):
            assert all(end[tp] > start[tp] for tp in busy), "no partition starves"


def test_min_rows_waits_and_available_now_caps() -> None:
    start, latest = {("t", 0): 0}, {("t", 0): 5}
    assert next_end(start, latest, min_rows=10) == start
    assert next_end(start, latest, min_rows=5) == latest
    start = {("t", 0): 1, ("t", 1): 0}
    assert capped({("t", 0): 9, ("t", 1): 3}, {("t", 0): 7}, start) == {("t", 0): 7, ("t", 1): 0}
    assert capped({("t", 0): 9}, None, start) == {("t", 0): 9}


def test_offsets_by_time_parse_and_the_single_timestamp_wins() -> None:
    by_partition = '{"a": {"0": 1700000000000, "1": 5}}'
    parsed = parse_options(
        BOOT
        | {
            "subscribe": "a",
            "startingOffsetsByTimestamp": by_partition,
            "endingTimestamp": "1800000000000",
            "startingOffsetsByTimestampStrategy": "LATEST",
        }
    )
    assert parsed.starting_times == {"a": {0: 1_700_000_000_000, 1: 5}}
    assert parsed.ending_times == 1_800_000_000_000
    assert parsed.starting_time_strategy == "latest"
    both = BOOT | {"subscribe": "a", "startingTimestamp": "7", "startingOffsetsByTimestamp": "{}"}
    assert parse_options(both).starting_times == 7
    assert parse_options(BOOT | {"subscribe": "a"}).starting_time_strategy == "error"


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"startingTimestamp": "-5"}, "startingTimestamp must be milliseconds"),
        ({"endingTimestamp": "soon"}, "endingTimestamp must be milliseconds"),
        ({"startingOffsetsByTimestamp": "[1]"}, "startingOffsetsByTimestamp must be JSON"),
        ({"endingOffsetsByTimestamp": '{"a": {"0": -1}}'}, "timestamp -1 is negative"),
        ({"startingOffsetsByTimestampStrategy": "skip"}, "must be error or latest"),
    ],
)
def test_bad_offsets_by_time_are_refused_by_name(options: dict, words: str) -> None:
    with pytest.raises(OptionError, match=words):
        parse_options(BOOT | {"subscribe": "a"} | options)


def test_offsets_at_times_become_offsets_json_for_resolve() -> None:
    partitions = [("a", 0), ("a", 1)]
    wanted = timestamps_for({"a": {0: 100, 1: 200}}, partitions, "startingOffsetsByTimestamp")
    assert wanted == {("a", 0): 100, ("a", 1): 200}
    assert timestamps_for(9, partitions, "endingTimestamp") == {("a", 0): 9, ("a", 1): 9}
    with pytest.raises(OptionError, match="names no timestamp for a-1"):
        timestamps_for({"a": {0: 100}}, partitions, "startingOffsetsByTimestamp")
    found = {("a", 0): 42, ("a", 1): None}
    offsets = offsets_at_times(found, wanted, "startingOffsetsByTimestamp", True)
    assert offsets == {"a": {0: 42, 1: -1}}  # none that late: the partition's end
    first, last = {("a", 0): 0, ("a", 1): 0}, {("a", 0): 50, ("a", 1): 60}
    ranges = resolve(partitions, offsets, "latest", first, last, True)
    assert [(r.start, r.end) for r in ranges] == [(42, 50), (60, 60)]
    with pytest.raises(OptionError, match="a-1 holds no record at or after 200 ms"):
        offsets_at_times(found, wanted, "startingOffsetsByTimestamp", False)


def test_write_options_are_read_whatever_the_case_spark_hands_them_in() -> None:
    from pyspark.sql.types import BinaryType, StructField, StructType

    from samsa.spark.sink import write_options

    schema = StructType([StructField("value", BinaryType())])
    # Spark lower-cases the keys of a data source's options
    lowered = write_options(BOOT | {"topic": "t", "exactlyonce": "false"}, schema)
    assert (lowered.topic, lowered.exactly_once) == ("t", False)
    as_written = write_options(BOOT | {"Topic": "t", "exactlyOnce": "FALSE"}, schema)
    assert (as_written.topic, as_written.exactly_once) == ("t", False)
    assert write_options(BOOT | {"topic": "t"}, schema).exactly_once
    with pytest.raises(OptionError, match="exactlyOnce must be true or false"):
        write_options(BOOT | {"topic": "t", "exactlyonce": "maybe"}, schema)


def test_a_stream_whose_next_offsets_were_deleted_stops_or_skips_as_fail_on_data_loss_says() -> (
    None
):
    """A checkpointed position below the partition's first stored offset (retention or
    DeleteRecords ran meanwhile): the stream stops naming the partition and the lost offsets, or,
    with failOnDataLoss=false, goes on from the first stored offset. A position at or past it, and
    a partition the bounds do not name, are left alone."""
    from samsa.spark.stream_source import SamsaStreamReader

    first = {("t", 0): 100}
    strict = SamsaStreamReader(parse_options(BOOT | {"subscribe": "t"}))
    with pytest.raises(OptionError, match=r"t-0: offsets 40\.\.99 were deleted"):
        strict._checked_start(("t", 0), 40, first)
    assert strict._checked_start(("t", 0), 100, first) == 100
    assert strict._checked_start(("t", 1), 7, first) == 7
    lenient = SamsaStreamReader(parse_options(BOOT | {"subscribe": "t", "failOnDataLoss": "false"}))
    assert lenient._checked_start(("t", 0), 40, first) == 100


def test_a_stream_whose_partition_end_went_back_stops_or_reads_on_as_fail_on_data_loss_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The checkpoint is at 40 but the partition now ends at 12 (an unclean election truncated
    it, or its topic was re-created): the stream waited silently until the end passed 40, and
    never read what was written at 12..39. Now it stops naming the partition, or, with
    failOnDataLoss=false, reads on from the new end, as Spark's Kafka connector does."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from samsa.spark import stream_source

    ends = {("t", 0): 12, ("t", 1): 50}
    monkeypatch.setattr(
        stream_source, "subscribed_partitions", lambda options, missing_ok=False: list(ends)
    )
    monkeypatch.setattr(
        stream_source, "partition_bounds", lambda options, tps: ({tp: 0 for tp in tps}, ends)
    )
    start = {"t": {"0": 40, "1": 45}}
    strict = stream_source.SamsaStreamReader(parse_options(BOOT | {"subscribe": "t"}))
    with pytest.raises(OptionError, match="t-0: its end offset went back from 40 to 12"):
        strict.latestOffset(start, ReadAllAvailable())
    lenient = stream_source.SamsaStreamReader(
        parse_options(BOOT | {"subscribe": "t", "failOnDataLoss": "false"})
    )
    end = lenient.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 12, "1": 50}}
    assert [(p.partition, p.start, p.end) for p in lenient.partitions(start, end)] == [(1, 45, 50)]
    ends[("t", 0)] = 20  # written since: read from where the stream went on
    assert lenient.latestOffset(end, ReadAllAvailable()) == {"t": {"0": 20, "1": 50}}
    assert [
        (p.partition, p.start, p.end) for p in lenient.partitions(end, {"t": {"0": 20, "1": 50}})
    ] == [(0, 12, 20)]


def test_a_stream_whose_topic_was_deleted_stops_or_drops_it_as_fail_on_data_loss_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pattern's topic deleted between micro-batches: the checkpointed offset names partitions
    the cluster no longer has. The stream stops naming them (it crashed with a KeyError), or,
    with failOnDataLoss=false, leaves them out of the offsets and reads the rest; a partition
    new since then starts at its first offset."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from samsa.spark import stream_source

    now = [("keep", 0), ("new", 0)]
    monkeypatch.setattr(
        stream_source, "subscribed_partitions", lambda options, missing_ok=False: now
    )
    monkeypatch.setattr(
        stream_source,
        "partition_bounds",
        lambda options, tps: ({tp: 1 for tp in tps}, {tp: 9 for tp in tps}),
    )
    start = {"gone": {"0": 4, "1": 5}, "keep": {"0": 2}}
    pattern = BOOT | {"subscribePattern": ".*"}
    strict = stream_source.SamsaStreamReader(parse_options(pattern))
    with pytest.raises(OptionError, match="gone-0, gone-1 no longer exist"):
        strict.latestOffset(start, ReadAllAvailable())
    lenient = stream_source.SamsaStreamReader(parse_options(pattern | {"failOnDataLoss": "false"}))
    end = lenient.latestOffset(start, ReadAllAvailable())
    assert end == {"keep": {"0": 9}, "new": {"0": 9}}
    assert [(p.topic, p.start, p.end) for p in lenient.partitions(start, end)] == [
        ("keep", 2, 9),
        ("new", 1, 9),
    ]


def test_subscribe_pattern_matches_the_topics_a_group_subscription_would() -> None:
    """subscribePattern is RE2 matched against whole names, internal topics excluded, as the
    coordinator matches a group's regex (samsa.common.topic_regex) and as Kafka's consumer does:
    the same pattern names the same topics in Spark and in a consumer group. Python's `re` read
    `[[:alpha:]]` as a character set, refused `\\pL` and took lookaheads RE2 refuses."""
    posix = parse_options(BOOT | {"subscribePattern": "[[:alpha:]]+"})
    assert posix.matches("events") and not posix.matches("events-1")
    assert parse_options(BOOT | {"subscribePattern": r"\pL+"}).matches("events")
    with pytest.raises(OptionError, match="RE2 syntax"):
        parse_options(BOOT | {"subscribePattern": "(?!x).*"})
    everything = parse_options(BOOT | {"subscribePattern": ".*"})
    assert everything.matches("events")
    assert not everything.matches("__consumer_offsets")
    assert not everything.matches("__transaction_state")


def test_available_now_reads_no_partition_that_appeared_after_it_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Trigger.AvailableNow reads what was there when it started (Kafka's connector plans only
    the partitions it saw then): a partition created since, written to all the while, would
    keep the run from ever ending. It joins the offsets at its first offset, for the next run."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from samsa.spark import stream_source

    seen = [[("t", 0)]]
    monkeypatch.setattr(
        stream_source, "subscribed_partitions", lambda options, missing_ok=False: seen[0]
    )
    monkeypatch.setattr(
        stream_source,
        "partition_bounds",
        lambda options, tps: ({tp: 2 for tp in tps}, {tp: 7 + tp[1] * 90 for tp in tps}),
    )
    reader = stream_source.SamsaStreamReader(parse_options(BOOT | {"subscribePattern": "t"}))
    reader.prepareForTriggerAvailableNow()
    seen[0] = [("t", 0), ("t", 1)]  # the topic grew; t-1 ends at 97 and goes on growing
    end = reader.latestOffset({"t": {"0": 3}}, ReadAllAvailable())
    assert end == {"t": {"0": 7, "1": 2}}


@pytest.mark.parametrize(
    ("options", "stream", "words"),
    [
        ({"startingOffsets": "latest"}, False, "batch read cannot start at latest"),
        ({"startingOffsets": '{"a": {"0": -1}}'}, False, "a-0 cannot be -1"),
        ({"endingOffsets": "latest"}, True, "endingOffsets is not valid for a stream"),
        ({"endingTimestamp": "5"}, True, "endingTimestamp is not valid for a stream"),
        ({"endingoffsetsbytimestamp": '{"a": {"0": 5}}'}, True, "endingOffsetsByTimestamp"),
    ],
)
def test_options_of_the_other_kind_of_read_are_refused(
    options: dict, stream: bool, words: str
) -> None:
    """As Kafka's connector: a batch read that starts at latest would read nothing, and a
    stream would ignore an ending; each is refused naming the option."""
    from pyspark.sql.types import StructType

    from samsa.spark.source import SamsaDataSource

    source = SamsaDataSource(BOOT | {"subscribe": "a"} | options)
    with pytest.raises(OptionError, match=words):
        source.streamReader(StructType()) if stream else source.reader(StructType())
    fine = SamsaDataSource(BOOT | {"subscribe": "a"} | options)
    fine.reader(StructType()) if stream else fine.streamReader(StructType())


def test_min_offsets_per_trigger_waits_no_longer_than_max_trigger_delay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """minOffsetsPerTrigger holds a micro-batch back while fewer records wait, but, as in Kafka's
    connector, for at most maxTriggerDelay (15 minutes by default) since the last micro-batch:
    a stream's last few records were otherwise never read."""
    from pyspark.sql.streaming.datasource import ReadMinRows

    from samsa.spark import stream_source

    clock = [1000.0]
    monkeypatch.setattr(stream_source.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(
        stream_source, "subscribed_partitions", lambda options, missing_ok=False: [("t", 0)]
    )
    monkeypatch.setattr(
        stream_source, "partition_bounds", lambda options, tps: ({("t", 0): 0}, {("t", 0): 5})
    )
    start = {"t": {"0": 2}}
    reader = stream_source.SamsaStreamReader(
        parse_options(BOOT | {"subscribe": "t", "minOffsetsPerTrigger": "10"})
    )
    assert reader.latestOffset(start, ReadMinRows(10)) == start  # 3 wait: held back
    clock[0] += 15 * 60 - 1
    assert reader.latestOffset(start, ReadMinRows(10)) == start
    clock[0] += 1
    assert reader.latestOffset(start, ReadMinRows(10)) == {"t": {"0": 5}}  # 15 minutes on
    assert reader.latestOffset({"t": {"0": 5}}, ReadMinRows(10)) == {"t": {"0": 5}}
    quick = stream_source.SamsaStreamReader(
        parse_options(BOOT | {"subscribe": "t", "maxTriggerDelay": "30s"})
    )
    clock[0] += 30
    assert quick.latestOffset(start, ReadMinRows(10)) == {"t": {"0": 5}}
    with pytest.raises(OptionError, match="maxTriggerDelay must be"):
        parse_options(BOOT | {"subscribe": "t", "maxTriggerDelay": "soon"})


def test_a_subscribed_topic_deleted_mid_stream_is_data_loss_not_a_bad_option(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """subscribe=a,b and b is deleted while the stream runs: with failOnDataLoss=false the
    stream goes on with a (it failed: "subscribe names topics that do not exist"), else it stops
    naming b's partitions. A stream cannot start on a topic that does not exist."""
    from only_topic_a import OnlyTopicA
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from samsa.spark import source, stream_source

    monkeypatch.setattr(source, "Admin", OnlyTopicA)
    monkeypatch.setattr(
        stream_source,
        "partition_bounds",
        lambda options, tps: ({tp: 0 for tp in tps}, {tp: 9 for tp in tps}),
    )
    start = {"a": {"0": 1}, "b": {"0": 3}}
    both = BOOT | {"subscribe": "a,b"}
    lenient = stream_source.SamsaStreamReader(parse_options(both | {"failOnDataLoss": "false"}))
    assert lenient.latestOffset(start, ReadAllAvailable()) == {"a": {"0": 9}}
    strict = stream_source.SamsaStreamReader(parse_options(both))
    with pytest.raises(OptionError, match="b-0 no longer exist"):
        strict.latestOffset(start, ReadAllAvailable())
    with pytest.raises(OptionError, match=r"subscribe names topics that do not exist: \['b'\]"):
        lenient.latestOffset(lenient.initialOffset(), ReadAllAvailable())
