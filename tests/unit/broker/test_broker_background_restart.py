"""Goal: a broker background loop that raises is started again, not left dead until shutdown (a
log cleaner that died on one bad pass let `__consumer_offsets` grow without bound, and nothing
said so), and the broker still stops cleanly afterwards.

Method: a whole `Broker.run` over stand-in controllers, its log cleaner replaced by one that
raises on its first run and waits for `stop` on its second; the supervisor's own rules are
tests/unit/runtime/test_supervisor.py's.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from broker_host import standalone_broker

from samsa.services.broker import broker as broker_module
from tests.unit.broker.test_broker_clean_shutdown import RecordingControllers


def test_a_cleaner_that_raises_is_logged_and_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    runs: list[int] = []
    second_run = asyncio.Event()

    async def cleaner(host: object, stop: asyncio.Event, *, interval_s: float) -> None:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("a compacted topic deleted mid-pass")
        second_run.set()
        await stop.wait()

    monkeypatch.setattr(broker_module, "run_log_cleaner", cleaner)

    async def scenario() -> int:
        broker = standalone_broker(tmp_path)
        controllers = RecordingControllers(tmp_path)
        controllers.committed_offset_seen = 0  # type: ignore[attr-defined]
        broker.channel = broker.follower.controllers = controllers  # type: ignore[assignment]
        broker.follower.log.controllers = controllers  # type: ignore[assignment]
        stop = asyncio.Event()
        running = asyncio.create_task(broker.run(stop))
        try:
            await asyncio.wait_for(second_run.wait(), 5)  # the first backoff is 1 s
        finally:
            stop.set()
        return await asyncio.wait_for(running, 10)

    with caplog.at_level(logging.ERROR):
        assert asyncio.run(scenario()) == 0, "a clean stop"
    assert len(runs) == 2
    failures = [r for r in caplog.records if getattr(r, "task", None) == "log-cleaner"]
    assert len(failures) == 1 and failures[0].exc_info is not None
