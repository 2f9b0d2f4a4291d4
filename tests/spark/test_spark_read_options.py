"""Goal: read options that Spark's Kafka connector refuses are refused here too, naming the
option, instead of a read of nothing or a setting silently ignored: a subscribe or assign that
names nothing, minOffsetsPerTrigger above maxOffsetsPerTrigger, a samsa.* client setting that
is misspelt or that the source decides itself. samsa.isolation.level (the connector's
kafka.isolation.level) sets the isolation level. With both admission limits set, a micro-batch
waits for the minimum and reads at most the maximum, as the Kafka connector's composite limit.
An ending by time on a live topic stops at the end read, and is not refused as an endingOffsets
past the end. Pure: no Spark session, no cluster."""

from __future__ import annotations

from itertools import pairwise

import pytest
from only_topic_a import OnlyTopicA
from pyspark.sql.streaming.datasource import ReadMaxRows

from samsa.spark import source, stream_source
from samsa.spark.options import OptionError, parse_options
from samsa.spark.stream_offsets import from_offset
from samsa.spark.stream_source import SamsaStreamReader

BOOT = {"samsa.bootstrap.servers": "h:1"}
BOOT_CLIENT = {"bootstrap.servers": "h:1"}


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"subscribe": " , "}, "subscribe names no topic"),
        ({"assign": "{}"}, "assign names no partition"),
        ({"assign": '{"a": []}'}, "assign names no partition"),
        ({"assign": '{"a": [true]}'}, "assign must map"),
        (
            {"subscribe": "a", "minOffsetsPerTrigger": "50", "maxOffsetsPerTrigger": "10"},
            "minOffsetsPerTrigger 50 is above maxOffsetsPerTrigger 10",
        ),
        ({"subscribe": "a", "samsa.fetch_max_bytes": "5"}, "samsa.fetch_max_bytes"),
        ({"subscribe": "a", "samsa.request.timeout.ms": "soon"}, "samsa.request.timeout.ms"),
        ({"subscribe": "a", "samsa.auto.offset.reset": "earliest"}, "use startingOffsets"),
        ({"subscribe": "a", "samsa.enable.auto.commit": "true"}, "checkpoint"),
        (
            {
                "subscribe": "a",
                "samsa.isolation.level": "read_uncommitted",
                "isolation.level": "read_committed",
            },
            "samsa.isolation.level and isolation.level disagree",
        ),
        ({"subscribe": "a", "samsa.isolation.level": "dirty"}, "isolation.level"),
    ],
)
def test_read_options_the_kafka_connector_refuses_are_refused_by_name(
    options: dict, words: str
) -> None:
    with pytest.raises(OptionError, match=words):
        parse_options(BOOT | options)


@pytest.fixture(autouse=True)
def no_topic_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planning tasks asks their topics' ids (source.topic_ids): there is no cluster here."""
    monkeypatch.setattr(source, "topic_ids", lambda options, topics: {})


def test_the_kafka_connectors_spelling_of_the_isolation_level_is_taken() -> None:
    """Spark's Kafka connector is told `kafka.isolation.level`: samsa.isolation.level was
    ignored, and the read stayed read_committed."""
    options = BOOT | {"subscribe": "a", "samsa.isolation.level": "read_uncommitted"}
    assert parse_options(options).isolation == "read_uncommitted"
    both = options | {"isolation.level": "read_uncommitted"}
    assert parse_options(both).isolation == "read_uncommitted"


def test_the_range_readers_request_timeout_is_taken() -> None:
    parsed = parse_options(BOOT | {"subscribe": "a", "samsa.request.timeout.ms": "5000"})
    assert parsed.client["request.timeout.ms"] == "5000"
    # by each query's reader in a reused worker, not only the first one's
    first = source.range_reader(BOOT_CLIENT | {"request.timeout.ms": "1000"})
    later = source.range_reader(BOOT_CLIENT | {"request.timeout.ms": "9000"})
    assert (first.timeout_s, later.timeout_s) == (1.0, 9.0)
    assert source.range_reader(BOOT_CLIENT | {"request.timeout.ms": "1000"}) is first


