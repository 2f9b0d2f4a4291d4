"""Goal: a fetch stream (FetchStream, ReplicaFetchStream) whose fetcher sends nothing for
REQUEST_WAIT_S is ended with UNAVAILABLE, and only while the broker waits for a request: the
time spent answering one (a parked long-poll) never counts (fetch_stream.requests_in_turn).

Method: `requests_in_turn` over a hand-made request iterator and a context whose abort raises,
with REQUEST_WAIT_S made short; no server.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import NoReturn

import grpc
import pytest

from samsa.services.broker.requests import fetch_stream

WAIT_S = 0.05


class Aborted(Exception):
    pass


class Context:
    def __init__(self) -> None:
        self.status: tuple[grpc.StatusCode, str] | None = None

    async def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        self.status = (code, details)
        raise Aborted


async def spaced(gaps_s: list[float]) -> AsyncIterator[int]:
    """A request after each gap, then the fetcher closes its side."""
    for number, gap_s in enumerate(gaps_s):
        await asyncio.sleep(gap_s)
        yield number


@pytest.fixture(autouse=True)
def short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetch_stream, "REQUEST_WAIT_S", WAIT_S)


def test_a_silent_stream_is_ended_with_unavailable() -> None:
    context = Context()

    async def scenario() -> list[int]:
        seen = []
        with pytest.raises(Aborted):
            async for number in fetch_stream.requests_in_turn(
                spaced([0, WAIT_S * 4]),
                context,  # type: ignore[arg-type]
                "FetchStream",
            ):
                seen.append(number)
        return seen

    assert asyncio.run(scenario()) == [0]
    assert context.status is not None
    assert context.status[0] == grpc.StatusCode.UNAVAILABLE and "FetchStream" in context.status[1]


def test_answering_a_request_does_not_count_as_silence() -> None:
    context = Context()

    async def scenario() -> list[int]:
        seen = []
        async for number in fetch_stream.requests_in_turn(
            spaced([0, 0, 0]),  # no silence at all: only answering takes time
            context,  # type: ignore[arg-type]
            "ReplicaFetchStream",
        ):
            seen.append(number)
            await asyncio.sleep(WAIT_S * 3)  # a long-poll answered after the wait limit
        return seen

    assert asyncio.run(scenario()) == [0, 1, 2]
    assert context.status is None
