"""A gRPC failure as grpc raises it from a call (an RpcError that is also a Call), for unit tests
of code that reads `code()` and `details()` from such an error. Shared by the tests through
pytest's `pythonpath` (pyproject.toml)."""

from __future__ import annotations

import grpc


class FakeRpcError(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def initial_metadata(self) -> None: ...
    def trailing_metadata(self) -> None: ...
    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> None: ...
    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: object) -> bool:
        return False
