"""TransactionStream, the coordinator side: a transactional producer's EndTxn, AddOffsetsToTxn and
TxnOffsetCommit over one long-lived stream, each request answered as soon as it completes (by
correlation id), and the status checks those requests share with their unary calls.

Theory of operation. A producer's commit_transaction() waits on an EndTxn round trip: timed here,
a unary EndTxn cost the client ~2.6 ms of which the coordinator's own work (the PrepareCommit
write) was ~1.3 ms; a message on an open stream costs about half of a new unary call (DESIGN
§12). Each request runs as a task of its own through the same code as its unary call
(`TransactionCoordinatorServicer.end_txn`, `add_offsets_to_txn`, `txn_offset_commit`), so one
that waits (an add that meets the last transaction's phase 2) holds up no other. A request the
unary call would refuse with a status ends the stream with it, as does a message with no request
set (INVALID_ARGUMENT). The answers, the tasks and the failure are stream_answers.py's.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import grpc

from samsa.common import limits
from samsa.common.request_counts import too_many_nested
from samsa.services.coordinator.group_offsets import commit_size_problem
from samsa.services.runtime.stream_answers import Refusal, StreamAnswers
from samsa.v1 import transactions_pb2 as x

if TYPE_CHECKING:
    from samsa.services.coordinator.transaction_servicer import TransactionCoordinatorServicer


async def serve_transaction_stream(
    servicer: TransactionCoordinatorServicer,
    request_iterator: AsyncIterator[x.TransactionStreamRequest],
    context: grpc.aio.ServicerContext,
) -> AsyncIterator[x.TransactionStreamResponse]:
    """The handler's generator: yields answers as they complete; see the module docstring."""
    stream: StreamAnswers[x.TransactionStreamResponse] = StreamAnswers(
        servicer.coordinator.draining
    )

    async def answer(item: x.TransactionStreamRequest) -> None:
        kind = item.WhichOneof("request")
        if kind == "end_txn":
            response = x.TransactionStreamResponse(
                correlation_id=item.correlation_id, end_txn=await servicer.end_txn(item.end_txn)
            )
        elif kind == "add_offsets_to_txn":
            added = await servicer.add_offsets_to_txn(item.add_offsets_to_txn)
            response = x.TransactionStreamResponse(
                correlation_id=item.correlation_id, add_offsets_to_txn=added
            )
        else:
            committed = await servicer.txn_offset_commit(item.txn_offset_commit)
            response = x.TransactionStreamResponse(
                correlation_id=item.correlation_id, txn_offset_commit=committed
            )
        await stream.put(response)

    reader = stream.answer_each(request_iterator, stream_refusal, answer)
    async for response in stream.serve(reader, context):
        yield response


def stream_refusal(item: x.TransactionStreamRequest) -> Refusal | None:
    """The status a TransactionStream message ends the stream with, if it must."""
    kind = item.WhichOneof("request")
    if kind is None:
        return (
            grpc.StatusCode.INVALID_ARGUMENT,
            f"TransactionStream request {item.correlation_id} carries no request: set end_txn, "
            "add_offsets_to_txn or txn_offset_commit",
        )
    if kind == "txn_offset_commit":
        return txn_offsets_refusal(item.txn_offset_commit)
    return None


def txn_offsets_refusal(request: x.TxnOffsetCommitRequest) -> Refusal | None:
    """The status a TxnOffsetCommit too large to consider is refused with, if it is: too many
    offsets, or records that would not fit the one batch of `__consumer_offsets` they are
    written as (the broker would refuse it, MESSAGE_TOO_LARGE, for every partition named)."""
    message = too_many_nested(
        sum(len(topic.partitions) for topic in request.topics),
        "offsets",
        entries=len(request.topics),
        limit=limits.admin_request_items_max,
    ) or commit_size_problem(request, int(time.time() * 1000))
    return None if message is None else (grpc.StatusCode.RESOURCE_EXHAUSTED, message)


def too_many_partitions(request: x.AddPartitionsToTxnRequest) -> Refusal | None:
    """The status an AddPartitionsToTxn too large to consider is refused with, if it is."""
    message = too_many_nested(
        sum(len(entry.partitions) for entry in request.partitions),
        "partitions",
        entries=len(request.partitions),
        limit=limits.admin_request_items_max,
    )
    return None if message is None else (grpc.StatusCode.RESOURCE_EXHAUSTED, message)
