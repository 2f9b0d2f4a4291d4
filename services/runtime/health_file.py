"""A file kept fresh while the service's own gRPC listener answers SERVING: a health check that
costs a container a `stat`, not a Python start.

Why. A docker-compose health check is a process the engine starts every `interval`. Starting
`python -m samsa.cli.health` (interpreter, grpc and protobuf imports, one Check) costs ~0.2
CPU-seconds on the development machine; every 2 s in each of 8 containers that was ~0.8 of a core
spent on an idle cluster. With `health.file` set, the service itself asks its own listener
`grpc.health.v1/Check` every `HEALTH_FILE_INTERVAL_S` over loopback, the same question from the
same place, and touches the file when the answer is SERVING. The engine's check only compares
the file's age with the clock (deploy/docker-compose.yml). The file says "SERVING, asked just
now": it goes stale when the listener stops answering or answers otherwise, and when the loop
that asks is stuck; `stop` removes it before the server stops serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from samsa.services.runtime import transport
from samsa.services.runtime.config import WILDCARD_HOSTS

log = logging.getLogger(__name__)

HEALTH_FILE_INTERVAL_S = 1.0
CHECK_TIMEOUT_S = 2.0


def own_address(listen: str, port: int) -> str:
    """Where this process reaches its own listener: loopback when it binds every interface."""
    host, _, _ = listen.rpartition(":")
    return f"{'127.0.0.1' if host in WILDCARD_HOSTS else host}:{port}"


class HealthFile:
    """Touches `path` every HEALTH_FILE_INTERVAL_S while `address` answers SERVING."""

    def __init__(self, path: str, address: str) -> None:
        self.path = Path(path)
        self.address = address
        self._task: asyncio.Task[None] | None = None
        self._warned = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._keep_fresh())

    async def stop(self) -> None:
        """Remove the file (health checks fail from now on), then stop asking."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(FileNotFoundError):  # touched while we were cancelling
            self.path.unlink()

    async def _keep_fresh(self) -> None:
        request = health_pb2.HealthCheckRequest(service="")
        async with transport.dial_self(self.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while True:
                try:
                    answer = await stub.Check(request, timeout=CHECK_TIMEOUT_S)
                    if answer.status == health_pb2.HealthCheckResponse.SERVING:
                        self._touch()
                except grpc.RpcError as error:  # not serving: the file goes stale
                    log.debug("own health check failed: %s", error.code().name)
                except OSError as error:  # once: the health check says the rest
                    if not self._warned:
                        log.warning("cannot write the health file %s: %s", self.path, error)
                        self._warned = True
                await asyncio.sleep(HEALTH_FILE_INTERVAL_S)

    def _touch(self) -> None:
        try:
            os.utime(self.path)
        except FileNotFoundError:
            self.path.touch()
