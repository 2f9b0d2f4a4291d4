"""Goal: the controller learns whether a restarted broker may have lost its unflushed tail
(KIP-966). A clean stop writes the broker epoch into the data directory's clean-shutdown file
once every log is closed; the next start reads it and deletes it durably before it registers,
so a crash of that run leaves no file, and its next registration says -1 (unclean).

Method: the file's functions on a temporary directory; then a whole `Broker.run`, twice on one
data directory, over a fake controller channel that records each RegisterBroker request and
whether the file was on disk when it arrived; and a `Broker.run` whose internal listener's port
is taken, which must leave the file for the next start.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
from broker_host import standalone_broker

from samsa.services.broker.broker import Broker
from samsa.services.broker.clean_shutdown import (
    BROKER_CLEAN_SHUTDOWN_FILE,
    NO_EPOCH,
    mark_clean_shutdown,
    take_previous_broker_epoch,
)
from samsa.services.runtime.server import ServerStartError
from samsa.v1 import controller_pb2 as c
from tests.unit.broker.test_metadata_follower_failure import FakeControllers


def test_the_file_names_the_epoch_once_and_is_gone_after_it_is_read(tmp_path: Path) -> None:
    assert take_previous_broker_epoch(tmp_path) == NO_EPOCH, "a new data directory: unclean"
    mark_clean_shutdown(tmp_path, 42)
    assert take_previous_broker_epoch(tmp_path) == 42
    assert not (tmp_path / BROKER_CLEAN_SHUTDOWN_FILE).exists()
    assert take_previous_broker_epoch(tmp_path) == NO_EPOCH, "a crash of this run: unclean"


def test_an_unreadable_file_is_an_unclean_stop_and_a_broker_never_registered_writes_none(
    tmp_path: Path,
) -> None:
    (tmp_path / BROKER_CLEAN_SHUTDOWN_FILE).write_bytes(b"\xff garbage")
    assert take_previous_broker_epoch(tmp_path) == NO_EPOCH
    assert not (tmp_path / BROKER_CLEAN_SHUTDOWN_FILE).exists()
    mark_clean_shutdown(tmp_path, -1)
    assert not (tmp_path / BROKER_CLEAN_SHUTDOWN_FILE).exists()


class RecordingControllers(FakeControllers):
    """Registers the broker under EPOCH; records each registration and the file's presence."""

    EPOCH = 7

    def __init__(self, data_dir: Path) -> None:
        super().__init__()
        self.data_dir = data_dir
        self.registrations: list[tuple[int | None, bool]] = []
        self.registered = asyncio.Event()

    async def write(self, method: str, request: Any, timeout_s: float = 5.0) -> Any:
        if method == "RegisterBroker":
            previous = (
                request.previous_broker_epoch if request.HasField("previous_broker_epoch") else None
            )
            on_disk = (self.data_dir / BROKER_CLEAN_SHUTDOWN_FILE).exists()
            self.registrations.append((previous, on_disk))
            self.registered.set()
            return c.RegisterBrokerResponse(broker_epoch=self.EPOCH)
        return await super().write(method, request, timeout_s)

    async def close(self) -> None:
        pass


async def _run_once(data_dir: Path) -> RecordingControllers:
    """One broker process on `data_dir`: start, register, stop cleanly (SIGTERM)."""
    broker = standalone_broker(data_dir)
    controllers = RecordingControllers(data_dir)
    broker.channel = broker.follower.controllers = broker.follower.log.controllers = controllers  # type: ignore[assignment]
    stop = asyncio.Event()
    running = asyncio.create_task(broker.run(stop))
    await asyncio.wait_for(controllers.registered.wait(), 5)
    stop.set()
    assert await asyncio.wait_for(running, 10) == 0
    return controllers


def test_a_clean_stop_is_named_by_the_next_registration_and_deleted_before_it(
    tmp_path: Path,
) -> None:
    first = asyncio.run(_run_once(tmp_path))
    assert first.registrations == [(NO_EPOCH, False)], "a new data directory: unclean"
    assert (tmp_path / BROKER_CLEAN_SHUTDOWN_FILE).read_text().strip() == str(first.EPOCH)
    second = asyncio.run(_run_once(tmp_path))
    assert second.registrations == [(first.EPOCH, False)], (
        "clean, and the file was deleted before registering: a crash now would leave none"
    )


def test_a_start_whose_listener_cannot_bind_leaves_the_clean_stop_for_the_next(
    tmp_path: Path,
) -> None:
    """A start that stops at a listener it cannot bind (here the internal one, whose port is
    taken) touched no log: the file is still there for the next start, which registers clean.
    It was read and deleted first, so the next start, the port freed, registered unclean
    (KIP-966: out of the ELR, though every log was closed cleanly)."""
    mark_clean_shutdown(tmp_path, 42)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        internal = f"127.0.0.1:{taken.getsockname()[1]}"

        async def start() -> None:
            broker = Broker(
                broker_id=1,
                listen="127.0.0.1:0",
                controllers=["127.0.0.1:1"],
                data_dir=tmp_path,
                rack="",
                heartbeat_interval_ms=10,
                member_key=b"k" * 32,
                internal_listen=internal,
                internal_advertised_listener=internal,
            )
            with pytest.raises(ServerStartError, match=r"internal\.listeners"):
                await broker.run(asyncio.Event())
            await broker.channel.close()

        asyncio.run(start())
    assert take_previous_broker_epoch(tmp_path) == 42