def test_both_admission_limits_apply_to_a_micro_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    tps = [("t", 0)]
    ends = {("t", 0): 5}
    monkeypatch.setattr(stream_source, "subscribed_partitions", lambda o, missing_ok=False: tps)
    monkeypatch.setattr(stream_source, "partition_bounds", lambda o, p: ({("t", 0): 0}, ends))
    options = BOOT | {"subscribe": "t", "minOffsetsPerTrigger": "8", "maxOffsetsPerTrigger": "10"}
    reader = SamsaStreamReader(parse_options(options))
    limit = reader.getDefaultReadLimit()
    assert isinstance(limit, ReadMaxRows) and limit.max_rows == 10
    assert reader.latestOffset({"t": {"0": 0}}, limit) == {"t": {"0": 0}}  # 5 < 8: wait
    ends[("t", 0)] = 30
    assert reader.latestOffset({"t": {"0": 0}}, limit) == {"t": {"0": 10}}
    assert source  # the module the monkeypatched names come from is importable


@pytest.mark.parametrize(("rates", "limit"), [([100, 1, 0, 1, 3], 3), ([9, 1, 1, 1, 1, 1, 1], 2)])
def test_a_partition_is_not_starved_by_a_limit_below_the_partitions_waiting(
    monkeypatch: pytest.MonkeyPatch, rates: list[int], limit: int
) -> None:
    """Partitions fed `rates` records a micro-batch, `limit` read per micro-batch. The
    proportional share of the small ones is 0, and what rounding left went to the one with the
    largest remainder, the same one each time: with [100, 1, 0, 1, 3] and 3, t-1 and t-3 were
    never read. Now each partition with records waiting is read at least once in every
    len(partitions) micro-batches, and each reads exactly the limit."""
    tps = [("t", i) for i in range(len(rates))]
    ends = dict.fromkeys(tps, 0)
    monkeypatch.setattr(stream_source, "subscribed_partitions", lambda o, missing_ok=False: tps)
    bounds = lambda o, p: (dict.fromkeys(p, 0), dict(ends))  # noqa: E731
    monkeypatch.setattr(stream_source, "partition_bounds", bounds)
    options = BOOT | {"subscribe": "t", "maxOffsetsPerTrigger": str(limit)}
    reader = SamsaStreamReader(parse_options(options))
    offset = reader.latestOffset(reader.initialOffset(), ReadMaxRows(limit))
    passed_over = dict.fromkeys(tps, 0)
    for _ in range(100):
        for tp, rate in zip(tps, rates, strict=True):
            ends[tp] += rate
        before = from_offset(offset)
        offset = reader.latestOffset(offset, ReadMaxRows(limit))
        after = from_offset(offset)
        assert sum(after.values()) - sum(before.values()) == limit
        for tp in tps:
            waited = ends[tp] > before[tp] and after[tp] == before[tp]
            passed_over[tp] = passed_over[tp] + 1 if waited else 0
            assert passed_over[tp] < len(tps), f"{tp} starves"


