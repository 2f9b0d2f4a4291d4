"""Goal: the Spark bench's rates count only rows really there and read — its input fails when a
record of it failed, the noop-sink reads are set against a row count checked untimed, and the
SDK's read must have read every row it is credited with.

Method: the SDK's Producer and PartitionRangeReader are replaced by fakes and a DataFrame by an
object with count() (no Spark, no cluster)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bench import spark_bench


class _FailingProducer:
    def __init__(self, config: dict) -> None:
        self.failed_records = 0

    def __enter__(self) -> _FailingProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def send(self, topic: str, value: bytes, key: bytes, partition: int) -> None:
        self.failed_records += partition == 3  # one partition's batches fail for good

    def flush(self, timeout: float) -> None:
        pass


class _HalfReader:
    def __init__(self, config: dict) -> None:
        pass

    def __enter__(self) -> _HalfReader:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def records(self, topic: str, partition: int, start: int, end: int, isolation: str) -> range:
        return range((end - start) // 2)


def test_the_input_fails_when_a_record_of_it_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    import samsa.client

    monkeypatch.setattr(samsa.client, "Producer", _FailingProducer)
    monkeypatch.setattr(spark_bench, "create_topic", lambda *args: None)
    with pytest.raises(RuntimeError, match="250 of 1,000 records failed"):
        spark_bench.produce("boot", "t", 1000)


def test_the_sdk_read_is_credited_only_with_the_rows_it_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import samsa.client.partition_range as partition_range

    monkeypatch.setattr(partition_range, "PartitionRangeReader", _HalfReader)
    ends = {partition: 1000 for partition in range(4)}
    with pytest.raises(RuntimeError, match="read 2,000 rows of 4,000"):
        spark_bench.timed(4000, lambda: spark_bench.sdk_read("boot", "t", ends))
    assert spark_bench.timed(2000, lambda: spark_bench.sdk_read("boot", "t", ends))["rows_per_s"]
    assert spark_bench.timed(10, lambda: None)["rows_per_s"]  # a write returns no count


def test_a_read_short_of_the_rows_produced_is_refused() -> None:
    spark_bench.checked_rows(SimpleNamespace(count=lambda: 1000), 1000)
    with pytest.raises(RuntimeError, match="holds 999 rows, 1,000 were produced"):
        spark_bench.checked_rows(SimpleNamespace(count=lambda: 999), 1000)
