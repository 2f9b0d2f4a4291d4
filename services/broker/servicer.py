"""The BrokerService gRPC adapter: request limits, then the produce/fetch/list-offsets cores, and
InitProducerId from the broker's producer id blocks (producer_ids.py).

A Fetch that claims a replica_id (a follower's) must carry the cluster's membership proof
(services/runtime/membership.py): without it a stranger could move the high watermark."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time

import grpc

from samsa.common import limits
from samsa.services.broker.fetch import CLOSE_EPOCH, fetch
from samsa.services.broker.fetch_session import EPOCH_MAX, FetchSessionCache
from samsa.services.broker.list_offsets import list_offsets
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.produce import produce
from samsa.services.broker.produce_wait import await_replication
from samsa.services.broker.producer_ids import ProducerIdManager, init_producer_id
from samsa.services.runtime import faults, member_auth
from samsa.services.runtime.membership import method_path
from samsa.v1 import broker_pb2, broker_pb2_grpc

FETCH_METHOD = method_path(
    broker_pb2.DESCRIPTOR.services_by_name["BrokerService"].full_name, "Fetch"
)

PRODUCE_TIMEOUT_MS_DEFAULT = 30_000  # Kafka's request.timeout.ms


def _partition_count(request) -> int:  # type: ignore[no-untyped-def]
    count = sum(len(topic.partitions) for topic in request.topics)
    if isinstance(request, broker_pb2.FetchRequest):
        count += sum(len(topic.partitions) for topic in request.forgotten_topics)
    return count


async def _check_partitions(request, context: grpc.aio.ServicerContext) -> None:  # type: ignore[no-untyped-def]
    count = _partition_count(request)
    if count > limits.request_partitions_max:
        await context.abort(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"the request names {count} partitions; send at most {limits.request_partitions_max} "
            "per request",
        )


class _StreamAbort(Exception):
    """An abort one ProduceStream request asked for, carried to the stream's own task."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class _AnswerTaskContext:
    """What `_produce` sees inside a ProduceStream answer task: its abort raises `_StreamAbort`
    instead of sending a status, because grpc allows one operation at a time per call and the
    stream's own task may be writing an answer at that moment (TOO_MANY_OPERATIONS). Anything
    else is the stream's context."""

    def __init__(self, context: grpc.aio.ServicerContext) -> None:
        self._context = context

    def __getattr__(self, name: str) -> object:
        return getattr(self._context, name)

    async def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        raise _StreamAbort(code, details)


class BrokerServicer(broker_pb2_grpc.BrokerServiceServicer):
    """Serves Produce, Fetch and ListOffsets for the partitions this broker leads, and
    InitProducerId."""

    def __init__(
        self, host: PartitionHost, *, member_key: bytes, producer_ids: ProducerIdManager
    ) -> None:
        self.host = host
        self.producer_ids = producer_ids
        self.member_key = member_key  # membership.derive_key(cluster secret): checks followers
        self.fetch_sessions = FetchSessionCache(new_id=lambda: secrets.randbelow(EPOCH_MAX) + 1)

    async def Produce(self, request, context):
        return await self._produce(request, context)

    async def _produce(self, request, context):
        await _check_partitions(request, context)
        for topic in request.topics:
            for data in topic.partitions:
                if len(data.typed_records) > limits.typed_records_per_partition_max:
                    await context.abort(
                        grpc.StatusCode.RESOURCE_EXHAUSTED,
                        f"{len(data.typed_records)} typed records for {topic.name}-"
                        f"{data.partition}; send at most {limits.typed_records_per_partition_max}"
                        " per partition per request, or encoded batches",
                    )
        response, waits = produce(self.host, request, int(time.time() * 1000))
        if waits:
            timeout_ms = request.timeout_ms or PRODUCE_TIMEOUT_MS_DEFAULT
            await await_replication(waits, min(timeout_ms, limits.produce_timeout_ms_max) / 1000)
        if faults.fire("produce.drop_answer"):  # tests only: lost after the append
            await context.abort(grpc.StatusCode.UNAVAILABLE, "fault injected: answer dropped")
        return response

    async def ProduceStream(self, request_iterator, context):
        """Each request is answered as soon as it completes; acks=all waits run concurrently,
        so one slow partition does not hold up the stream.

        The requests are read, and answered, in other tasks; grpc only sees what this generator
        raises, and only this task may send the status. So any failure there (an undecodable
        request, an abort, a bug) is recorded, wakes this generator and is raised (or the abort
        sent) here: the stream ends with that status, never hangs."""
        answers: asyncio.Queue[broker_pb2.ProduceStreamResponse | None] = asyncio.Queue(
            maxsize=limits.produce_stream_answers_queued_max
        )
        pending: set[asyncio.Task[None]] = set()
        failures: list[Exception] = []

        def fail(error: Exception) -> None:
            failures.append(error)
            with contextlib.suppress(asyncio.QueueFull):  # full: the generator is not waiting
                answers.put_nowait(None)

        async def answer(item: broker_pb2.ProduceStreamRequest) -> None:
            try:
                response = await self._produce(item.request, answer_context)
            except Exception as error:
                fail(error)
                return
            await answers.put(
                broker_pb2.ProduceStreamResponse(
                    correlation_id=item.correlation_id, response=response
                )
            )

        async def read_requests() -> None:
            try:
                async for item in request_iterator:
                    if len(pending) >= limits.produce_stream_in_flight_max:
                        await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    task = asyncio.create_task(answer(item))
                    pending.add(task)
                    task.add_done_callback(pending.discard)
                if pending:
                    await asyncio.wait(pending)
            except Exception as error:
                fail(error)
                return
            await answers.put(None)

        answer_context = _AnswerTaskContext(context)
        reader = asyncio.create_task(read_requests())
        try:
            while True:
                response = await answers.get()
                if failures and isinstance(failures[0], _StreamAbort):
                    await context.abort(failures[0].code, failures[0].details)
                if failures:
                    raise failures[0]
                if response is None:
                    break
                yield response
        finally:
            reader.cancel()
            for task in pending:
                task.cancel()

    async def Fetch(self, request, context):
        # A replica_id counts the fetch towards the ISR and the high watermark and reads past it:
        # only a member of the cluster may claim one. Consumers (unset or -1) stay open.
        if request.HasField("replica_id") and request.replica_id >= 0:
            await member_auth.require_member(
                context,
                self.member_key,
                FETCH_METHOD,
                request.replica_id,
                f"Fetch with replica_id={request.replica_id}",
            )
        await _check_partitions(request, context)
        if request.max_wait_ms < 0 or request.min_bytes < 0 or request.max_bytes < 0:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                "max_wait_ms, min_bytes and max_bytes must not be negative",
            )
        if request.HasField("session_id") and (
            request.session_id < 0 or request.session_epoch < CLOSE_EPOCH
        ):
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                "session_id must not be negative, nor session_epoch below -1",
            )
        for topic in request.topics:
            for wanted in topic.partitions:
                if wanted.partition_max_bytes < 0 or wanted.fetch_offset < 0:
                    await context.abort(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"{topic.name}-{wanted.partition}: fetch_offset and partition_max_bytes "
                        "must not be negative",
                    )
        return await fetch(self.host, request, self.fetch_sessions)

    async def ListOffsets(self, request, context):
        await _check_partitions(request, context)
        return list_offsets(self.host, request)

    async def InitProducerId(self, request, context):
        return await init_producer_id(self.producer_ids, request, context.time_remaining())
