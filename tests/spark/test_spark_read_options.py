"""Goal: read options that Spark's Kafka connector refuses are refused here too, naming the
option, instead of a read of nothing or a setting silently ignored: a subscribe or assign that
names nothing, minOffsetsPerTrigger above maxOffsetsPerTrigger, a samsa.* client setting that
is misspelt or that the source decides itself. samsa.isolation.level (the connector's
kafka.isolation.level) sets the isolation level. With both admission limits set, a micro-batch
waits for the minimum and reads at most the maximum, as the Kafka connector's composite limit.
Pure: no Spark session, no cluster."""

from __future__ import annotations

import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from samsa.spark import source, stream_source
from samsa.spark.options import OptionError, parse_options
from samsa.spark.stream_source import SamsaStreamReader

BOOT = {"samsa.bootstrap.servers": "h:1"}


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
