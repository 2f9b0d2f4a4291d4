"""Admin.list_offsets' pure half and `samsa topics offsets --time`: what a caller may ask for,
what is refused with a message saying what to fix, and answers into ListedOffset."""

from __future__ import annotations

import pytest

from samsa.cli.topic_offsets import offset_spec
from samsa.client.listed_offsets import (
    ListedOffset,
    isolation_of,
    list_offsets_request,
    listed_offset_of,
    offset_spec_of,
    timestamp_specs,
)
from samsa.common.errors import InvalidConfigError
from samsa.v1 import broker_pb2, records_pb2


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("earliest", (broker_pb2.OFFSET_SPEC_EARLIEST, -1)),
        ("LATEST", (broker_pb2.OFFSET_SPEC_LATEST, -1)),
        ("max_timestamp", (broker_pb2.OFFSET_SPEC_MAX_TIMESTAMP, -1)),
        ("max-timestamp", (broker_pb2.OFFSET_SPEC_MAX_TIMESTAMP, -1)),
        (0, (broker_pb2.OFFSET_SPEC_TIMESTAMP, 0)),
        (1_700_000_000_000, (broker_pb2.OFFSET_SPEC_TIMESTAMP, 1_700_000_000_000)),
    ],
)
def test_specs_a_caller_may_give(spec: str | int, expected: tuple[int, int]) -> None:
    assert offset_spec_of(spec) == expected


@pytest.mark.parametrize("spec", ["newest", "", -1, True, 1.5])
def test_other_specs_are_refused_naming_what_is_accepted(spec: object) -> None:
    with pytest.raises(ValueError, match=r"earliest|ms since the epoch"):
        offset_spec_of(spec)  # type: ignore[arg-type]


def test_isolation_levels_by_kafka_name() -> None:
    assert isolation_of("read_committed") == records_pb2.ISOLATION_LEVEL_READ_COMMITTED
    assert isolation_of("read_uncommitted") == records_pb2.ISOLATION_LEVEL_READ_UNCOMMITTED
    with pytest.raises(InvalidConfigError, match="read_committed"):
        isolation_of("committed")


def test_request_groups_partitions_by_topic() -> None:
    request = list_offsets_request(
        {("a", 0): (broker_pb2.OFFSET_SPEC_LATEST, -1), ("b", 2): (3, 42), ("a", 1): (1, -1)},
        records_pb2.ISOLATION_LEVEL_READ_COMMITTED,
    )
    assert request.isolation_level == records_pb2.ISOLATION_LEVEL_READ_COMMITTED
    asked = {
        (t.name, p.partition): (p.offset_spec, p.timestamp_ms)
        for t in request.topics
        for p in t.partitions
    }
    assert asked == {("a", 0): (2, -1), ("a", 1): (1, -1), ("b", 2): (3, 42)}
    assert [t.name for t in request.topics] == ["a", "b"]


def test_request_names_each_topics_id_the_metadata_knows() -> None:
    """KIP-516: a broker hosting another topic of the name answers UNKNOWN_TOPIC_ID rather
    than its offsets; a topic the metadata has no id for is sent without one (not checked)."""
    specs = {("a", 0): (broker_pb2.OFFSET_SPEC_LATEST, -1), ("b", 0): (1, -1)}
    request = list_offsets_request(specs, 0, {"a": b"\x0a" * 16, "c": b"\x0c" * 16})
    assert {t.name: t.topic_id for t in request.topics} == {"a": b"\x0a" * 16, "b": b""}
    assert all(not t.topic_id for t in list_offsets_request(specs, 0).topics)


def test_answers_become_listed_offsets() -> None:
    answer = broker_pb2.ListOffsetsResponse.PartitionResponse(
        partition=0, offset=12, timestamp_ms=5_000, leader_epoch=3
    )
    assert listed_offset_of(answer) == ListedOffset(12, 5_000, 3)
    unknown_epoch = broker_pb2.ListOffsetsResponse.PartitionResponse(
        offset=-1, timestamp_ms=-1, leader_epoch=-1
    )
    assert listed_offset_of(unknown_epoch) == ListedOffset(-1, -1, None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("latest", "latest"),
        ("-1", "latest"),
        ("-2", "earliest"),
        ("-3", "max_timestamp"),
        ("max-timestamp", "max_timestamp"),
        ("1700000000000", 1_700_000_000_000),
        ("1970-01-01T00:00:01+00:00", 1_000),
    ],
)
def test_cli_time_values(text: str, expected: str | int) -> None:
    assert offset_spec(text) == expected


def test_cli_time_that_is_neither_refused() -> None:
    with pytest.raises(SystemExit, match="--time 'soon'"):
        offset_spec("soon")


def test_offsets_for_times_takes_timestamps_of_zero_and_more_only() -> None:
    """As Kafka's consumer, which refuses a negative target time."""
    assert timestamp_specs({("t", 0): 0, ("t", 1): 7}) == {
        ("t", 0): (broker_pb2.OFFSET_SPEC_TIMESTAMP, 0),
        ("t", 1): (broker_pb2.OFFSET_SPEC_TIMESTAMP, 7),
    }
    for bad in (-1, True, 1.5, "5"):
        with pytest.raises(ValueError, match=r"the target time for \('t', 1\)"):
            timestamp_specs({("t", 0): 0, ("t", 1): bad})  # type: ignore[dict-item]


def test_offsets_for_times_takes_a_numpy_integer_and_refuses_one_past_int64() -> None:
    """A numpy integer is an int, as send() takes one for a record's timestamp
    (record_checks.checked_int), and the lookup took it before the check came; a target past
    int64 is refused naming its partition, not by protobuf's "Value out of range"."""
    numpy = pytest.importorskip("numpy")
    assert timestamp_specs({("t", 0): numpy.int64(7)}) == {
        ("t", 0): (broker_pb2.OFFSET_SPEC_TIMESTAMP, 7)
    }
    with pytest.raises(ValueError, match=r"the target time for \('t', 0\)"):
        timestamp_specs({("t", 0): 2**63})
