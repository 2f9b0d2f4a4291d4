"""Goal: `samsa perf` prints the figures Kafka's perf tests would print for the same run, in the
same lines, and its latency recorder stays within fixed memory however long the run.

Method: perf_stats.py's pure functions on hand-computed numbers (exact strings and values, so a
changed format or an off-by-one rank fails); the recorder fed 1,000,000 known latencies. The
`samsa perf` commands against a real cluster are in tests/integration/test_cli_perf.py.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from samsa.cli import perf_stats
from samsa.cli.perf_stats import (
    CONSUMER_DETAILED_HEADER,
    CONSUMER_HEADER,
    MAX_SAMPLES,
    MB,
    LatencyRecorder,
    ProducerStats,
    consumer_line,
    consumer_progress_line,
    summary_line,
    throttle_sleep_ms,
    window_line,
)


def recorder_of(latencies: list[float], max_samples: int = MAX_SAMPLES) -> LatencyRecorder:
    recorder = LatencyRecorder(max_samples)
    for latency in latencies:
        recorder.record(latency)
    return recorder


def test_the_module_does_no_io() -> None:
    """perf_stats is a pure core: it imports nothing but arithmetic (test_import_direction.py
    checks common/, metadata/ and services/ only, so this module is checked here)."""
    tree = ast.parse(Path(perf_stats.__file__).read_text())
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported == {"__future__", "math", "array"}


def test_percentiles_are_nearest_rank() -> None:
    assert recorder_of([40, 15, 50, 35, 20]).percentiles() == [35, 50, 50, 50]
    assert recorder_of([40, 15, 50, 35, 20]).percentiles((0.3, 0.4, 1.0)) == [20, 20, 50]


def test_percentiles_of_1000_and_1001_samples() -> None:
    """The 99.9th of 1000 samples is the 999th smallest; of 1001, the 1000th (ceil(999.999))."""
    thousand = recorder_of([float(n) for n in range(1000, 0, -1)])
    assert thousand.percentiles() == [500, 950, 990, 999]
    thousand_and_one = recorder_of([float(n) for n in range(1001, 0, -1)])
    assert thousand_and_one.percentiles() == [501, 951, 991, 1000]


def test_count_avg_max_and_no_samples() -> None:
    recorder = recorder_of([2.5, 7.5, 1.0])
    assert (recorder.count, recorder.avg_ms, recorder.max_ms) == (3, 11 / 3, 7.5)
    empty = LatencyRecorder()
    assert (empty.count, empty.avg_ms, empty.max_ms, empty.percentiles()) == (0, 0, 0, [0] * 4)
    with pytest.raises(ValueError):
        recorder.percentiles((0.0,))


def test_over_the_cap_every_stride_th_record_is_kept() -> None:
    recorder = recorder_of([float(n) for n in range(10)], max_samples=4)
    assert (list(recorder.samples), recorder.stride) == ([0, 4, 8], 4)
    assert (recorder.count, recorder.max_ms, recorder.avg_ms) == (10, 9, 4.5)


def test_a_million_samples_stay_within_the_cap_and_near_the_truth() -> None:
    """Latencies 0..999,999 in a scrambled order (n * 7919 mod 10^6 is a permutation): the kept
    samples stay under the cap, and each percentile is within `stride` of the exact one."""
    total = 1_000_000
    recorder = recorder_of([float(n * 7919 % total) for n in range(total)])
    assert len(recorder.samples) <= MAX_SAMPLES
    assert recorder.stride == 4
    assert (recorder.count, recorder.max_ms, recorder.avg_ms) == (total, 999_999, 499_999.5)
    for fraction, estimate in zip(perf_stats.PERCENTILES, recorder.percentiles(), strict=True):
        exact = math.ceil(fraction * total) - 1  # the latencies are their own ranks
        assert abs(estimate - exact) <= recorder.stride, (fraction, estimate, exact)


def test_window_line_in_kafkas_format() -> None:
    line = window_line(
        records=123456,
        size_bytes=123456 * 100,
        elapsed_ms=5000,
        total_latency_ms=123456 * 12.3,
        max_latency_ms=150,
    )
    assert line == (
        "123456 records sent, 24691.2 records/sec (2.35 MB/sec), 12.3 ms avg latency, "
        "150.0 ms max latency."
    )


def test_summary_line_in_kafkas_format() -> None:
    """Latencies 1..1000 ms, 100 bytes each, over 2 s; records/sec as Java's %f (6 decimals)."""
    recorder = recorder_of([float(n) for n in range(1, 1001)])
    assert summary_line(recorder, 1000, size_bytes=100_000, elapsed_ms=2000) == (
        "1000 records sent, 500.000000 records/sec (0.05 MB/sec), 500.50 ms avg latency, "
        "1000.00 ms max latency, 500 ms 50th, 950 ms 95th, 990 ms 99th, 999 ms 99.9th."
    )


