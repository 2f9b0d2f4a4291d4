"""The BrokerService gRPC adapter: request limits, then the produce/fetch/list-offsets cores."""

from __future__ import annotations

import asyncio
import time

import grpc

from samsa.common import limits
from samsa.services.broker.fetch import fetch
from samsa.services.broker.list_offsets import list_offsets
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.produce import produce
from samsa.services.broker.produce_wait import await_replication
from samsa.v1 import broker_pb2, broker_pb2_grpc

PRODUCE_TIMEOUT_MS_DEFAULT = 30_000  # Kafka's request.timeout.ms


def _partition_count(request) -> int:  # type: ignore[no-untyped-def]
    return sum(len(topic.partitions) for topic in request.topics)


async def _check_partitions(request, context: grpc.aio.ServicerContext) -> None:  # type: ignore[no-untyped-def]
    count = _partition_count(request)
    if count > limits.request_partitions_max:
        await context.abort(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"the request names {count} partitions; send at most {limits.request_partitions_max} "
            "per request",
        )


class BrokerServicer(broker_pb2_grpc.BrokerServiceServicer):
    """Serves Produce, Fetch and ListOffsets for the partitions this broker leads."""

    def __init__(self, host: PartitionHost) -> None:
        self.host = host

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
        return response

    async def ProduceStream(self, request_iterator, context):
        """Each request is answered as soon as it completes; acks=all waits run concurrently,
        so one slow partition does not hold up the stream."""
        answers: asyncio.Queue[broker_pb2.ProduceStreamResponse | None] = asyncio.Queue()
        pending: set[asyncio.Task[None]] = set()

        async def answer(item: broker_pb2.ProduceStreamRequest) -> None:
            response = await self._produce(item.request, context)
            await answers.put(
                broker_pb2.ProduceStreamResponse(
                    correlation_id=item.correlation_id, response=response
                )
            )

        async def read_requests() -> None:
            async for item in request_iterator:
                if len(pending) >= limits.produce_stream_in_flight_max:
                    await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                task = asyncio.create_task(answer(item))
                pending.add(task)
                task.add_done_callback(pending.discard)
            if pending:
                await asyncio.wait(pending)
            await answers.put(None)

        reader = asyncio.create_task(read_requests())
        try:
            while (response := await answers.get()) is not None:
                yield response
        finally:
            reader.cancel()
            for task in pending:
                task.cancel()

    async def Fetch(self, request, context):
        await _check_partitions(request, context)
        if request.max_wait_ms < 0 or request.min_bytes < 0 or request.max_bytes < 0:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                "max_wait_ms, min_bytes and max_bytes must not be negative",
            )
        for topic in request.topics:
            for wanted in topic.partitions:
                if wanted.partition_max_bytes < 0 or wanted.fetch_offset < 0:
                    await context.abort(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"{topic.name}-{wanted.partition}: fetch_offset and partition_max_bytes "
                        "must not be negative",
                    )
        return await fetch(self.host, request)

    async def ListOffsets(self, request, context):
        await _check_partitions(request, context)
        return list_offsets(self.host, request)
