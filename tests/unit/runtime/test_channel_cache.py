"""Goal: the long-lived channels of a service follow a TLS rotation (service_channels.ChannelCache):
when the credentials generation moves, the next use of the cache dials every endpoint again,
tells the holder (which drops its stubs and streams) and closes the old channels once their
calls ended, a call in flight on an old one answered, not cut; while it does not move, nothing
is dialled again. A call that the old channel's close does cut is a failed call to retry, not
the holder's task cancelled: a ControllerChannel retries it and answers.

Method: a cache with a fake dial and a generation counter the test moves. The closing is seen on
fake channels (what close was asked, with which grace) and on real grpc.aio channels to a
plaintext server in this process whose handler answers when the test lets it. The cut call is a
fake controller stub raising CancelledError as grpc.aio does for a call its channel cancelled.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from samsa.services.runtime.controller_channel import ControllerChannel
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.service_channels import RETIRED_CHANNEL_GRACE_S, ChannelCache
from samsa.v1 import controller_pb2 as c

A, B = "127.0.0.1:1", "127.0.0.1:2"


class FakeChannel:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.closed_with: list[float | None] = []

    async def close(self, grace: float | None = None) -> None:
        self.closed_with.append(grace)


class FakeStub:
    def __init__(self, channel: FakeChannel) -> None:
        self.channel = channel


class Generation:
    def __init__(self) -> None:
        self.value = 0

    def __call__(self) -> int:
        return self.value


def fake_cache(generation: Generation, redials: list[int]) -> tuple[ChannelCache, list[Any]]:
    dialled: list[FakeChannel] = []

    def dial(endpoint: str, *, traced: bool) -> FakeChannel:
        dialled.append(FakeChannel(endpoint))
        return dialled[-1]

    cache = ChannelCache(
        dial=dial,  # type: ignore[arg-type]
        generation=generation,
        on_redial=lambda: redials.append(generation.value),
    )
    return cache, dialled


def test_the_same_generation_keeps_the_channels() -> None:
    async def scenario() -> None:
        generation, redials = Generation(), []
        cache, dialled = fake_cache(generation, redials)
        first = [cache.get(A), cache.get(B)]
        for _ in range(5):
            assert [cache.get(A), cache.get(B)] == first
            assert cache.follow() is False
        assert cache.stub(A, FakeStub) is cache.stub(A, FakeStub)  # a stub is made once per channel
        assert len(dialled) == 2 and redials == []
        assert all(channel.closed_with == [] for channel in dialled)
        await cache.close()
        assert [channel.closed_with for channel in dialled] == [[None], [None]]

    asyncio.run(scenario())


def test_a_new_generation_dials_every_endpoint_again_and_closes_the_old() -> None:
    async def scenario() -> None:
        generation, redials = Generation(), []
        cache, dialled = fake_cache(generation, redials)
        old_a, old_b = cache.get(A), cache.get(B)
        old_stub = cache.stub(A, FakeStub)
        generation.value = 1  # the process took rotated TLS files
        new_a = cache.get(A)
        assert new_a is not old_a and new_a.endpoint == A
        assert redials == [1]  # the holder is told once, before it gets the new channel
        assert cache.stub(A, FakeStub) is not old_stub and cache.stub(A, FakeStub).channel is new_a
        assert cache.get(B) is not old_b and len(dialled) == 4
        await asyncio.sleep(0)  # the closing tasks run
        assert old_a.closed_with == [RETIRED_CHANNEL_GRACE_S]
        assert old_b.closed_with == [RETIRED_CHANNEL_GRACE_S]
        assert cache.get(A) is new_a and redials == [1]  # once per generation
        await cache.close()
        assert new_a.closed_with == [None]

    asyncio.run(scenario())


def test_a_call_in_flight_on_a_dropped_channel_is_answered_then_the_channel_closed() -> None:
    async def scenario() -> None:
        arrived, release = asyncio.Event(), asyncio.Event()

        async def slow(request: bytes, context: Any) -> bytes:
            arrived.set()
            await release.wait()
            return b"answered"

        server = grpc.aio.server()
        handler = grpc.unary_unary_rpc_method_handler(slow)
        server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler("samsa.test.Slow", {"Call": handler})]
        )
        endpoint = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
        await server.start()
        generation = Generation()

        def dial(endpoint: str, *, traced: bool) -> grpc.aio.Channel:
            return grpc.aio.insecure_channel(endpoint)

        cache = ChannelCache(dial=dial, generation=generation)
        try:
            old = cache.get(endpoint)
            in_flight = asyncio.ensure_future(old.unary_unary("/samsa.test.Slow/Call")(b""))
            await asyncio.wait_for(arrived.wait(), 10)  # the call is at the server, waiting
            generation.value = 1
            new = cache.get(endpoint)
            assert new is not old and cache.retiring == 1
            await asyncio.sleep(0.3)  # the old channel's close is under way meanwhile
            release.set()
            assert await in_flight == b"answered"  # not cut by the close
            assert await new.unary_unary("/samsa.test.Slow/Call")(b"") == b"answered"
            async with asyncio.timeout(10):
                while cache.retiring:  # closed once its call ended, not after the grace
                    await asyncio.sleep(0.01)
        finally:
            await cache.close()
            await server.stop(0)

    asyncio.run(scenario())


class CutOnce:
    """A controller whose first call is cut by its channel's close: grpc.aio raises that in the
    caller as CancelledError, the task itself not being cancelled."""

    def __init__(self) -> None:
        self.calls = 0

    async def FetchMetadata(self, request: Any, *, timeout: float, metadata: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            raise asyncio.CancelledError()
        return c.FetchMetadataResponse(committed_end_offset=3)


def test_a_call_cut_by_its_channels_close_is_retried_not_taken_for_a_cancellation() -> None:
    async def scenario() -> None:
        channel = ControllerChannel([A], MemberSigner(b"k" * 32, 1))
        controller = CutOnce()
        channel._stubs = {A: controller}  # type: ignore[dict-item]
        answer = await channel.read("FetchMetadata", c.FetchMetadataRequest(), 5.0)
        assert answer.committed_end_offset == 3 and controller.calls == 2
        await channel.close()

    asyncio.run(scenario())


def test_a_cancelled_task_still_stops_its_controller_call() -> None:
    async def scenario() -> None:
        channel = ControllerChannel([A], MemberSigner(b"k" * 32, 1))

        class Hung:
            async def FetchMetadata(self, request: Any, *, timeout: float, metadata: Any) -> Any:
                await asyncio.sleep(60)

        channel._stubs = {A: Hung()}  # type: ignore[dict-item]
        task = asyncio.ensure_future(channel.read("FetchMetadata", c.FetchMetadataRequest(), 30))
        await asyncio.sleep(0.05)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        else:
            raise AssertionError("the read went on after its task was cancelled")
        await channel.close()

    asyncio.run(scenario())
