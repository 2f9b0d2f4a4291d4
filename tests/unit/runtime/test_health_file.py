"""Goal: with `health.file`, a service's file is fresh exactly while its own gRPC listener answers
SERVING: it appears once the server started, its mtime moves on every interval, it stops moving
when the health service answers NOT_SERVING, and `stop()` removes it before the server stops; a
listener bound to every interface is asked over loopback.

Method: the production GrpcServer on a loopback port in this process, with the interval shortened
to 50 ms; the file lives in pytest's tmp_path. Waits poll the file with a deadline, never a fixed
sleep followed by a negative check, except where staleness itself is the claim (then the wait is
ten intervals).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2

from samsa.services.runtime import health_file
from samsa.services.runtime.health_file import own_address
from samsa.services.runtime.server import GrpcServer

INTERVAL_S = 0.05
WAIT_S = 10.0


async def wait_for(what: str, condition, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(INTERVAL_S / 2)


def mtime_ns(path: Path) -> int:
    return os.stat(path).st_mtime_ns


def test_the_file_is_fresh_while_serving_and_gone_once_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(health_file, "HEALTH_FILE_INTERVAL_S", INTERVAL_S)
    path = tmp_path / "healthy"

    async def main() -> None:
        server = GrpcServer("127.0.0.1:0", [], tracing=False, health_file=str(path))
        assert not path.exists()
        await server.start()
        try:
            await wait_for("the health file", path.exists)
            first = mtime_ns(path)
            await wait_for("the file touched again", lambda: mtime_ns(path) > first)

            await server.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
            await asyncio.sleep(2 * INTERVAL_S)  # a check already under way may still touch it
            stale = mtime_ns(path)
            await asyncio.sleep(10 * INTERVAL_S)
            assert mtime_ns(path) == stale, "touched while the listener answers NOT_SERVING"

            await server.health.set("", health_pb2.HealthCheckResponse.SERVING)
            await wait_for("the file touched once serving again", lambda: mtime_ns(path) > stale)
        finally:
            await server.stop(0)
        assert not path.exists(), "a stopped server's file must be gone"

    asyncio.run(main())


@pytest.mark.parametrize(
    ("listen", "expected"),
    [
        ("0.0.0.0:9092", "127.0.0.1:9092"),
        (":9092", "127.0.0.1:9092"),
        ("[::]:9092", "127.0.0.1:9092"),
        ("10.0.0.5:9092", "10.0.0.5:9092"),
        ("127.0.0.1:0", "127.0.0.1:40123"),
    ],
)
def test_the_own_listener_is_asked_over_loopback_when_bound_to_every_interface(
    listen: str, expected: str
) -> None:
    port = int(expected.rpartition(":")[2])
    assert own_address(listen, port) == expected