def test_summary_percentiles_are_truncated_whole_ms_as_kafkas() -> None:
    recorder = recorder_of([0.4, 1.9, 2.99])
    assert summary_line(recorder, 3, size_bytes=3 * MB, elapsed_ms=1000) == (
        "3 records sent, 3.000000 records/sec (3.00 MB/sec), 1.76 ms avg latency, "
        "2.99 ms max latency, 1 ms 50th, 2 ms 95th, 2 ms 99th, 2 ms 99.9th."
    )


def test_producer_stats_print_a_window_every_interval() -> None:
    stats = ProducerStats(start_ms=0, reporting_interval_ms=5000)
    assert stats.record(10, 100, now_ms=1000) is None
    assert stats.record(20, 100, now_ms=5000) == (
        "2 records sent, 0.4 records/sec (0.00 MB/sec), 15.0 ms avg latency, 20.0 ms max latency."
    )
    assert stats.record(30, 100, now_ms=6000) is None  # a new window began at 5000
    assert stats.record(5, 100, now_ms=10_000) == (
        "2 records sent, 0.4 records/sec (0.00 MB/sec), 17.5 ms avg latency, 30.0 ms max latency."
    )
    assert stats.summary(now_ms=10_000, records=4, size_bytes=400) == (
        "4 records sent, 0.400000 records/sec (0.00 MB/sec), 16.25 ms avg latency, "
        "30.00 ms max latency, 10 ms 50th, 30 ms 95th, 30 ms 99th, 30 ms 99.9th."
    )


def test_a_measured_latency_stands_for_the_records_sent_with_it() -> None:
    """One record in K measured: counts and the average weigh each measurement by its K; the
    maximum and percentiles are over the measurements; the summary's counts are the caller's."""
    stats = ProducerStats(start_ms=0, reporting_interval_ms=5000)
    assert stats.record(10, 1600, now_ms=1000, records=16) is None
    assert stats.record(40, 400, now_ms=5000, records=4) == (
        "20 records sent, 4.0 records/sec (0.00 MB/sec), 16.0 ms avg latency, 40.0 ms max latency."
    )
    assert (stats.latencies.count, stats.latencies.measured) == (20, 2)
    assert stats.summary(now_ms=10_000, records=19, size_bytes=1900) == (
        "19 records sent, 1.900000 records/sec (0.00 MB/sec), 16.00 ms avg latency, "
        "40.00 ms max latency, 10 ms 50th, 40 ms 95th, 40 ms 99th, 40 ms 99.9th."
    )


def test_throttle_sleeps_only_ahead_of_schedule() -> None:
    # 1000 records/s: 100 records are owed 100 ms.
    assert throttle_sleep_ms(100, elapsed_ms=50, records_per_s=1000) == 50
    assert throttle_sleep_ms(100, elapsed_ms=98, records_per_s=1000) == 2  # MIN_SLEEP_MS
    assert throttle_sleep_ms(100, elapsed_ms=99, records_per_s=1000) == 0  # not worth a sleep
    assert throttle_sleep_ms(100, elapsed_ms=150, records_per_s=1000) == 0  # behind
    assert throttle_sleep_ms(10**9, elapsed_ms=1, records_per_s=-1) == 0  # unlimited
    assert throttle_sleep_ms(1, elapsed_ms=0, records_per_s=0.5) == 2000


def test_consumer_lines_in_kafkas_format() -> None:
    assert CONSUMER_HEADER == (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    )
    line = consumer_line(
        "2024-01-02 03:04:05:678",
        "2024-01-02 03:04:07:678",
        elapsed_ms=2000,
        fetch_ms=1000,
        messages=20000,
        size_bytes=2_000_000,
    )
    assert line == (
        "2024-01-02 03:04:05:678, 2024-01-02 03:04:07:678, 1.9073, 0.9537, 20000, 10000.0000, "
        "0, 1000, 1.9073, 20000.0000"
    )
    nothing = consumer_line("a", "b", elapsed_ms=0, fetch_ms=0, messages=0, size_bytes=0)
    assert nothing == "a, b, 0.0000, 0.0000, 0, 0.0000, 0, 0, 0.0000, 0.0000"


def test_consumer_progress_line_in_kafkas_format() -> None:
    assert CONSUMER_DETAILED_HEADER.startswith("time, threadId, data.consumed.in.MB, MB.sec, ")
    line = consumer_progress_line(
        "2024-01-02 03:04:10:000",
        messages=20000,
        size_bytes=2_000_000,
        window_messages=10000,
        window_bytes=1024 * 1024,
        window_ms=5000,
    )
    assert line == (
        "2024-01-02 03:04:10:000, 0, 1.9073, 0.2000, 20000, 2000.0000, 0, 5000, 0.2000, 2000.0000"
    )
