"""Goal: `samsa perf produce | head -1` ends quietly once the reader is gone: the progress lines
are printed from the producer's callback thread, where a BrokenPipeError was logged with a
traceback at every reporting interval while the run went on to its end.

Method: `_Acknowledgements.done` (the send callback) with a stdout whose reader is gone and a
window due at once; then `_produce`'s loop, with a fake Producer, must stop sending.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

import pytest

from samsa.cli import perf_commands
from samsa.cli.perf_stats import ProducerStats


class ClosedPipe:
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


class Acknowledged:
    def exception(self, timeout: float | None = None) -> None:
        return None


def test_a_progress_line_nobody_reads_ends_the_run_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    acks = perf_commands._Acknowledgements(ProducerStats(0.0, reporting_interval_ms=0))
    acks.done(0.0, 1, 100, Acknowledged())  # type: ignore[arg-type]
    assert acks.output_closed


class FakeProducer:
    failed_records = 0

    def __init__(self, settings: object) -> None:
        self.sent = 0

    def __enter__(self) -> FakeProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def send(self, topic: str, value: bytes) -> Any:
        self.sent += 1
        producer = self

        class Future:
            def add_done_callback(self, callback: Any) -> None:
                # As the SDK's callback runner: a callback's exception is only logged.
                with contextlib.suppress(Exception):
                    callback(Acknowledged())

        assert producer.sent <= 1_000, "still sending after the reader went away"
        return Future()

    def flush(self) -> None:
        pass


def test_the_sending_loop_stops_once_the_reader_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoAdmin:
        def __init__(self, config: object) -> None:
            pass

        def __enter__(self) -> NoAdmin:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

    monkeypatch.setattr(perf_commands, "Admin", NoAdmin)
    monkeypatch.setattr(perf_commands, "require_topic", lambda admin, topic: None)
    monkeypatch.setattr(perf_commands, "Producer", FakeProducer)
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    args = argparse.Namespace(
        topic="t",
        num_records=1_000_000,
        record_size=10,
        payload_file=None,
        throughput=-1.0,
        producer_property=[],
        reporting_interval=1,
        latency_every=1,
        transactional_id=None,
        transaction_duration_ms=None,
        bootstrap_server="127.0.0.1:1",
    )
    with pytest.raises(BrokenPipeError):  # main() turns it into exit 141
        perf_commands._produce(args)
