"""Goal: a broker whose metadata stopped flowing does not go on as if nothing happened. When
applying a new image fails (opening a partition's log on a full or broken disk: an operating
error), the metadata-fetch task ended with the exception unseen while the heartbeat task kept the
broker's session alive: the broker served, and led, from an image frozen at that moment for as
long as it ran, whatever the controller decided since. `MetadataFollower.run` must end with that
failure (so the broker stops, services/broker/broker.py, exit code 3) and heartbeat no more.

And its controlled shutdown (SIGTERM) ends within SHUTDOWN_TIMEOUT_S when no controller
answers, whatever broker.heartbeat.interval.ms is; a stop before it registered ends `run` at once.

Method: MetadataFollower over a fake controller channel (registration, heartbeats, one
FetchMetadata answer with a batch) and an `on_change` that raises OSError.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.services.broker.metadata import metadata_follower
from samsa.services.broker.metadata.metadata_follower import MetadataFollower
from samsa.services.runtime.controller_channel import ControllerUnavailableError
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m


class FakeControllers:
    def __init__(self) -> None:
        self.heartbeats = 0
        record = m.MetadataRecord(
            register_broker=m.RegisterBrokerRecord(
                broker_id=1, incarnation_id="i", endpoint="127.0.0.1:9"
            )
        )
        self.batch = make_batch(MetadataImage.empty(), [record], 1000)

    async def write(self, method: str, request: Any, timeout_s: float = 5.0) -> Any:
        if method == "RegisterBroker":
            return c.RegisterBrokerResponse(broker_epoch=0)
        self.heartbeats += 1
        shutting_down = request.want_shutdown
        return c.BrokerHeartbeatResponse(is_fenced=shutting_down, should_shut_down=shutting_down)

    async def read(self, method: str, request: Any, timeout_s: float) -> Any:
        response = c.FetchMetadataResponse(committed_end_offset=1)
        if request.end_offset == 0:
            response.batches.append(self.batch)
        else:
            await asyncio.sleep(request.max_wait_ms / 1000)
        return response


async def _ignore(old: MetadataImage, new: MetadataImage) -> None:
    pass


def follower_over(
    controllers: FakeControllers,
    *,
    heartbeat_interval_ms: int = 10,
    on_change: Callable[[MetadataImage, MetadataImage], Awaitable[None]] = _ignore,
) -> MetadataFollower:
    """Broker 1's follower over stand-in controllers (nothing listens at its endpoint)."""
    return MetadataFollower(
        broker_id=1,
        endpoint="127.0.0.1:9",
        rack="",
        controllers=controllers,  # type: ignore[arg-type]
        on_change=on_change,
        heartbeat_interval_ms=heartbeat_interval_ms,
    )


def test_a_failure_to_apply_the_metadata_ends_the_follower_and_its_heartbeats() -> None:
    async def on_change(old: MetadataImage, new: MetadataImage) -> None:
        raise OSError(28, "No space left on device")

    async def scenario() -> None:
        controllers = FakeControllers()
        follower = follower_over(controllers, on_change=on_change)
        stop = asyncio.Event()
        with pytest.raises(OSError, match="No space left"):
            await asyncio.wait_for(follower.run(stop), 2)
        heartbeats = controllers.heartbeats
        await asyncio.sleep(0.1)
        assert controllers.heartbeats == heartbeats
        # Its controlled shutdown asks to be fenced, and does not wait for an image that no
        # longer follows the log to show it.
        await asyncio.wait_for(follower.shutdown(), 1)
        assert controllers.heartbeats == heartbeats + 1

    asyncio.run(scenario())


def test_a_controlled_shutdown_waits_no_longer_than_its_deadline_for_a_controller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each heartbeat waited max(1 s, broker.heartbeat.interval.ms) for a controller: with a
    # long interval and no controller answering, SIGTERM took that long, not SHUTDOWN_TIMEOUT_S.
    monkeypatch.setattr(metadata_follower, "SHUTDOWN_TIMEOUT_S", 0.2)
    asked: list[float] = []

    class Unanswered(FakeControllers):
        async def write(self, method: str, request: Any, timeout_s: float = 5.0) -> Any:
            asked.append(timeout_s)
            await asyncio.sleep(timeout_s)
            raise ControllerUnavailableError(method)

    async def scenario() -> None:
        follower = follower_over(Unanswered(), heartbeat_interval_ms=60_000)
        follower.broker_epoch = 0  # registered
        await asyncio.wait_for(follower.shutdown(), 1)

    asyncio.run(scenario())
    assert asked and max(asked) <= 0.2


def test_a_stop_while_registering_ends_the_follower_at_once() -> None:
    # SIGTERM before the broker registered (its controllers silent, or still electing): the
    # registration's write went on for its whole deadline (5 s) and then its backoff, so the
    # broker took up to 5.5 s to stop, with nothing to hand over. A coordinator stopped at once.
    class Silent(FakeControllers):
        async def write(self, method: str, request: Any, timeout_s: float = 5.0) -> Any:
            await asyncio.sleep(timeout_s)
            raise ControllerUnavailableError(method)

    async def scenario() -> float:
        follower = follower_over(Silent(), heartbeat_interval_ms=2000)
        stop = asyncio.Event()
        running = asyncio.create_task(follower.run(stop))
        await asyncio.sleep(0.1)
        stop.set()
        loop = asyncio.get_running_loop()
        stopped_at = loop.time()
        await asyncio.wait_for(running, 10)
        assert follower.broker_epoch == -1
        return loop.time() - stopped_at

    assert asyncio.run(scenario()) < 0.5
