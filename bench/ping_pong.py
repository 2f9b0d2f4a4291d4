"""The floor under a synchronous produce: a bare grpc.aio bidirectional-stream ping-pong, with
nothing of Samsa's in it — no protobuf (raw bytes: generic handlers without serializers), no
interceptor, no broker, no storage — driven the way the SDK's sync Producer drives its
ProduceStream, so that Samsa's sync produce latency can be read against it in the same run.

python -m bench.ping_pong                 start a server, measure both callers, print p50/p99
python -m bench.ping_pong serve PORT      just the echo server (PORT 0: any free port; it prints
                                          "listening on 127.0.0.1:<port>" when ready)

- The server runs in its own process (as the broker does), one grpc.aio stream-stream method
  that echoes every message back as it arrives.
- The sync caller (`ping_pong_sync_latency`) is the SDK's shape (samsa_client/producer.py and
  produce_stream.py): a grpc.aio stream opened on an event loop in a background thread, whose
  request iterator reads an asyncio.Queue and whose reader task matches each answer to its
  waiter; the caller's thread hands each message to the loop with `call_soon_threadsafe` and
  waits on a `threading.Event` (what `RecordFuture.result()` waits on) for the echo. One message
  at a time, each waited for: the same one-send-one-ack loop as `samsa_sync_latency`.
- The asyncio caller (`ping_pong_async_latency`) is the same stream driven from a coroutine on
  the loop itself (the AsyncProducer's shape): no thread hand-off at all.

Both return {"p50_us", "p99_us"}, the nearest-rank percentiles of bench/figures.py, the dict
shape of bench/client_bench.py's latency functions.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

from samsa.common.grpc_experiments import prefer_legacy_poller

prefer_legacy_poller()  # the floor runs with the gRPC setup Samsa's processes run with

import grpc  # noqa: E402

from bench.figures import percentile  # noqa: E402
from samsa.common import event_loops  # noqa: E402

SERVICE = "bench.PingPong"
METHOD = "Echo"
METHOD_PATH = f"/{SERVICE}/{METHOD}"
HOST = "127.0.0.1"
READY_PREFIX = "listening on "
SERVER_START_TIMEOUT_S = 30.0
ROUND_TRIP_TIMEOUT_S = 10.0
WARMUP_ROUND_TRIPS = 50
REPO = Path(__file__).resolve().parents[1]


def _percentiles(samples_s: list[float]) -> dict[str, float]:
    """p50 and p99 in µs, nearest rank (client_bench's shape and percentile)."""
    return {
        "p50_us": percentile(samples_s, 0.50) * 1e6,
        "p99_us": percentile(samples_s, 0.99) * 1e6,
    }


# --- the server --------------------------------------------------------------------------------


async def _echo(request_iterator: AsyncIterator[bytes], context: object) -> AsyncIterator[bytes]:
    async for message in request_iterator:
        yield message


async def _serve(port: int) -> None:
    server = grpc.aio.server()
    handler = grpc.method_handlers_generic_handler(
        SERVICE,
        {METHOD: grpc.stream_stream_rpc_method_handler(_echo)},  # raw bytes both ways
    )
    server.add_generic_rpc_handlers((handler,))
    bound = server.add_insecure_port(f"{HOST}:{port}")
    await server.start()
    print(f"{READY_PREFIX}{HOST}:{bound}", flush=True)
    await server.wait_for_termination()


@contextlib.contextmanager
def ping_pong_server() -> Iterator[str]:
    """The echo server in a child process on a free port; yields its target (host:port). The
    child is stopped by its PID on the way out, whatever happens in between."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.ping_pong", "serve", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield _wait_ready(process)
    finally:
        _stop(process.pid, process)


def _wait_ready(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while (remaining := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([process.stdout], [], [], remaining)
        if not readable:
            break
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"the ping-pong server exited (status {process.wait()})")
        if line.startswith(READY_PREFIX):
            return line[len(READY_PREFIX) :].strip()
    raise TimeoutError(f"the ping-pong server was not ready within {SERVER_START_TIMEOUT_S:g} s")


def _stop(pid: int, process: subprocess.Popen[str]) -> None:
    """SIGTERM the child by PID, SIGKILL it if it lingers, and reap it."""
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        process.wait(timeout=5)
    if process.stdout is not None:
        process.stdout.close()


# --- the client: one stream, answers matched to waiters in order --------------------------------


class _EchoStream:
    """One grpc.aio stream to the echo server; must be opened and used on one running loop.
    `send(message, waiter)` queues the message without awaiting (as ProduceStream.send does) and
    the reader task calls `waiter()` when its echo arrives (the server answers in order)."""

    def __init__(self, target: str) -> None:
        self._channel = grpc.aio.insecure_channel(target)
        self._requests: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._waiters: collections.deque[Callable[[], None]] = collections.deque()
        call = self._channel.stream_stream(METHOD_PATH)(self._outgoing())  # no serializers
        self._reader = asyncio.get_running_loop().create_task(self._read(call))

    async def _outgoing(self) -> AsyncIterator[bytes]:
        while (message := await self._requests.get()) is not None:
            yield message

    async def _read(self, call: grpc.aio.StreamStreamCall) -> None:
        async for _ in call:
            self._waiters.popleft()()

    def send(self, message: bytes, waiter: Callable[[], None]) -> None:
        self._waiters.append(waiter)
        self._requests.put_nowait(message)

    async def close(self) -> None:
        self._requests.put_nowait(None)
        with contextlib.suppress(asyncio.TimeoutError, grpc.RpcError):
            await asyncio.wait_for(self._reader, ROUND_TRIP_TIMEOUT_S)
        await self._channel.close()


def ping_pong_sync_latency(target: str, count: int, size: int) -> dict[str, float]:
    """A sync caller over a loop thread, one message at a time, each waited for."""
    loop = event_loops.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="ping-pong-loop", daemon=True)
    thread.start()

    async def open_stream() -> _EchoStream:
        return _EchoStream(target)

    try:
        stream = asyncio.run_coroutine_threadsafe(open_stream(), loop).result(ROUND_TRIP_TIMEOUT_S)
        payload = os.urandom(size)
        send = stream.send
        call_soon_threadsafe = loop.call_soon_threadsafe

        def round_trip() -> None:
            answered = threading.Event()
            call_soon_threadsafe(send, payload, answered.set)
            if not answered.wait(ROUND_TRIP_TIMEOUT_S):
                raise TimeoutError(f"no echo within {ROUND_TRIP_TIMEOUT_S:g} s")

        try:
            for _ in range(WARMUP_ROUND_TRIPS):
                round_trip()
            samples = []
            for _ in range(count):
                started = time.perf_counter()
                round_trip()
                samples.append(time.perf_counter() - started)
        finally:
            asyncio.run_coroutine_threadsafe(stream.close(), loop).result(ROUND_TRIP_TIMEOUT_S)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(ROUND_TRIP_TIMEOUT_S)
        if not loop.is_running():
            loop.close()
    return _percentiles(samples)


def ping_pong_async_latency(target: str, count: int, size: int) -> dict[str, float]:
    """An asyncio caller on the stream's own loop: no thread hand-off."""

    async def measure() -> list[float]:
        stream = _EchoStream(target)
        loop = asyncio.get_running_loop()
        payload = os.urandom(size)

        async def round_trip() -> None:
            answered = loop.create_future()
            stream.send(payload, lambda: answered.set_result(None))
            await asyncio.wait_for(answered, ROUND_TRIP_TIMEOUT_S)

        try:
            for _ in range(WARMUP_ROUND_TRIPS):
                await round_trip()
            samples = []
            for _ in range(count):
                started = time.perf_counter()
                await round_trip()
                samples.append(time.perf_counter() - started)
            return samples
        finally:
            await stream.close()

    return _percentiles(event_loops.run(measure()))


# --- standalone ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ping_pong", description=__doc__)
    parser.add_argument("mode", nargs="?", choices=("measure", "serve"), default="measure")
    parser.add_argument("port", nargs="?", type=int, default=0, help="serve: the port (0: any)")
    parser.add_argument("--count", type=int, default=2_000, help="measure: round trips")
    parser.add_argument("--size", type=int, default=100, help="measure: bytes per message")
    args = parser.parse_args(argv)
    if args.mode == "serve":
        with contextlib.suppress(KeyboardInterrupt):
            event_loops.run(_serve(args.port))
        return
    with ping_pong_server() as target:
        for name, measure in (
            ("sync caller over a loop thread", ping_pong_sync_latency),
            ("asyncio caller on the loop", ping_pong_async_latency),
        ):
            figures = measure(target, args.count, args.size)
            print(
                f"bare grpc.aio ping-pong, {name}, {args.count:,} x {args.size} B: "
                f"p50 {figures['p50_us']:,.0f} µs, p99 {figures['p99_us']:,.0f} µs"
            )


if __name__ == "__main__":
    main()
