"""WriteTxnMarkersStream, the broker side: a transaction coordinator's markers over one
long-lived stream, each request answered as soon as its markers are replicated (by correlation
id).

Theory of operation. Each request is what the unary WriteTxnMarkers takes (txn_markers.py) and is
written the same way, in the request reader's own turn of the event loop, so markers are
appended in the order they arrive. A request whose markers are already replicated (or failed) is
answered at once; one that must wait for the followers gets a task, at most
`limits.produce_stream_in_flight_max` at a time (the reader waits for room beyond that), so one
slow partition does not hold up the others' answers.

The servicer checks the membership proof once, as the stream opens. grpc allows one operation at
a time per call and only the handler's task may send the status: the reader and the wait tasks
queue answers, or record a failure (a request the unary call would refuse, a bug) and wake the
handler, which aborts with it. The stream ends with that status; it never hangs.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import grpc

from samsa.common import limits
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.produce import ReplicationWait
from samsa.services.broker.requests.produce_wait import await_replication
from samsa.services.broker.requests.txn_markers import (
    markers_refusal,
    timeout_s,
    write_txn_markers,
)
from samsa.v1 import broker_pb2

Failure = tuple[grpc.StatusCode, str]


async def serve_markers_stream(
    host: PartitionHost,
    request_iterator: AsyncIterator[broker_pb2.WriteTxnMarkersStreamRequest],
    context: grpc.aio.ServicerContext,
) -> AsyncIterator[broker_pb2.WriteTxnMarkersStreamResponse]:
    """The handler's generator: yields answers as they complete; see the module docstring."""
    answers: asyncio.Queue[broker_pb2.WriteTxnMarkersStreamResponse | None] = asyncio.Queue(
        maxsize=limits.produce_stream_answers_queued_max
    )
    waiting: set[asyncio.Task[None]] = set()
    failures: list[Failure] = []

    def fail(failure: Failure) -> None:
        failures.append(failure)
        with contextlib.suppress(asyncio.QueueFull):  # full: the handler is not waiting
            answers.put_nowait(None)

    def answer_of(
        correlation_id: int, response: broker_pb2.WriteTxnMarkersResponse
    ) -> broker_pb2.WriteTxnMarkersStreamResponse:
        return broker_pb2.WriteTxnMarkersStreamResponse(
            correlation_id=correlation_id, response=response
        )

    async def answer_when_replicated(
        correlation_id: int,
        response: broker_pb2.WriteTxnMarkersResponse,
        waits: list[ReplicationWait],
        wait_s: float,
    ) -> None:
        try:
            await await_replication(waits, wait_s)
        except Exception as error:
            fail((grpc.StatusCode.INTERNAL, f"waiting for the markers' replication: {error}"))
            return
        await answers.put(answer_of(correlation_id, response))

    async def read_requests() -> None:
        try:
            async for item in request_iterator:
                refusal = markers_refusal(item.request)
                if refusal is not None:
                    fail(refusal)
                    return
                response, waits = write_txn_markers(host, item.request, int(time.time() * 1000))
                if not waits:
                    await answers.put(answer_of(item.correlation_id, response))
                    continue
                if len(waiting) >= limits.produce_stream_in_flight_max:
                    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                task = asyncio.create_task(
                    answer_when_replicated(
                        item.correlation_id, response, waits, timeout_s(item.request)
                    )
                )
                waiting.add(task)
                task.add_done_callback(waiting.discard)
            if waiting:
                await asyncio.wait(waiting)
        except Exception as error:
            fail((grpc.StatusCode.INTERNAL, f"the markers stream failed: {error}"))
            return
        await answers.put(None)

    reader = asyncio.create_task(read_requests())
    try:
        while True:
            response = await answers.get()
            if failures:
                await context.abort(*failures[0])
            if response is None:
                break
            yield response
    finally:
        reader.cancel()
        for task in waiting:
            task.cancel()
