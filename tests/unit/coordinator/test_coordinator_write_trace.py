"""Goal: a coordinator's write made while serving a traced request carries that request's trace
to the broker (README "Observe it": "a coordinator's write to a broker carries the trace on"),
though the partition's writer task, not the handler, sends it: the ProduceStream request's
`traceparent` is the context of the sampled span the batch's first traced write was queued in,
and an untraced batch carries none.

Method: a real OffsetsPartition over a real broker Log through a stand-in for OffsetsLog
(test_offsets_partition_large_writes.py's) that records, as each batch is sent, the traceparent
InternalProduceStream would put on its request there; the pure RecordWriter for which write's
context a batch takes.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from async_waits import until
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanContext, TraceFlags
from test_offsets_partition_large_writes import LogBackedOffsetsLog, partition_over

from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.log import Log
from samsa.services.coordinator import internal_produce_stream
from samsa.services.coordinator.group_model import GroupConfig
from samsa.services.coordinator.offsets_log import ProduceResult
from samsa.services.coordinator.record_writer import RecordWriter
from samsa.v1 import coordinator_pb2 as c


class TraceparentRecording(LogBackedOffsetsLog):
    """Records the traceparent each produce would carry (built where it is sent, as
    InternalProduceStream._message is)."""

    def __init__(self, log: Log) -> None:
        super().__init__(log)
        self.traceparents: list[str] = []

    async def produce(self, topic: str, partition: int, batch: bytes) -> ProduceResult:
        self.traceparents.append(internal_produce_stream._current_traceparent())
        return await super().produce(topic, partition, batch)


def commit(partition, offset: int) -> asyncio.Future[None]:  # type: ignore[no-untyped-def]
    request = c.OffsetCommitRequest(group_id="g", member_epoch=-1)
    request.topics.add(name="t").partitions.add(partition=0, committed_offset=offset)
    result = partition.shard.commit_offsets(request, int(time.time() * 1000), {"t": 1})
    return partition.write(result.records)


def test_a_commit_served_in_a_sampled_span_is_written_in_its_trace(tmp_path: Path) -> None:
    tracer = TracerProvider().get_tracer("test")

    async def run() -> tuple[list[str], str]:
        offsets_log = TraceparentRecording(Log.open(tmp_path, LogConfig(), now_ms=0))
        live = partition_over(offsets_log, GroupConfig())  # type: ignore[arg-type]
        live.start()
        await until(lambda: live.loaded, "the partition loaded", timeout_s=30)
        offsets_log.traceparents.clear()
        await commit(live, 1)  # untraced
        with tracer.start_as_current_span("OffsetCommit") as span:
            await commit(live, 2)
        await live.stop()
        offsets_log.log.close()
        return offsets_log.traceparents, f"{span.get_span_context().trace_id:032x}"

    traceparents, trace_id = asyncio.run(run())
    assert len(traceparents) == 2
    assert traceparents[0] == ""
    assert traceparents[1].startswith(f"00-{trace_id}-"), traceparents


def test_a_batch_takes_the_context_of_its_first_traced_write() -> None:
    def sampled(span_id: int) -> SpanContext:
        return SpanContext(1, span_id, is_remote=False, trace_flags=TraceFlags(1))

    writer: RecordWriter[str] = RecordWriter(7, 3, max_batch_records=10, max_batch_bytes=1 << 20)
    writer.append([(b"k", b"v")], "untraced")
    writer.append([(b"k", b"v")], "first", sampled(2))
    writer.append([(b"k", b"v")], "second", sampled(3))
    batch = writer.next_batch()
    assert batch is not None and batch.trace_parent == sampled(2)
    writer.on_success(0)
    writer.append([(b"k", b"v")], "alone")
    batch = writer.next_batch()
    assert batch is not None and batch.trace_parent is None
