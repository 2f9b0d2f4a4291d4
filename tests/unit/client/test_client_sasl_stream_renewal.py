"""Goal: a long-lived stream is reopened at an idle point once its SASL ticket is due for renewal
(80% of its lifetime) or older than the login's, so that it carries a fresh ticket before the
server ends it at expiry (KIP-368): the login says which generation of ticket a stream opened now
carries (the next one when a renewal is due: the opening runs it), a ProduceStream and a
TransactionStream retire only with no request waiting, and a FetchLink reopens between fetches.
A fresh stream is not reopened again while its opening's exchange runs.

Method: SaslLogin with a fake exchange and a fake clock; a ProduceStream over a fake call; a
FetchLink over fake calls with a fake `age`; no gRPC, no server.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from samsa.client.produce_message import EncodedRequest
from samsa.client.produce_stream import ProduceStream
from samsa.client.sasl_login import SaslLogin
from samsa.common.fetch_link import FetchLink
from samsa.common.tls import SaslSettings
from samsa.v1 import broker_pb2

LIFETIME_MS = 10_000


class Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def a_login() -> tuple[SaslLogin, Clock]:
    clock = Clock()
    count = iter(range(1, 100))
    login = SaslLogin(
        SaslSettings("SCRAM-SHA-256", "alice", "secret"),
        lambda endpoint: (f"ticket-{next(count)}", LIFETIME_MS),
        clock,
    )
    return login, clock


def test_a_stream_is_stale_once_its_ticket_is_due_or_older_than_the_logins() -> None:
    login, clock = a_login()
    assert login.stream_generation() == 1, "no ticket yet: the opening earns the first"
    assert not login.stream_stale(1), "its exchange has not run yet: not reopened again"
    login.ticket("b:1")
    assert login.stream_generation() == 1 and not login.stream_stale(1)
    clock.now_s += 7.999
    assert not login.stream_stale(1)
    clock.now_s += 0.001  # 80% of the lifetime
    assert login.stream_stale(1), "due for renewal: reopen it at its next idle point"
    assert login.stream_generation() == 2, "a stream opened now runs the renewal"
    assert not login.stream_stale(2), "while that renewal runs"
    login.ticket("b:1")  # the new stream's opening renewed the login
    assert not login.stream_stale(2) and login.stream_stale(1)


class QuietCall:
    """A ProduceStream call that never answers; records cancel()."""

    def __init__(self, outgoing: AsyncIterator[bytes]) -> None:
        self.outgoing = outgoing
        self.cancelled = asyncio.Event()

    def __aiter__(self) -> QuietCall:
        return self

    async def __anext__(self) -> object:
        await self.cancelled.wait()
        raise asyncio.CancelledError

    def cancel(self) -> bool:
        self.cancelled.set()
        return True


def test_a_produce_stream_retires_only_with_no_request_waiting() -> None:
    async def run() -> None:
        calls: list[QuietCall] = []

        def open_call(outgoing: AsyncIterator[bytes]) -> QuietCall:
            calls.append(QuietCall(outgoing))
            return calls[-1]

        stream = ProduceStream(open_call, generation=3)  # type: ignore[arg-type]
        assert stream.generation == 3
        outcomes: list[object] = []
        assert stream.send(EncodedRequest([], 0), lambda r, e: outcomes.append(e), 30)
        assert not stream.retire() and not stream.broken, "a request waits on it"
        idle = ProduceStream(open_call)  # type: ignore[arg-type]
        assert idle.retire() and idle.broken and calls[1].cancelled.is_set()
        assert not idle.retire(), "once"
        await stream.close()
        await idle.close()
        assert len(outcomes) == 1  # the waiting one failed at close, not at retire

    asyncio.run(run())


class Age:
    """A fake SASL login's view: a stream is stale when opened before `generation`."""

    def __init__(self) -> None:
        self.generation = 1

    def stream_generation(self) -> int:
        return self.generation

    def stream_stale(self, generation: int) -> bool:
        return generation < self.generation


class Call:
    def __init__(self) -> None:
        self.cancelled = False

    async def write(self, message: Any) -> None:
        pass

    async def read(self) -> Any:
        return broker_pb2.FetchStreamResponse(response=broker_pb2.FetchResponse(session_id=5))

    def done(self) -> bool:
        return self.cancelled

    def cancel(self) -> None:
        self.cancelled = True


def test_a_fetch_link_reopens_its_stream_between_fetches_once_stale() -> None:
    age = Age()
    opened: list[Call] = []

    def open_stream(channel: Any) -> Call:
        opened.append(Call())
        return opened[-1]

    async def unary(channel: Any, request: Any, timeout_s: float) -> Any:
        raise AssertionError("no unary fetch")

    link = FetchLink(
        open_stream=open_stream,  # type: ignore[arg-type]
        wrap=lambda request: request,
        unary=unary,
        rpc="FetchStream",
        age=age,
    )
    channel = object()

    async def fetch() -> None:
        await link.fetch(channel, broker_pb2.FetchRequest(), 5)  # type: ignore[arg-type]

    asyncio.run(fetch())
    asyncio.run(fetch())
    assert len(opened) == 1, "fresh: the same stream"
    age.generation = 2  # the login renewed (another call's opening)
    asyncio.run(fetch())
    assert len(opened) == 2 and opened[0].cancelled
    asyncio.run(fetch())
    assert len(opened) == 2, "opened at generation 2: fresh again"
