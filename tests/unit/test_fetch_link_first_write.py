"""Goal: a FetchLink whose freshly opened stream fails its first write with grpc's own INTERNAL
(the server ended the stream as it opened, e.g. UNIMPLEMENTED on a broker without it, and the
client's write raced that end: grpc then reports INTERNAL and the server's status is lost)
sends that request as a unary Fetch, and tries a stream again for the next request. An INTERNAL
after the write still fails the fetch. The race failed tests/integration/test_fetch_stream.py's
fallback test once in CI, and a unit test against a server without the stream twice in a row.

Method: FetchLink over fake stream calls that fail or answer as scripted; no server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from samsa.common.fetch_link import FetchFailed, FetchLink
from samsa.v1 import broker_pb2


def rpc_error(code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details="x")


class Call:
    """A stream call: its write fails with `write_fails`, or its read answers / fails."""

    def __init__(self, write_fails: grpc.StatusCode | None, read_fails: grpc.StatusCode | None):
        self.write_fails = write_fails
        self.read_fails = read_fails

    async def write(self, message: Any) -> None:
        if self.write_fails is not None:
            raise rpc_error(self.write_fails)

    async def read(self) -> Any:
        if self.read_fails is not None:
            raise rpc_error(self.read_fails)
        return broker_pb2.FetchStreamResponse(response=broker_pb2.FetchResponse(session_id=5))

    def done(self) -> bool:
        return False

    def cancel(self) -> None:
        pass


def fetch_with(calls: list[Call], fetches: int = 1) -> tuple[Any, int, int]:
    """`fetches` fetches through a link whose streams are `calls`, in turn: (the answers'
    session ids, or the FetchFailed of the first that failed; streams opened; unary calls)."""
    opened: list[Call] = []
    unary: list[object] = []

    def open_stream(channel: Any) -> Call:
        opened.append(calls[min(len(opened), len(calls) - 1)])
        return opened[-1]

    async def unary_fetch(channel: Any, request: Any, timeout_s: float) -> Any:
        unary.append(request)
        return broker_pb2.FetchResponse(session_id=9)

    link = FetchLink(
        open_stream=open_stream,  # type: ignore[arg-type]
        wrap=lambda request: request,
        unary=unary_fetch,
        rpc="FetchStream",
    )

    async def run() -> Any:
        answers = []
        for _ in range(fetches):
            answer = await link.fetch(object(), broker_pb2.FetchRequest(), 5)  # type: ignore[arg-type]
            answers.append(answer.session_id)
        return answers

    try:
        outcome = asyncio.run(run())
    except FetchFailed as failed:
        outcome = failed
    return outcome, len(opened), len(unary)


INTERNAL, UNIMPLEMENTED = grpc.StatusCode.INTERNAL, grpc.StatusCode.UNIMPLEMENTED


def test_a_first_write_failing_internal_goes_as_a_unary_fetch() -> None:
    assert fetch_with([Call(INTERNAL, None), Call(None, None)]) == ([9], 1, 1)


def test_the_next_fetch_tries_a_stream_again() -> None:
    assert fetch_with([Call(INTERNAL, None), Call(None, None)], fetches=2) == ([9, 5], 2, 1)


def test_unimplemented_makes_every_later_fetch_unary() -> None:
    assert fetch_with([Call(UNIMPLEMENTED, None)], fetches=2) == ([9, 9], 1, 2)


@pytest.mark.parametrize("code", [INTERNAL, grpc.StatusCode.UNAVAILABLE])
def test_a_failure_after_the_write_is_not_sent_again(code: grpc.StatusCode) -> None:
    failed, opened, unary = fetch_with([Call(None, code), Call(None, None)])
    assert isinstance(failed, FetchFailed) and failed.code == code
    assert (opened, unary) == (1, 0)
