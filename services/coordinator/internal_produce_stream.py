"""The coordinator's writes to internal topics over one long-lived ProduceStream per broker.

Theory of operation. Every group commit and every step of a transaction (Ongoing, Prepare,
Complete) is one acks=all write to a partition of `__consumer_offsets` or `__transaction_state`,
and the client waits on it (measured for this: a one-record acks=all write p50 ~1.15–1.25 ms
unary, ~0.75–0.87 ms on a stream). The stream itself (correlation ids, the in-flight bound,
breaking on a timeout) is common/request_stream.py's.

- Its call metadata carries this coordinator's proof signed for ProduceStream, which the broker
  checks before it lets the stream write internal topics (services/broker/servicer.py). A stream
  opened without one could not write them.
- Each owned partition has at most one batch in flight (record_writer.py), so the in-flight
  bound (`limits.produce_stream_in_flight_max`, the broker's) is only reached by a coordinator
  owning very many partitions on one broker. A failed write is resent with the same sequence, and
  the broker answers a duplicate with its first offsets.
- Tracing: a write made while a sampled span is current carries that span's context in the
  request's `traceparent`, so the broker's produce span joins the caller's trace (the stream's
  channel has no interceptor, which would cost every message). A partition's writes are sent by
  its writer task, not by the handlers that queued them: the partition takes the context each
  write was queued in (`sampled_span_context`) and sends a batch `joined` to its first traced
  write's (coordinator_partition.py).
"""

from __future__ import annotations

import contextlib

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext

from samsa.common import limits
from samsa.common.request_stream import RequestStream, StreamBrokenError
from samsa.common.traceparent import format_traceparent
from samsa.v1 import broker_pb2, broker_pb2_grpc

__all__ = ["InternalProduceStream", "StreamBrokenError"]


class InternalProduceStream(RequestStream[broker_pb2.ProduceRequest, broker_pb2.ProduceResponse]):
    """One ProduceStream to one broker; create and use it on one running event loop."""

    def __init__(
        self,
        stub: broker_pb2_grpc.BrokerServiceStub,
        proof: tuple[tuple[str, str], ...],
    ) -> None:
        super().__init__(
            lambda requests: stub.ProduceStream(requests, metadata=proof),
            limits.produce_stream_in_flight_max,
            broker_pb2.ProduceStreamRequest,
        )

    async def produce(
        self, request: broker_pb2.ProduceRequest, timeout_s: float
    ) -> broker_pb2.ProduceResponse:
        """Send `request` and wait for its answer (StreamBrokenError: common/request_stream.py)."""
        return await self.send(request, timeout_s)

    def _message(
        self, correlation_id: int, request: broker_pb2.ProduceRequest
    ) -> broker_pb2.ProduceStreamRequest:
        return broker_pb2.ProduceStreamRequest(
            correlation_id=correlation_id, request=request, traceparent=_current_traceparent()
        )


def sampled_span_context() -> SpanContext | None:
    """The current span's context when it is sampled, else None (nothing to join)."""
    context = trace.get_current_span().get_span_context()
    return context if context.is_valid and context.trace_flags.sampled else None


def joined(parent: SpanContext | None) -> contextlib.AbstractContextManager[object]:
    """`parent` current for the block (the writes sent in it carry it), or nothing if None."""
    if parent is None:
        return contextlib.nullcontext()
    return trace.use_span(NonRecordingSpan(parent), end_on_exit=False)


def _current_traceparent() -> str:
    """The current span's W3C context when it is sampled, else "" (nothing to join)."""
    context = sampled_span_context()
    return "" if context is None else format_traceparent(context)