def test_assigned_partitions_the_cluster_lacks_are_named_or_data_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """assign names a-0, a-5 (no such partition) and b-0 (topic deleted mid-stream): a read
    cannot start on them (ListOffsets for them was asked for session.timeout.ms, 45 s, then
    failed with "no leader answered"; a stream did that at every trigger whatever
    failOnDataLoss said), and a running stream treats them as deleted, as subscribe does:
    failOnDataLoss stops it naming them, false goes on without them."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    bounds: list[list] = []

    def partition_bounds(options: object, tps: list) -> tuple[dict, dict]:
        bounds.append(list(tps))
        return {tp: 0 for tp in tps}, {tp: 9 for tp in tps}

    monkeypatch.setattr(source, "Admin", OnlyTopicA)
    monkeypatch.setattr(stream_source, "partition_bounds", partition_bounds)
    assign = BOOT | {"assign": '{"a": [0, 5], "b": [0]}'}
    with pytest.raises(OptionError, match="assign names partitions that do not exist: a-5, b-0"):
        source.subscribed_partitions(parse_options(assign))
    start = {"a": {"0": 1}, "b": {"0": 3}}
    lenient = SamsaStreamReader(parse_options(assign | {"failOnDataLoss": "false"}))
    assert lenient.latestOffset(start, ReadAllAvailable()) == {"a": {"0": 9}}
    assert bounds == [[("a", 0)]]  # nothing asked of a partition that is not there
    strict = SamsaStreamReader(parse_options(assign))
    with pytest.raises(OptionError, match="b-0 no longer exist"):
        strict.latestOffset(start, ReadAllAvailable())


def test_a_new_partition_that_does_not_start_at_0_is_data_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """t-1 appeared since the last micro-batch, and retention (or DeleteRecords) deleted its
    first records before the stream looked: Kafka's connector reports that as data loss ("Added
    partition starts from 4 instead of 0"); it was read from 4 in silence."""
    monkeypatch.setattr(
        stream_source, "partition_bounds", lambda options, tps: ({tp: 4 for tp in tps}, {})
    )
    monkeypatch.setattr(
        stream_source, "subscribed_partitions", lambda options, missing_ok: [("t", 0), ("t", 1)]
    )
    start, end = {"t": {"0": 3}}, {"t": {"0": 7, "1": 9}}
    strict = SamsaStreamReader(parse_options(BOOT | {"subscribe": "t"}))
    with pytest.raises(OptionError, match=r"t-1 starts at 4, not 0.*failOnDataLoss=false"):
        strict.partitions(start, end)
    lenient = SamsaStreamReader(parse_options(BOOT | {"subscribe": "t", "failOnDataLoss": "false"}))
    got = [(p.partition, p.start, p.end) for p in lenient.partitions(start, end)]
    assert got == [(0, 3, 7), (1, 4, 9)]
    monkeypatch.setattr(stream_source, "partition_bounds", lambda o, tps: ({("t", 1): 0}, {}))
    assert [(p.partition, p.start) for p in strict.partitions(start, end)] == [(0, 3), (1, 0)]


