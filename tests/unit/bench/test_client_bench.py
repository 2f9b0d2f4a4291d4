"""Goal: Samsa's measurements in the cluster bench count only what was verified, as the peers'
do — a produce run whose records failed reports no rate.

Method: the SDK's Producer and Consumer are replaced by fakes sharing an in-memory log (no
cluster); the fake consumer can drop a record or lag, and the samples handed to the percentiles
are counted.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from bench import client_bench


class _Done:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    def result(self, timeout: float | None = None) -> None:
        if self.error is not None:
            raise self.error


class _Log:
    def __init__(self) -> None:
        self.values: list[bytes] = []
        self.lock = threading.Lock()


class _Producer:
    """Appends to the shared log; records after the first `ok` ones fail for good."""

    log = _Log()
    ok = 1 << 30

    def __init__(self, config: dict) -> None:
        self.sent = self.failed_records = 0

    def send(self, topic: str, value: bytes, partition: int | None = None) -> _Done:
        self.sent += 1
        if self.sent > self.ok:
            self.failed_records += 1
            return _Done(RuntimeError("NOT_ENOUGH_REPLICAS"))
        with self.log.lock:
            self.log.values.append(value)
        return _Done()

    def flush(self, timeout: float | None = None) -> None:
        pass

    def close(self, timeout: float | None = None) -> None:
        pass


class _Consumer:
    """Returns what the log got since the last poll, but `drop`; the first poll waits
    `first_delay_s` (a consumer that lags once, then gets a burst)."""

    log = _Log()
    drop: bytes | None = None
    first_delay_s = 0.0

    def __init__(self, config: dict) -> None:
        self.read = 0

    def assign(self, partitions: list) -> None:
        pass

    def position(self, partition: tuple) -> int:
        return 0

    def poll(self, timeout: float | None = None) -> list:
        time.sleep(self.first_delay_s if self.read == 0 else 0.002)
        with self.log.lock:
            new, self.read = self.log.values[self.read :], len(self.log.values)
        return [SimpleNamespace(value=value) for value in new if value[:8] != self.drop]

    def close(self) -> None:
        pass


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The fakes on one log; returns the sample counts the percentiles were computed over."""
    log = _Log()
    monkeypatch.setattr(_Producer, "log", log)
    monkeypatch.setattr(_Consumer, "log", log)
    monkeypatch.setattr(client_bench, "Producer", _Producer)
    monkeypatch.setattr(client_bench, "Consumer", _Consumer)
    counts: list[int] = []
    percentiles = client_bench._percentiles

    def counted(samples: list[float]) -> dict[str, float]:
        counts.append(len(samples))
        return percentiles(samples)

    monkeypatch.setattr(client_bench, "_percentiles", counted)
    return counts


def test_a_produce_run_with_failed_records_reports_no_rate(
    fakes: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_Producer, "ok", 500)  # the warm-up and 499 timed records
    with pytest.raises(RuntimeError, match="501 of 1,000 records failed"):
        client_bench.samsa_produce("boot", "t", 1000, 100, "none")


def test_a_produce_run_whose_records_were_all_acked_reports_its_rate(fakes: list[int]) -> None:
    figures = client_bench.samsa_produce("boot", "t", 1000, 100, "none")
    assert figures["records_per_s"] > 0
