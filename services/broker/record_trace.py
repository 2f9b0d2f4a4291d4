"""A traced record's journey through the broker, as spans of the record's own trace (DESIGN §9).

The producer SDK puts the `traceparent` of a sampled record on its ProduceStream request (a
stream outlives its requests, so the stream's gRPC metadata cannot stand for each). The leader
then records, all children of one `produce` span that is a child of that context:

    produce                      the request, from arrival to its answer (acks=all: replicated)
      append orders-0            the append to the leader's log
      replicate orders-0 to 2    from the append until follower 2's fetch shows it holds the batch
      high watermark orders-0    from the append until the high watermark passes the batch
      fetch orders-0             each consumer fetch that returned the batch (after the produce)

So produce → append → replicate → high watermark → fetch, and the consumer's poll span (which the
SDK makes a child of the same context), read as one tree in `samsa trace`. A unary Produce gets
the same children under the gRPC interceptor's span, which continues the caller's trace from the
call's metadata (a coordinator's write while it serves a traced commit, say).

Only traced batches cost anything: a partition gets a `PartitionTraces` at its first traced append
and remembers at most BATCHES_REMEMBERED of them, each for at most REMEMBERED_NS, so that later
fetches can find theirs; nothing per record, nothing when tracing is off (the host's
`record_tracer` is None). Spans are made when the step completes, with the step's start time, so
none stays open: a batch whose replication never completes (its leader moved, say) simply has no
replicate span. A batch the log loses to a truncation (this replica followed a leader that never
had it) is forgotten with it: the records that later take its offsets are not its journey. Pure:
the tracer and the clock are passed in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, SpanKind, StatusCode, Tracer

from samsa.common.errors import ErrorCode
from samsa.common.traceparent import parse_traceparent
from samsa.v1 import broker_pb2

TRACER_NAME = "samsa.broker"
MESSAGING_SYSTEM = "samsa"
BATCHES_REMEMBERED = 256  # per partition
REMEMBERED_NS = 10 * 60 * 1_000_000_000  # a fetch this much later gets no span


def _partition_attributes(topic: str, partition: int) -> dict[str, str]:
    return {
        "messaging.system": MESSAGING_SYSTEM,
        "messaging.destination.name": topic,
        "messaging.destination.partition.id": str(partition),
    }


@dataclass
class _TracedBatch:
    first_offset: int
    end_offset: int  # one past the last offset
    parent: Context  # the produce span's
    appended_ns: int
    replicated: bool = False  # the high watermark passed it
    followers_done: set[int] = field(default_factory=set)


class PartitionTraces:
    """The traced batches of one partition the broker still remembers, and their later steps."""

    def __init__(
        self, tracer: Tracer, clock: Callable[[], int], topic: str, partition: int
    ) -> None:
        self.tracer = tracer
        self.clock = clock
        self.topic = topic
        self.partition = partition
        self.name = f"{topic}-{partition}"
        self.batches: deque[_TracedBatch] = deque(maxlen=BATCHES_REMEMBERED)

    def appended(
        self,
        parent: SpanContext,
        first_offset: int,
        end_offset: int,
        size_bytes: int,
        started_ns: int,
        ended_ns: int,
    ) -> None:
        """A traced append: its span now, and the batch remembered for the steps after it."""
        context = trace.set_span_in_context(NonRecordingSpan(parent))
        attributes: dict[str, str | int] = {
            **_partition_attributes(self.topic, self.partition),
            "messaging.kafka.offset": first_offset,
            "samsa.last_offset": end_offset - 1,
            "messaging.batch.message_count": end_offset - first_offset,
            "samsa.batch.bytes": size_bytes,
        }
        self.tracer.start_span(
            f"append {self.name}",
            context=context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=started_ns,
        ).end(end_time=ended_ns)
        while self.batches and self.batches[0].appended_ns < ended_ns - REMEMBERED_NS:
            self.batches.popleft()
        self.batches.append(_TracedBatch(first_offset, end_offset, context, ended_ns))

    def truncated(self, log_end_offset: int) -> None:
        """The log was cut back to `log_end_offset` (a follower's truncation, a corrupt replica's
        repair): the batches not wholly below it are gone from it, and another leader's records
        may take their offsets, so they get no later span."""
        kept = [batch for batch in self.batches if batch.end_offset <= log_end_offset]
        if len(kept) < len(self.batches):
            self.batches = deque(kept, maxlen=BATCHES_REMEMBERED)

    def high_watermark_moved(self, high_watermark: int) -> None:
        """The batches the high watermark now passes get their `high watermark` span."""
        now = None
        for batch in self.batches:
            if batch.replicated or batch.end_offset > high_watermark:
                continue
            batch.replicated = True
            now = self.clock() if now is None else now
            if batch.appended_ns < now - REMEMBERED_NS:
                continue  # forgotten (the batches are dropped at the next traced append)
            self.tracer.start_span(
                f"high watermark {self.name}",
                context=batch.parent,
                kind=SpanKind.INTERNAL,
                attributes={
                    **_partition_attributes(self.topic, self.partition),
                    "samsa.high_watermark": high_watermark,
                },
                start_time=batch.appended_ns,
            ).end(end_time=now)

    def served(self, fetch_offset: int, next_offset: int, replica_id: int) -> None:
        """A fetch from `fetch_offset` answered up to `next_offset`. From a follower
        (`replica_id` ≥ 0): the batches below `fetch_offset` are now on that follower, and each
        gets its `replicate` span once. From a consumer: each batch the answer returned gets a
        `fetch` span."""
        now = None
        for batch in self.batches:
            if replica_id >= 0:
                if batch.end_offset > fetch_offset or replica_id in batch.followers_done:
                    continue
                batch.followers_done.add(replica_id)
                name = f"replicate {self.name} to {replica_id}"
                attributes: dict[str, str | int] = {"samsa.follower.id": replica_id}
                start_ns = batch.appended_ns
            else:
                if batch.end_offset <= fetch_offset or batch.first_offset >= next_offset:
                    continue
                name = f"fetch {self.name}"
                attributes = {"samsa.fetch_offset": fetch_offset}
                start_ns = None
            now = self.clock() if now is None else now
            if batch.appended_ns < now - REMEMBERED_NS:
                continue  # forgotten (the batches are dropped at the next traced append)
            self.tracer.start_span(
                name,
                context=batch.parent,
                kind=SpanKind.INTERNAL,
                attributes={**_partition_attributes(self.topic, self.partition), **attributes},
                start_time=now if start_ns is None else start_ns,
            ).end(end_time=now)


class RecordTracer:
    """The broker's maker of record-trace spans; one per broker, only while tracing is on."""

    def __init__(self, tracer: Tracer, clock: Callable[[], int], broker_id: int) -> None:
        self.tracer = tracer
        self.clock = clock
        self.broker_id = broker_id

    def start_produce(self, traceparent: str, request: broker_pb2.ProduceRequest) -> Span | None:
        """The `produce` span of a stream request carrying `traceparent`; None when the value
        is not a traceparent or the record's trace was not sampled (nothing to join)."""
        parent = parse_traceparent(traceparent)
        if parent is None or not parent.trace_flags.sampled:
            return None
        topics = sorted({topic.name for topic in request.topics})
        span = self.tracer.start_span(
            f"produce {topics[0]}" if len(topics) == 1 else "produce",
            context=trace.set_span_in_context(NonRecordingSpan(parent)),
            kind=SpanKind.SERVER,
            attributes={
                "messaging.system": MESSAGING_SYSTEM,
                "messaging.operation.name": "produce",
                "messaging.destination.name": ",".join(topics),
                "rpc.method": "ProduceStream",
                "samsa.broker.id": self.broker_id,
                "samsa.acks": request.acks if request.HasField("acks") else -1,
            },
            start_time=self.clock(),
        )
        return span if span.is_recording() else None

    def partition_traces(self, topic: str, partition: int) -> PartitionTraces:
        return PartitionTraces(self.tracer, self.clock, topic, partition)


def end_produce_span(
    span: Span, response: broker_pb2.ProduceResponse, tracer: RecordTracer | None
) -> None:
    """End a `produce` span as its answer leaves; an error status names the first refusal."""
    refusals = [
        f"{topic.name}-{partition.partition}: {ErrorCode(partition.error_code).name}"
        for topic in response.topics
        for partition in topic.partitions
        if partition.error_code
    ]
    if refusals:
        span.set_status(StatusCode.ERROR, "; ".join(refusals[:3]))
    span.end(end_time=None if tracer is None else tracer.clock())


def end_unanswered_produce_span(span: Span, tracer: RecordTracer | None) -> None:
    """End, as an error, a `produce` span whose answer never left: the stream ended while the
    batch waited for replication (its client went away, or another request failed it). Without
    this the span stayed open and was never exported, on exactly the produce one traces to learn
    why it timed out."""
    span.set_status(StatusCode.ERROR, "the stream ended before the batch was replicated")
    span.end(end_time=None if tracer is None else tracer.clock())


def current_recording_parent() -> SpanContext | None:
    """The context of the span current here (the gRPC interceptor's, in a unary Produce) if it is
    being recorded; None otherwise."""
    span = trace.get_current_span()
    return span.get_span_context() if span.is_recording() else None
