"""Goal: a FetchLink whose freshly opened stream fails its first write with grpc's own INTERNAL
(the server ended the stream as it opened, e.g. UNIMPLEMENTED on a broker without it, and the
client's write raced that end: grpc then reports INTERNAL and the server's status is lost)
opens one more stream for the same request, and that stream's status decides: an answer is
returned, UNIMPLEMENTED falls back to unary Fetch. An INTERNAL that is not such a first write,
or a second one in a row, still fails the fetch. This was a rare failure of
tests/integration/test_fetch_stream.py's fallback test in CI.

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


def fetch_with(calls: list[Call]) -> tuple[Any, int, int]:
    """One fetch through a link whose streams are `calls`, in turn: (answer's session id or the
    FetchFailed, streams opened, unary calls)."""
    opened: list[Call] = []
    unary: list[object] = []

    def open_stream(channel: Any) -> Call:
        opened.append(calls[len(opened)])
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
    try:
        answer: Any = asyncio.run(link.fetch(object(), broker_pb2.FetchRequest(), 5)).session_id  # type: ignore[arg-type]
    except FetchFailed as failed:
        answer = failed
    return answer, len(opened), len(unary)


INTERNAL, UNIMPLEMENTED = grpc.StatusCode.INTERNAL, grpc.StatusCode.UNIMPLEMENTED


def test_a_first_write_failing_internal_is_sent_again_on_a_new_stream() -> None:
    assert fetch_with([Call(INTERNAL, None), Call(None, None)]) == (5, 2, 0)


def test_the_new_streams_unimplemented_falls_back_to_unary_fetch() -> None:
    assert fetch_with([Call(INTERNAL, None), Call(UNIMPLEMENTED, None)]) == (9, 2, 1)


def test_two_internal_first_writes_in_a_row_fail_the_fetch() -> None:
    failed, opened, unary = fetch_with([Call(INTERNAL, None), Call(INTERNAL, None)])
    assert isinstance(failed, FetchFailed) and failed.code == INTERNAL
    assert (opened, unary) == (2, 0)


@pytest.mark.parametrize("code", [INTERNAL, grpc.StatusCode.UNAVAILABLE])
def test_a_failure_after_the_write_is_not_sent_again(code: grpc.StatusCode) -> None:
    failed, opened, unary = fetch_with([Call(None, code), Call(None, None)])
    assert isinstance(failed, FetchFailed) and failed.code == code
    assert (opened, unary) == (1, 0)
