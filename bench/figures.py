"""The figures every measurement of the cluster benches reports, computed the same way for
Samsa and for the peers so that they compare: throughput as `records_per_s` and `mb_per_s` (MB/s
of record values, 10^6 bytes), latency as the nearest-rank `p50_us` and `p99_us`; the
produce->consume latencies of a run that must have read every record it sent; and the record
values the peers' writers cycle through.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (fraction in (0, 1]): a value that was really measured, the
    smallest one with at least `fraction` of the samples at or below it."""
    if not samples:
        raise ValueError("no samples")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], not {fraction}")
    ordered = sorted(samples)
    rank = math.ceil(fraction * len(ordered))
    return ordered[rank - 1]


def latency_summary(samples_ns: Sequence[int]) -> dict:
    """p50 and p99 in microseconds, and how many samples they come from."""
    return {
        "p50_us": percentile(samples_ns, 0.50) / 1000,
        "p99_us": percentile(samples_ns, 0.99) / 1000,
        "samples": len(samples_ns),
    }


def arrival_latencies(
    sent_at: Mapping[bytes, float], arrived_at: Mapping[bytes, float], count: int
) -> list[float]:
    """Each record's arrival minus its send (keyed by the record's id, the first arrival of
    each), once all `count` records sent arrived: a record that never reached the consumer is
    a failed run, not a sample left out (the peers' measurements wait for every record too)."""
    received = sum(1 for key in sent_at if key in arrived_at)
    if received != count:
        raise RuntimeError(f"{count - received:,} of {count:,} records never reached the consumer")
    return [arrived_at[key] - started for key, started in sent_at.items()]


def throughput(records: int, payload_bytes: int, seconds: float) -> dict:
    """records/s and MB/s (10^6 bytes of record values) over `seconds`."""
    if seconds <= 0:
        raise ValueError(f"seconds must be positive, not {seconds}")
    return {
        "records": records,
        "seconds": seconds,
        "records_per_s": records / seconds,
        "mb_per_s": payload_bytes / seconds / 1e6,
    }


def make_values(size: int, distinct: int = 1024) -> list[bytes]:
    """`distinct` different values of `size` bytes, cycled through by the writers (neither peer
    compresses, so their content does not change the figures)."""
    return [(f"{index:08d}".encode() * (size // 8 + 1))[:size] for index in range(distinct)]
