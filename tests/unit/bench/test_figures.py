"""Goal: the figures every bench reports are computed as stated — the nearest-rank percentile (a
value really measured, never an interpolation), latencies in microseconds, throughput in records/s
and MB/s of values — and the peers' writers get values of the requested size.

Method: the functions are called on hand-made samples with known answers.
"""

from __future__ import annotations

import pytest

from bench.figures import arrival_latencies, latency_summary, make_values, percentile, throughput


def test_percentile_is_nearest_rank_over_unsorted_samples() -> None:
    samples = list(range(100, 0, -1))  # 100..1, unsorted on purpose
    assert percentile(samples, 0.50) == 50
    assert percentile(samples, 0.99) == 99
    assert percentile(samples, 1.0) == 100
    assert percentile(samples, 0.001) == 1


def test_percentile_returns_a_measured_value_never_an_interpolation() -> None:
    samples = [10, 20, 30, 1000]
    assert percentile(samples, 0.5) == 20
    assert percentile(samples, 0.99) == 1000
    assert percentile([7], 0.99) == 7


@pytest.mark.parametrize("fraction", [0, -0.1, 1.01])
def test_percentile_rejects_fractions_outside_0_1(fraction: float) -> None:
    with pytest.raises(ValueError, match="fraction"):
        percentile([1, 2, 3], fraction)


def test_percentile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 0.5)


def test_latency_summary_converts_nanoseconds_to_microseconds() -> None:
    samples_ns = [1000 * value for value in range(1, 201)]  # 1..200 µs
    summary = latency_summary(samples_ns)
    assert summary == {"p50_us": 100.0, "p99_us": 198.0, "samples": 200}


def test_throughput_counts_records_and_megabytes_per_second() -> None:
    figures = throughput(records=50_000, payload_bytes=5_000_000, seconds=2.0)
    assert figures["records_per_s"] == 25_000
    assert figures["mb_per_s"] == 2.5
    with pytest.raises(ValueError):
        throughput(1, 1, 0.0)


def test_values_have_the_requested_size_and_differ() -> None:
    values = make_values(1024, distinct=16)
    assert {len(value) for value in values} == {1024}
    assert len(set(values)) == 16


def test_arrival_latencies_need_every_record_sent() -> None:
    sent = {b"a": 1.0, b"b": 2.0, b"c": 3.0}
    assert arrival_latencies(sent, {b"a": 1.5, b"b": 2.25, b"c": 3.0, b"x": 9.0}, 3) == [
        0.5,
        0.25,
        0.0,
    ]
    with pytest.raises(RuntimeError, match="1 of 3 records never reached the consumer"):
        arrival_latencies(sent, {b"a": 1.5, b"c": 3.5, b"x": 9.0}, 3)
