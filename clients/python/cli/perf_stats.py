"""The arithmetic of `samsa perf produce|consume`, kept apart from their loops (perf_commands.py)
so that every figure they print is tested on known numbers: no clock, no I/O here.

The lines are those of Kafka's kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh, field
for field, so that a Kafka user's scripts read them: MB is 1024 * 1024 bytes, the producer's
percentiles are whole milliseconds, the consumer's figures have four decimals.
"""

from __future__ import annotations

import math
from array import array

MB = 1024 * 1024
# Kafka's tool keeps at most 500,000 latencies, too: enough for a 99.9th from 500 samples above it.
MAX_SAMPLES = 500_000
PERCENTILES = (0.50, 0.95, 0.99, 0.999)
# Sleeps shorter than this are not worth a system call (Kafka's throttler: 2 ms); the debt is
# paid by a later sleep instead.
MIN_SLEEP_MS = 2.0
CONSUMER_FIELDS = (
    "data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
CONSUMER_HEADER = f"start.time, end.time, {CONSUMER_FIELDS}"
CONSUMER_DETAILED_HEADER = f"time, threadId, {CONSUMER_FIELDS}"


class LatencyRecorder:
    """Count, average, maximum and nearest-rank percentiles of latencies, in fixed memory.

    Each `record` is one measured latency standing for `weight` records (the perf tool measures
    one record in K: see perf_commands.py); count and average are over the records, maximum and
    percentiles over the measured latencies. Percentiles come from a deterministic subsample:
    every measured latency while fewer than `max_samples` are kept; when the buffer fills, every
    other sample is dropped and from then on only every `stride`-th one is kept (stride doubles
    each time). The kept samples are always the measurements whose index is a multiple of
    `stride`, evenly spread over the run, so a percentile is off by at most `stride` places in
    the sorted order.
    """

    def __init__(self, max_samples: int = MAX_SAMPLES) -> None:
        if max_samples < 2:
            raise ValueError(f"max_samples must be at least 2, not {max_samples}")
        self.max_samples = max_samples
        self.samples = array("d")  # 8 bytes a sample, not a Python float object each
        self.stride = 1
        self.measured = 0
        self.count = 0
        self.total_ms = 0.0
        self.max_ms = 0.0

    def record(self, latency_ms: float, weight: int = 1) -> None:
        if self.measured % self.stride == 0:
            self.samples.append(latency_ms)
            if len(self.samples) >= self.max_samples:
                self.samples = self.samples[::2]
                self.stride *= 2
        self.measured += 1
        self.count += weight
        self.total_ms += latency_ms * weight
        self.max_ms = max(self.max_ms, latency_ms)

    @property
    def avg_ms(self) -> float:
        return self.total_ms / self.count if self.count else 0.0

    def percentiles(self, fractions: tuple[float, ...] = PERCENTILES) -> list[float]:
        """Nearest rank, as bench/figures.py: for each fraction (in (0, 1]) the smallest kept
        sample with at least that fraction of the kept samples at or below it; 0.0 for none."""
        for fraction in fractions:
            if not 0 < fraction <= 1:
                raise ValueError(f"fraction must be in (0, 1], not {fraction}")
        ordered = sorted(self.samples)
        if not ordered:
            return [0.0 for _ in fractions]
        return [ordered[math.ceil(fraction * len(ordered)) - 1] for fraction in fractions]


def _per_second(amount: float, elapsed_ms: float) -> float:
    """A rate over `elapsed_ms`; 0.0 over no time rather than a division by zero."""
    return amount * 1000.0 / elapsed_ms if elapsed_ms > 0 else 0.0


def window_line(
    records: int, size_bytes: int, elapsed_ms: float, total_latency_ms: float, max_latency_ms: float
) -> str:
    """Kafka's progress line for one reporting window."""
    avg = total_latency_ms / records if records else 0.0
    return (
        f"{records} records sent, {_per_second(records, elapsed_ms):.1f} records/sec "
        f"({_per_second(size_bytes, elapsed_ms) / MB:.2f} MB/sec), {avg:.1f} ms avg latency, "
        f"{max_latency_ms:.1f} ms max latency."
    )


def summary_line(
    recorder: LatencyRecorder, records: int, size_bytes: int, elapsed_ms: float
) -> str:
    """Kafka's final line for `records` acknowledged records of `size_bytes` in all. Its
    records/sec has six decimals (Java's %f) and its percentiles are whole ms: Kafka records
    latencies as truncated ms, so they are truncated here too."""
    p50, p95, p99, p999 = (int(value) for value in recorder.percentiles(PERCENTILES))
    return (
        f"{records} records sent, {_per_second(records, elapsed_ms):f} records/sec "
        f"({_per_second(size_bytes, elapsed_ms) / MB:.2f} MB/sec), "
        f"{recorder.avg_ms:.2f} ms avg latency, {recorder.max_ms:.2f} ms max latency, "
        f"{p50} ms 50th, {p95} ms 95th, {p99} ms 99th, {p999} ms 99.9th."
    )


class ProducerStats:
    """What kafka-producer-perf-test.sh keeps of acknowledged records: latencies for the
    summary, and a window that yields a progress line every `reporting_interval_ms`. Times are
    ms on any one clock; `start_ms` is when the run began. The summary's counts are the
    caller's (exact: sent minus failed), not the sum of what was recorded."""

    def __init__(
        self, start_ms: float, reporting_interval_ms: int = 5000, max_samples: int = MAX_SAMPLES
    ) -> None:
        self.start_ms = start_ms
        self.reporting_interval_ms = reporting_interval_ms
        self.latencies = LatencyRecorder(max_samples)
        self._new_window(start_ms)

    def _new_window(self, now_ms: float) -> None:
        self.window_start_ms = now_ms
        self.window_records = 0
        self.window_bytes = 0
        self.window_total_ms = 0.0
        self.window_max_ms = 0.0

    def record(
        self, latency_ms: float, size_bytes: int, now_ms: float, records: int = 1
    ) -> str | None:
        """One measured latency, standing for `records` acknowledged records of `size_bytes`
        in all; the window's line when the window is over, else None."""
        self.latencies.record(latency_ms, records)
        self.window_records += records
        self.window_bytes += size_bytes
        self.window_total_ms += latency_ms * records
        self.window_max_ms = max(self.window_max_ms, latency_ms)
        elapsed_ms = now_ms - self.window_start_ms
        if elapsed_ms < self.reporting_interval_ms:
            return None
        line = window_line(
            self.window_records,
            self.window_bytes,
            elapsed_ms,
            self.window_total_ms,
            self.window_max_ms,
        )
        self._new_window(now_ms)
        return line

    def summary(self, now_ms: float, records: int, size_bytes: int) -> str:
        return summary_line(self.latencies, records, size_bytes, now_ms - self.start_ms)


def throttle_sleep_ms(sent: int, elapsed_ms: float, records_per_s: float) -> float:
    """How long to sleep so that `sent` records over `elapsed_ms` stay at `records_per_s`
    (negative: unlimited): the time the records are owed minus the time taken, when at least
    MIN_SLEEP_MS ahead of schedule; else 0.0 (behind schedule, sending at once catches up)."""
    if records_per_s < 0:
        return 0.0
    ahead_ms = sent * 1000.0 / records_per_s - elapsed_ms
    return ahead_ms if ahead_ms >= MIN_SLEEP_MS else 0.0


def consumer_line(
    start_time: str,
    end_time: str,
    elapsed_ms: int,
    fetch_ms: int,
    messages: int,
    size_bytes: int,
    rebalance_ms: int = 0,
) -> str:
    """kafka-consumer-perf-test.sh's CSV line under CONSUMER_HEADER: totals over `elapsed_ms`
    (the whole run) and over `fetch_ms` (the fetching alone)."""
    megabytes = size_bytes / MB
    return (
        f"{start_time}, {end_time}, {megabytes:.4f}, {_per_second(megabytes, elapsed_ms):.4f}, "
        f"{messages}, {_per_second(messages, elapsed_ms):.4f}, {rebalance_ms}, {fetch_ms}, "
        f"{_per_second(megabytes, fetch_ms):.4f}, {_per_second(messages, fetch_ms):.4f}"
    )


def consumer_progress_line(
    at: str,
    messages: int,
    size_bytes: int,
    window_messages: int,
    window_bytes: int,
    window_ms: int,
    rebalance_ms: int = 0,
) -> str:
    """A --show-detailed-stats line under CONSUMER_DETAILED_HEADER, as Kafka's: the totals so far,
    rates over the last window (thread id 0: one consumer)."""
    window_megabytes = window_bytes / MB
    fetch_ms = window_ms - rebalance_ms
    return (
        f"{at}, 0, {size_bytes / MB:.4f}, {_per_second(window_megabytes, window_ms):.4f}, "
        f"{messages}, {_per_second(window_messages, window_ms):.4f}, {rebalance_ms}, {fetch_ms}, "
        f"{_per_second(window_megabytes, fetch_ms):.4f}, "
        f"{_per_second(window_messages, fetch_ms):.4f}"
    )
