"""Controller servicers of a test's own making, served by real gRPC servers on loopback, for
unit tests of client code that talks to the controllers. Shared by the tests through pytest's
`pythonpath` (pyproject.toml)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import grpc

from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c
from samsa.v1 import controller_pb2_grpc


@contextmanager
def serving_controllers(
    *servicers: controller_pb2_grpc.ControllerServiceServicer,
) -> Iterator[list[str]]:
    """Serves each servicer on its own port; yields their endpoints in the same order and stops
    every server on the way out, even when the test fails."""
    servers: list[grpc.Server] = []
    endpoints: list[str] = []
    try:
        for servicer in servicers:
            server = grpc.server(ThreadPoolExecutor(max_workers=2))
            controller_pb2_grpc.add_ControllerServiceServicer_to_server(servicer, server)
            endpoints.append(f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}")
            server.start()
            servers.append(server)
        yield endpoints
    finally:
        for server in servers:
            server.stop(None).wait(5)


class NotController(controller_pb2_grpc.ControllerServiceServicer):
    """A controller that is not the active one: answers every CreateTopics NOT_CONTROLLER naming
    `active` (set once the test knows the endpoints) and counts the calls."""

    def __init__(self) -> None:
        self.active = ""
        self.calls = 0

    def CreateTopics(self, request, context):  # type: ignore[no-untyped-def]
        self.calls += 1
        answer = c.CreateTopicsResponse()
        answer.status.error_code = ErrorCode.NOT_CONTROLLER  # type: ignore[assignment]
        answer.status.error_message = "not the active controller"
        answer.status.active_controller.endpoint = self.active
        return answer
