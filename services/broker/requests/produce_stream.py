"""Produce and ProduceStream, the broker side: the unary call, and one long-lived stream per
producer with each request answered as soon as it completes (by correlation id).

Theory of operation. The stream's request reader appends each request as it arrives, in the
reader's own turn of the event loop: a request that needs no replication wait (acks 0 or 1, or
acks=all already replicated) is answered at once, with no task created for it, which is what a
producer waiting on each record feels. Only acks=all appends that must wait for the followers get
a task, so one slow partition does not hold up the stream (answers may then leave out of order;
the correlation id says which request each is for). Appends happen in arrival order either way,
which is what keeps one partition's batches in the order the producer sent them. A request with
a transactional_id is first checked with its transaction coordinator (txn_verification.py), in
the reader too, so that order holds for it as well.

The answers, the wait tasks and how a failure ends the stream are stream_answers.py's (shared
with WriteTxnMarkersStream): the reader and the wait tasks never write or abort, the handler
does.

Internal topics: the adapter says whether the stream may write them (`internal_write_refusal`,
as for the unary Produce). A coordinator's stream carries the membership proof in its call
metadata, signed for ProduceStream and checked once as the stream opens, and writes them; any
other stream is refused those partitions (INVALID_REQUEST, nothing written).

ACLs: each request's topics the caller may not WRITE are answered TOPIC_AUTHORIZATION_FAILED
per partition (produce.py), decided anew for each request, and the stream goes on.

Tracing (record_trace.py): a stream request that carries a sampled record's `traceparent` gets a
`produce` span, child of that record's context, from its arrival to its answer, with the appends'
spans under it; a unary Produce's appends go under the gRPC interceptor's span.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import grpc
from opentelemetry.trace import Span

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.acls import Operation
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.record_trace import (
    current_recording_parent,
    end_produce_span,
    end_unanswered_produce_span,
)
from samsa.services.broker.requests.produce import ReplicationWait, produce
from samsa.services.broker.requests.produce_wait import await_replication
from samsa.services.broker.requests.quota_throttle import Identity, QuotaThrottle, delay
from samsa.services.broker.requests.request_checks import produce_refusal
from samsa.services.broker.requests.txn_verification import TransactionVerifier
from samsa.services.runtime import faults
from samsa.services.runtime.caller import topic_refusals
from samsa.services.runtime.stream_answers import Draining, StreamAnswers, StreamFailure
from samsa.v1 import broker_pb2

# What txn_verification decided for a request: partitions verified, partitions refused and why.
Transactional = tuple[set[tuple[str, int]], dict[tuple[str, int], tuple[ErrorCode, str]]]

PRODUCE_TIMEOUT_MS_DEFAULT = 30_000  # Kafka's request.timeout.ms
DROPPED_ANSWER = (grpc.StatusCode.UNAVAILABLE, "fault injected: answer dropped")
STREAM_INTERNAL_WRITE_REFUSAL = (
    "the stream carries no membership proof (a coordinator's proves it as the stream opens)"
)


def wait_timeout_s(request: broker_pb2.ProduceRequest) -> float:
    timeout_ms = request.timeout_ms or PRODUCE_TIMEOUT_MS_DEFAULT
    return min(timeout_ms, limits.produce_timeout_ms_max) / 1000


async def produce_once(
    host: PartitionHost,
    request: broker_pb2.ProduceRequest,
    context: grpc.aio.ServicerContext,
    *,
    internal_write_refusal: str | None,
    verifier: TransactionVerifier | None = None,
) -> broker_pb2.ProduceResponse:
    """The unary Produce: refuse, append, wait for replication if acks=all asks for it.
    `internal_write_refusal`: why internal topics are refused, None if the caller may write them
    (see `produce`). A request with a transactional_id is first checked by `verifier`."""
    refusal = produce_refusal(request)
    if refusal is not None:
        await context.abort(*refusal)
    transactional: Transactional = (set(), {})
    if request.transactional_id and verifier is not None:
        transactional = await verifier.verify(host, request)
    response, waits = produce(
        host,
        request,
        int(time.time() * 1000),
        internal_write_refusal=internal_write_refusal,
        transactional=transactional,
        trace_parent=current_recording_parent() if host.record_tracer is not None else None,
        refused_topics=topic_refusals(Operation.WRITE),
    )
    if waits:
        await await_replication(waits, wait_timeout_s(request))
    if faults.fire("produce.drop_answer"):  # tests only: lost after the append
        await context.abort(*DROPPED_ANSWER)
    return response


async def serve_produce_stream(
    host: PartitionHost,
    request_iterator: AsyncIterator[broker_pb2.ProduceStreamRequest],
    context: grpc.aio.ServicerContext,
    verifier: TransactionVerifier | None = None,
    *,
    internal_write_refusal: str | None = STREAM_INTERNAL_WRITE_REFUSAL,
    draining: Draining | None = None,
    quotas: QuotaThrottle | None = None,
) -> AsyncIterator[broker_pb2.ProduceStreamResponse]:
    """The handler's generator: yields answers as they complete; see the module docstring.
    `internal_write_refusal`: why internal topics are refused, None if this stream proved it may
    write them. `draining`: set when the broker stops (stream_answers.py). `quotas`: a client
    over its producer_byte_rate has the reader wait its throttle time after the append, so its
    answer and the reading of its next request come that much later (Kafka mutes the
    connection of a throttled client alike); its identity (user, client.id) is read once, at
    the first request a quota counts."""
    stream: StreamAnswers[broker_pb2.ProduceStreamResponse] = StreamAnswers(draining)
    fail = stream.fail
    identity: Identity | None = None  # read at the first request a quota counts

    async def answer_when_replicated(
        correlation_id: int,
        response: broker_pb2.ProduceResponse,
        waits: list[ReplicationWait],
        timeout_s: float,
        span: Span | None,
    ) -> None:
        try:
            await await_replication(waits, timeout_s)
        except asyncio.CancelledError:  # the stream ended first: its client went, or it failed
            if span is not None:
                end_unanswered_produce_span(span, host.record_tracer)
            raise
        except Exception as error:
            if span is not None:
                span.end()
            fail(StreamFailure(None, str(error), error))
            return
        await answer(correlation_id, response, span)

    async def answer(
        correlation_id: int, response: broker_pb2.ProduceResponse, span: Span | None
    ) -> None:
        if span is not None:
            end_produce_span(span, response, host.record_tracer)
        if faults.fire("produce.drop_answer"):  # tests only: lost after the append
            fail(StreamFailure(*DROPPED_ANSWER, None))
            return
        await stream.put(
            broker_pb2.ProduceStreamResponse(correlation_id=correlation_id, response=response)
        )

    async def read_requests() -> None:
        nonlocal identity
        try:
            async for item in stream.requests(request_iterator):
                refusal = produce_refusal(item.request)
                if refusal is not None:
                    fail(StreamFailure(*refusal, None))
                    return
                transactional: Transactional = (set(), {})
                if item.request.transactional_id and verifier is not None:
                    # Awaited in the reader: later requests wait, so appends keep their order.
                    transactional = await verifier.verify(host, item.request)
                span = None
                if item.traceparent and host.record_tracer is not None:
                    span = host.record_tracer.start_produce(item.traceparent, item.request)
                response, waits = produce(
                    host,
                    item.request,
                    int(time.time() * 1000),
                    internal_write_refusal=internal_write_refusal,
                    transactional=transactional,
                    trace_parent=None if span is None else span.get_span_context(),
                    refused_topics=topic_refusals(Operation.WRITE),  # per request: ACLs change
                )
                if quotas is not None and quotas.active():
                    identity = identity or quotas.identity(context)  # once per stream
                    response.throttle_time_ms = quotas.produced(identity, item.request)
                    await delay(response.throttle_time_ms)
                if not waits:
                    await answer(item.correlation_id, response, span)
                    continue
                await stream.in_background(
                    answer_when_replicated(
                        item.correlation_id, response, waits, wait_timeout_s(item.request), span
                    )
                )
        except Exception as error:
            fail(StreamFailure(None, str(error), error))
            return
        await stream.end()

    async for response in stream.serve(read_requests(), context):
        yield response
