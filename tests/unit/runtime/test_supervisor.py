"""Goal: a supervised background loop that raises is logged once at ERROR with its traceback,
counted, and run again after a bounded, doubling backoff that resets after a healthy run; one
that returns is not restarted; cancellation and `stop` end it at once, during a backoff too.

Method: `RestartBackoff` fed run lengths by hand; `supervise` on an event loop over small
loops that raise on cue, with millisecond backoffs and the restart counter replaced by a list.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from samsa.services.runtime import supervisor
from samsa.services.runtime.logs import JsonFormatter
from samsa.services.runtime.supervisor import RestartBackoff, supervise

FAST = RestartBackoff(initial_s=0.001, max_s=0.004, healthy_s=60)


class Counted:
    """Stands in for the restart counter."""

    def __init__(self) -> None:
        self.adds: list[tuple[int, dict[str, str]]] = []

    def add(self, amount: int, attributes: dict[str, str]) -> None:
        self.adds.append((amount, attributes))


@pytest.fixture
def restarts(monkeypatch: pytest.MonkeyPatch) -> Counted:
    counted = Counted()
    monkeypatch.setattr(supervisor, "_restarts", lambda: counted)
    return counted


def test_the_backoff_doubles_to_its_bound_and_resets_after_a_healthy_run() -> None:
    backoff = RestartBackoff(initial_s=1, max_s=30, healthy_s=60)
    assert [backoff.after_failure(0.1) for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert backoff.after_failure(60) == 1, "a run of a healthy minute starts the backoff over"
    assert backoff.after_failure(59) == 2


def test_a_loop_that_raises_is_logged_counted_and_run_again(
    restarts: Counted, caplog: pytest.LogCaptureFixture
) -> None:
    runs: list[int] = []

    async def loop() -> None:
        runs.append(1)
        if len(runs) <= 2:
            raise RuntimeError(f"failure {len(runs)}")

    with caplog.at_level(logging.ERROR, logger=supervisor.__name__):
        asyncio.run(supervise("cleaner", loop, backoff=FAST))
    assert len(runs) == 3, "restarted after each failure, not after it returned"
    assert restarts.adds == [(1, {"task": "cleaner"})] * 2
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2, "one line per failure"
    line = json.loads(JsonFormatter("broker").format(errors[0]))
    assert line["task"] == "cleaner" and line["level"] == "ERROR"
    assert "RuntimeError: failure 1" in line["exc"], "the traceback is in the line"


def test_cancellation_stops_it_while_running_and_while_backing_off(restarts: Counted) -> None:
    async def scenario(backoff_s: float) -> int:
        runs: list[int] = []
        started = asyncio.Event()

        async def loop() -> None:
            runs.append(1)
            started.set()
            if backoff_s:
                raise RuntimeError("fails, then the supervisor waits")
            await asyncio.Event().wait()

        backoff = RestartBackoff(initial_s=backoff_s or 1, max_s=60)
        task = asyncio.create_task(supervise("loop", loop, backoff=backoff))
        await started.wait()
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 1)  # at once, not after the 60 s backoff
        return len(runs)

    assert asyncio.run(scenario(0)) == 1, "a cancelled loop is not restarted"
    assert asyncio.run(scenario(60)) == 1


def test_stop_ends_the_backoff_at_once(restarts: Counted) -> None:
    async def scenario() -> None:
        stop = asyncio.Event()

        async def loop() -> None:
            stop.set()  # the service stops while this run fails
            raise RuntimeError("failed on the way out")

        backoff = RestartBackoff(initial_s=60, max_s=60)
        await asyncio.wait_for(supervise("loop", loop, stop=stop, backoff=backoff), 1)

    asyncio.run(scenario())