def test_a_replayed_new_partition_of_a_deleted_topic_fails_at_once_or_is_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A micro-batch planned with u-0 new (its end logged), replayed after topic u was deleted:
    its first offset was asked for, which a missing partition answers only when the consumer
    gives up (session.timeout.ms, 45 s), then with a bare "no leader answered". Now the
    partition's absence is data loss at once, naming it, as Kafka's connector reports it
    ("Cannot find earliest offsets"), or (failOnDataLoss=false) the batch goes on without it."""
    asked: list[list] = []

    def partition_bounds(options: object, tps: list) -> tuple[dict, dict]:
        asked.append(list(tps))
        return {tp: 0 for tp in tps}, {}

    monkeypatch.setattr(stream_source, "partition_bounds", partition_bounds)
    monkeypatch.setattr(
        stream_source, "subscribed_partitions", lambda options, missing_ok: [("t", 0), ("t", 1)]
    )
    start, end = {"t": {"0": 3}}, {"t": {"0": 7, "1": 2}, "u": {"0": 5}}
    strict = SamsaStreamReader(parse_options(BOOT | {"subscribePattern": ".*"}))
    with pytest.raises(OptionError, match="u-0 appeared after the previous micro-batch and no"):
        strict.partitions(start, end)
    assert asked == [], "nothing asked of a partition that is not there"
    options = BOOT | {"subscribePattern": ".*", "failOnDataLoss": "false"}
    lenient = SamsaStreamReader(parse_options(options))
    got = [(p.topic, p.partition, p.start, p.end) for p in lenient.partitions(start, end)]
    assert got == [("t", 0, 3, 7), ("t", 1, 0, 2)]
    assert asked == [[("t", 1)]]


def test_the_driver_clients_take_the_samsa_keys_they_use_and_the_rest_is_warned_of(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The driver's Admin and Consumer were given samsa.bootstrap.servers only (and the
    isolation level): samsa.client.id, samsa.request.timeout.ms and samsa.default.api.timeout.ms
    were checked, then dropped there, and a consumer setting the source has no use for
    (samsa.fetch.max.bytes) was accepted without a word."""
    seen: list[dict] = []

    class RecordingAdmin(OnlyTopicA):
        def __init__(self, config: dict) -> None:
            seen.append(dict(config))

    monkeypatch.setattr(source, "Admin", RecordingAdmin)
    keys = {
        "samsa.client.id": "job-7",
        "samsa.request.timeout.ms": "1000",
        "samsa.default.api.timeout.ms": "2000",
        "samsa.retry.backoff.ms": "50",
    }
    with caplog.at_level("WARNING"):
        options = parse_options(BOOT | keys | {"subscribe": "a"})
    assert caplog.text == ""
    source.subscribed_partitions(options)
    assert seen == [
        BOOT_CLIENT
        | {"client.id": "job-7", "request.timeout.ms": "1000", "default.api.timeout.ms": "2000"}
    ]
    assert options.consumer_config() == BOOT_CLIENT | {
        "client.id": "job-7",
        "default.api.timeout.ms": "2000",
        "retry.backoff.ms": "50",
        "isolation.level": "read_committed",
    }
    with caplog.at_level("WARNING"):
        parse_options(BOOT | {"subscribe": "a", "samsa.fetch.max.bytes": "1024"})
    assert "samsa.fetch.max.bytes: taken by a consumer but not used by the Samsa source" in (
        caplog.text
    )
    with pytest.raises(OptionError, match=r"samsa\.default\.api\.timeout\.ms: .*no smaller than"):
        parse_options(BOOT | {"subscribe": "a", "samsa.default.api.timeout.ms": "2000"})


def test_a_stream_splits_its_micro_batches_into_min_partitions_tasks() -> None:
    """minPartitions applies to a stream's micro-batches as to a batch read (the Kafka
    connector's too); a stream took it and read each partition's range in one task."""
    options = BOOT | {"subscribe": "t", "minPartitions": "4"}
    reader = SamsaStreamReader(parse_options(options))
    got = [
        (p.partition, p.start, p.end)
        for p in reader.partitions({"t": {"0": 0, "1": 90}}, {"t": {"0": 100, "1": 100}})
    ]
    assert len(got) >= 4
    assert sorted(got) == got and {p for p, _, _ in got} == {0, 1}
    for number, start, end in ((0, 0, 100), (1, 90, 100)):
        pieces = [(s, e) for p, s, e in got if p == number]
        assert pieces[0][0] == start and pieces[-1][1] == end
        assert all(a[1] == b[0] for a, b in pairwise(pieces))


def test_a_batch_read_whose_start_is_past_its_end_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """startingOffsets 50 and endingOffsets 10 (or a start past the partition's end) read
    nothing, silently; Spark's Kafka connector fails such a range ("Beginning offset 50 is after
    the ending offset 10 ... You either provided an invalid fromOffset"). Offsets found by time
    may cross (timestamps need not grow with offsets): that is an empty range, as before."""
    monkeypatch.setattr(source, "subscribed_partitions", lambda options: [("t", 0)])
    monkeypatch.setattr(source, "partition_bounds", lambda o, tps: ({("t", 0): 0}, {("t", 0): 30}))
    crossed = {"startingOffsets": '{"t": {"0": 20}}', "endingOffsets": '{"t": {"0": 10}}'}
    with pytest.raises(OptionError, match=r"t-0: startingOffsets 20 is after the end, 10"):
        source.offset_ranges(parse_options(BOOT | {"subscribe": "t"} | crossed))
    beyond = {"startingOffsets": '{"t": {"0": 40}}'}
    with pytest.raises(OptionError, match=r"t-0: startingOffsets 40 is after the end, 30"):
        source.offset_ranges(parse_options(BOOT | {"subscribe": "t"} | beyond))
    fine = {"startingOffsets": '{"t": {"0": 30}}'}
    assert source.offset_ranges(parse_options(BOOT | {"subscribe": "t"} | fine))[0].size == 0

    def found(options: object, times: dict) -> dict:
        return {tp: 20 if ms == 5 else 10 for tp, ms in times.items()}

    monkeypatch.setattr(source, "offsets_for_times", found)
    by_time = {"startingTimestamp": "5", "endingTimestamp": "9"}
    ranges = source.offset_ranges(parse_options(BOOT | {"subscribe": "t"} | by_time))
    assert [(r.start, r.end) for r in ranges] == [(20, 20)]


