"""Goal: Samsa's measurements in the cluster bench count only what was verified, as the peers'
do — a produce run whose records failed reports no rate, and a produce->consume run reports
percentiles only once every timed record arrived, each timed once (the warm-up record the
consumer also reads is never taken for one of them).

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


def test_a_record_that_never_arrives_fails_the_produce_to_consume_run(
    fakes: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_Consumer, "drop", client_bench.record_id(5))
    monkeypatch.setattr(threading.Thread, "join", lambda self, timeout=None: time.sleep(0.2))
    with pytest.raises(RuntimeError, match="1 of 20 records never reached the consumer"):
        client_bench.samsa_end_to_end_latency("boot", "t", 20, 100, 0.0)
    assert fakes == []


def test_the_warm_up_record_is_never_timed_as_a_record(
    fakes: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It used to carry record 0's id (zeros): read after record 0 was stamped, it was timed as
    record 0, and record 0 again: 21 samples of 20 records."""
    monkeypatch.setattr(_Consumer, "first_delay_s", 0.3)
    client_bench.samsa_end_to_end_latency("boot", "t", 20, 100, 0.005)
    assert fakes == [20]
    assert bytes(8) not in {client_bench.record_id(index) for index in range(20)}
