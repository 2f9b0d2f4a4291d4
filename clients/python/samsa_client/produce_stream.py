"""One long-lived ProduceStream per broker: requests matched to answers by correlation id.

A stream round trip costs about half of a unary call here (DESIGN §12), which is what a caller
waiting on each record feels. gRPC's sync API consumes the request iterator on its own thread;
a reader thread takes the answers and calls each request's callback. A stream that breaks (the
broker restarted, the network failed) fails every request still waiting on it with the gRPC
error, and the producer opens a new one for the next request; `expire` fails requests that got
no answer within the request timeout and breaks the stream, as a unary deadline would.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterator

import grpc

from samsa.v1 import broker_pb2, broker_pb2_grpc

# (response, None) on an answer; (None, error) when the stream broke or the request timed out.
Callback = Callable[[broker_pb2.ProduceResponse | None, grpc.RpcError | None], None]


class StreamBroken(grpc.RpcError):
    """The stream ended or timed out with requests still waiting; a retry may succeed."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self._code = code
        self._details = details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class ProduceStream:
    def __init__(self, stub: broker_pb2_grpc.BrokerServiceStub) -> None:
        self._requests: queue.SimpleQueue[broker_pb2.ProduceStreamRequest | None] = (
            queue.SimpleQueue()
        )
        self._pending: dict[int, tuple[Callback, float]] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self.broken = False
        self._call = stub.ProduceStream(self._outgoing())
        self._reader = threading.Thread(target=self._read, name="samsa-produce-stream", daemon=True)
        self._reader.start()

    def _outgoing(self) -> Iterator[broker_pb2.ProduceStreamRequest]:
        while (item := self._requests.get()) is not None:
            yield item

    def send(self, request: broker_pb2.ProduceRequest, callback: Callback) -> bool:
        """Queue `request`; False (nothing sent) when the stream is broken: open another."""
        with self._lock:
            if self.broken:
                return False
            correlation_id = next(self._ids)
            self._pending[correlation_id] = (callback, time.monotonic())
        self._requests.put(
            broker_pb2.ProduceStreamRequest(correlation_id=correlation_id, request=request)
        )
        return True

    def _read(self) -> None:
        error: grpc.RpcError
        try:
            for answer in self._call:
                with self._lock:
                    entry = self._pending.pop(answer.correlation_id, None)
                if entry is not None:
                    entry[0](answer.response, None)
            error = StreamBroken(grpc.StatusCode.UNAVAILABLE, "the broker ended the stream")
        except grpc.RpcError as rpc_error:
            error = rpc_error
        self._break(error)

    def _break(self, error: grpc.RpcError) -> None:
        with self._lock:
            self.broken = True
            waiting = list(self._pending.values())
            self._pending.clear()
        self._requests.put(None)
        for callback, _ in waiting:
            callback(None, error)

    def expire(self, timeout_s: float) -> None:
        """Break the stream if a request has waited longer than `timeout_s` for its answer."""
        now = time.monotonic()
        with self._lock:
            oldest = min((sent for _, sent in self._pending.values()), default=now)
        if now - oldest > timeout_s:
            self._call.cancel()
            self._break(
                StreamBroken(
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    f"no answer within request.timeout.ms ({timeout_s * 1000:.0f} ms)",
                )
            )

    def close(self) -> None:
        self._requests.put(None)
        self._call.cancel()