def test_a_range_wholly_deleted_is_empty_without_failondataloss() -> None:
    """start 2 and end 5 lie below the first offset, 10: failOnDataLoss names the loss, false
    reads nothing (the start moved to 10 is not the user's start past the end)."""
    from samsa.spark.ranges import resolve

    tps, first, last = [("t", 0)], {("t", 0): 10}, {("t", 0): 20}
    spec, end = {"t": {0: 2}}, {"t": {0: 5}}
    with pytest.raises(OptionError, match="offset 2 was deleted"):
        resolve(tps, spec, end, first, last, True, True)
    assert resolve(tps, spec, end, first, last, False, True)[0].size == 0


def test_an_ending_by_time_on_a_live_topic_stops_at_the_end_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The read asks each partition's end (100), then the first offset at endingTimestamp:
    records written in between, older ones then one that late, put it at 105, and the read
    failed with "endingOffsets: t-0 ends at 100, not 105 (use -1: latest)", an option never
    set. It stops at the end read, as endingOffsets=latest would; an endingOffsets past the end
    is still refused."""
    monkeypatch.setattr(source, "subscribed_partitions", lambda options: [("t", 0)])
    monkeypatch.setattr(source, "partition_bounds", lambda o, tps: ({("t", 0): 0}, {("t", 0): 100}))
    monkeypatch.setattr(source, "offsets_for_times", lambda options, times: {("t", 0): 105})
    by_time = parse_options(BOOT | {"subscribe": "t", "endingTimestamp": "1700000000000"})
    assert [(r.start, r.end) for r in source.offset_ranges(by_time)] == [(0, 100)]
    past = parse_options(BOOT | {"subscribe": "t", "endingOffsets": '{"t": {"0": 105}}'})
    with pytest.raises(OptionError, match="endingOffsets: t-0 ends at 100, not 105"):
        source.offset_ranges(past)


@pytest.mark.parametrize(
    "options",
    [
        {"startingOffsets": '{"a": {"0": 2, "1": 5}}'},  # a has partition 0 only
        {"startingOffsets": '{"a": {"0": 2}, "b": {"0": 5}}'},  # b is not subscribed
        {"endingOffsets": '{"a": {"0": 8, "3": 5}}'},
        {"startingOffsetsByTimestamp": '{"a": {"0": 2, "1": 5}}'},
        {"endingOffsetsByTimestamp": '{"a": {"0": 2}, "b": {"0": 5}}'},
    ],
)
def test_offsets_json_naming_a_partition_not_read_is_refused(
    monkeypatch: pytest.MonkeyPatch, options: dict
) -> None:
    """Kafka's connector asserts that such JSON names exactly the partitions read; the entries
    of others were left out in silence, the read going on as if they had been taken."""
    monkeypatch.setattr(source, "Admin", OnlyTopicA)
    parsed = parse_options(BOOT | {"subscribe": "a"} | options)
    with pytest.raises(OptionError, match=r"does not cover \((a-1|b-0|a-3)\)"):
        source.offset_ranges(parsed)
    if "ending" not in next(iter(options)):
        reader = SamsaStreamReader(parsed)
        with pytest.raises(OptionError, match="names partitions this read does not cover"):
            reader.latestOffset(reader.initialOffset(), ReadMaxRows(10))
