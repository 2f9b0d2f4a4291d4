"""Goal: a replica fetch loop that raises unexpectedly (a bug on the fetch or apply path) is
logged at ERROR with its traceback, counted, and runs again by itself after the supervisor's
backoff, with a new fetch session; before, it ended until the next metadata change touching its
partitions, its error shown only as asyncio's "Task exception was never retrieved".

Method: `ReplicaFetchers` against the in-memory host and parking link of
test_replica_fetcher_leadership.py, the link raising on its first fetch; no metadata change
follows. The supervisor's own rules are tests/unit/runtime/test_supervisor.py's.
"""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest

from samsa.services.broker.replica import replica_fetcher
from samsa.services.broker.replica.replica_fetcher import ReplicaFetchers
from samsa.services.runtime import supervisor
from tests.unit.broker.test_replica_fetcher_leadership import (
    FOLLOWER,
    IDLE,
    LEADER,
    Host,
    ParkingLink,
    hosted,
    named,
    next_request,
)
from tests.unit.runtime.test_supervisor import Counted


class FailingOnceLink(ParkingLink):
    """The parking link, whose first fetch raises as a bug would."""

    async def fetch(self, channel: object, request, timeout_s: float):  # type: ignore[no-untyped-def]
        if not self.requests:
            self.requests.append(request)
            raise RuntimeError("a bug on the fetch path")
        return await super().fetch(channel, request, timeout_s)


def test_a_fetch_loop_that_raises_is_logged_and_runs_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    link = FailingOnceLink()
    monkeypatch.setattr(replica_fetcher, "leader_link", lambda signer: link)
    restarts = Counted()
    monkeypatch.setattr(supervisor, "_restarts", lambda: restarts)

    async def run() -> None:
        host = Host()
        fetchers = ReplicaFetchers(host, FOLLOWER, SimpleNamespace(member_id=FOLLOWER))  # type: ignore[arg-type]
        monkeypatch.setattr(fetchers, "_channel", lambda leader_id: object())
        host.partitions[IDLE] = hosted()
        fetchers.reconcile([IDLE])
        try:
            again = await asyncio.wait_for(next_request(link), 5)  # the first backoff is 1 s
            assert named(again) == {IDLE} and again.session_epoch == 0, "a new session"
            assert not fetchers._loops[LEADER].done()
        finally:
            await fetchers.close()  # a supervised loop still stops on close

    with caplog.at_level(logging.ERROR):
        asyncio.run(run())
    task = f"replica-fetcher-{LEADER}"
    failures = [r for r in caplog.records if getattr(r, "task", None) == task]
    assert len(failures) == 1 and failures[0].exc_info is not None
    assert restarts.adds == [(1, {"task": task})]
