"""WriteTxnMarkersStream, the broker side: a transaction coordinator's markers over one
long-lived stream, each request answered as soon as its markers are replicated (by correlation
id).

Theory of operation. Each request is what the unary WriteTxnMarkers takes (txn_markers.py) and is
written the same way, in the request reader's own turn of the event loop, so markers are
appended in the order they arrive. A request whose markers are already replicated (or failed) is
answered at once; one that must wait for the followers gets a task, so one slow partition does
not hold up the others' answers.

The servicer checks the membership proof once, as the stream opens. The answers, the wait tasks
and how a failure (a request the unary call would refuse, a bug) ends the stream are
stream_answers.py's, shared with ProduceStream.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import grpc

from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.produce import ReplicationWait
from samsa.services.broker.requests.produce_wait import await_replication
from samsa.services.broker.requests.txn_markers import (
    markers_refusal,
    timeout_s,
    write_txn_markers,
)
from samsa.services.runtime.stream_answers import Draining, StreamAnswers, StreamFailure
from samsa.v1 import broker_pb2


async def serve_markers_stream(
    host: PartitionHost,
    request_iterator: AsyncIterator[broker_pb2.WriteTxnMarkersStreamRequest],
    context: grpc.aio.ServicerContext,
    draining: Draining | None = None,
) -> AsyncIterator[broker_pb2.WriteTxnMarkersStreamResponse]:
    """The handler's generator: yields answers as they complete; see the module docstring.
    `draining`: set when the broker stops (stream_answers.py)."""
    stream: StreamAnswers[broker_pb2.WriteTxnMarkersStreamResponse] = StreamAnswers(draining)

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
            stream.fail(StreamFailure(None, str(error), error))
            return
        await stream.put(answer_of(correlation_id, response))

    async def read_requests() -> None:
        try:
            async for item in stream.requests(request_iterator):
                refusal = markers_refusal(item.request)
                if refusal is not None:
                    stream.fail(StreamFailure(*refusal, None))
                    return
                response, waits = write_txn_markers(host, item.request, int(time.time() * 1000))
                if not waits:
                    await stream.put(answer_of(item.correlation_id, response))
                    continue
                await stream.in_background(
                    answer_when_replicated(
                        item.correlation_id, response, waits, timeout_s(item.request)
                    )
                )
        except Exception as error:
            stream.fail(StreamFailure(None, str(error), error))
            return
        await stream.end()

    async for answer in stream.serve(read_requests(), context):
        yield answer
