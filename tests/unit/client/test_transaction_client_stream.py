"""Goal: the transactional producer's calls (transaction_client.py) travel on one TransactionStream
per coordinator, open a new stream when the coordinator ended the last one, fall back to unary
calls on a coordinator without the stream, and stay unary while the application traces.

Method: a TransactionClient on its own event loop against an in-process gRPC server standing in
for a coordinator (it also answers FindCoordinator with its own address), in three versions: one
serving the stream, one ending every stream after one answer, one from before the stream (unary
only). Each counts the streams opened and the requests it got each way.
"""

from __future__ import annotations

import asyncio
from unittest import mock

import grpc

from samsa.client import transaction_client
from samsa.client.channels import AioChannels
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.transaction_client import TransactionClient
from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import coordinator_pb2_grpc as cg
from samsa.v1 import transactions_pb2 as x
from samsa.v1 import transactions_pb2_grpc as xg


class _UnaryOnly(xg.TransactionCoordinatorServiceServicer):
    """A coordinator from before TransactionStream: its calls are unary only."""

    def __init__(self) -> None:
        self.unary = 0
        self.streams = 0
        self.streamed = 0

    def answer(self, request: x.EndTxnRequest) -> x.EndTxnResponse:
        return x.EndTxnResponse(
            producer_id=request.producer.producer_id,
            producer_epoch=request.producer.producer_epoch + 1,
        )

    async def EndTxn(self, request, context):  # type: ignore[no-untyped-def]
        self.unary += 1
        return self.answer(request)

    async def AddOffsetsToTxn(self, request, context):  # type: ignore[no-untyped-def]
        self.unary += 1
        return x.AddOffsetsToTxnResponse()

    async def TxnOffsetCommit(self, request, context):  # type: ignore[no-untyped-def]
        self.unary += 1
        return x.TxnOffsetCommitResponse()


class _Streams(_UnaryOnly):
    """A coordinator with the stream: every request answered on it, in the field of its kind."""

    answers_per_stream: int | None = None

    async def TransactionStream(self, request_iterator, context):  # type: ignore[no-untyped-def]
        self.streams += 1
        answered = 0
        async for item in request_iterator:
            self.streamed += 1
            kind = item.WhichOneof("request")
            if kind == "end_txn":
                answer = self.answer(item.end_txn)
            elif kind == "add_offsets_to_txn":
                answer = x.AddOffsetsToTxnResponse()
            else:
                answer = x.TxnOffsetCommitResponse()
            yield x.TransactionStreamResponse(correlation_id=item.correlation_id, **{kind: answer})
            answered += 1
            if answered == self.answers_per_stream:
                return


class _OneAnswerStreams(_Streams):
    """A coordinator that ends every stream after one answer (as a restart would)."""

    answers_per_stream = 1


class _Lookup(cg.CoordinatorLookupServiceServicer):
    def __init__(self) -> None:
        self.endpoint = ""

    async def FindCoordinator(self, request, context):  # type: ignore[no-untyped-def]
        return c.FindCoordinatorResponse(
            coordinators=[c.CoordinatorLocation(key=request.keys[0], endpoint=self.endpoint)]
        )


def run_calls(servicer: _UnaryOnly, ends: int) -> tuple[list[tuple[int, int]], set[str]]:
    """Offsets sent (AddOffsetsToTxn, then TxnOffsetCommit), then `ends` EndTxn calls (each at
    the epoch the last answered), through a TransactionClient: the identities answered and the
    client's unary-only endpoints."""

    async def run() -> tuple[list[tuple[int, int]], set[str]]:
        server = grpc.aio.server()
        lookup = _Lookup()
        xg.add_TransactionCoordinatorServiceServicer_to_server(servicer, server)
        cg.add_CoordinatorLookupServiceServicer_to_server(lookup, server)
        port = server.add_insecure_port("127.0.0.1:0")
        lookup.endpoint = f"127.0.0.1:{port}"
        await server.start()
        channels = AioChannels()
        client = TransactionClient(channels, lambda: [lookup.endpoint], "t", 60_000)
        deadline = asyncio.get_running_loop().time() + 10
        identity = (7, 0)
        identities = []
        try:
            await client.add_offsets(identity, {}, "g", "", -1, deadline)
            for _ in range(ends):
                identity = await client.end(identity, True, deadline)
                identities.append(identity)
                await asyncio.sleep(0.05)  # a stream's end reaches the client
        finally:
            await client.close()
            await channels.close()
            await server.stop(None)
        return identities, client.unary_only

    return asyncio.run(run())


def test_calls_travel_on_one_stream() -> None:
    servicer = _Streams()
    identities, unary_only = run_calls(servicer, 3)
    assert identities == [(7, 1), (7, 2), (7, 3)]
    assert (servicer.streams, servicer.streamed, servicer.unary) == (1, 5, 0)
    assert unary_only == set()


def test_a_new_stream_is_opened_when_the_coordinator_ended_the_last_one() -> None:
    servicer = _OneAnswerStreams()
    identities, unary_only = run_calls(servicer, 3)
    assert identities == [(7, 1), (7, 2), (7, 3)]  # no call failed, none went unary
    assert (servicer.streams, servicer.streamed, servicer.unary) == (5, 5, 0)
    assert unary_only == set()


def test_calls_fall_back_to_unary_on_a_coordinator_without_the_stream() -> None:
    servicer = _UnaryOnly()
    identities, unary_only = run_calls(servicer, 3)
    assert identities == [(7, 1), (7, 2), (7, 3)]
    assert servicer.unary == 5
    assert len(unary_only) == 1  # asked once; unary from then on


def test_calls_are_unary_while_the_application_traces() -> None:
    servicer = _Streams()
    with mock.patch.object(transaction_client, "tracing_configured", return_value=True):
        identities, _ = run_calls(servicer, 2)
    assert identities == [(7, 1), (7, 2)]
    assert (servicer.streams, servicer.unary) == (0, 4)


class _TopicNotYetKnown(_UnaryOnly):
    """A group coordinator whose metadata has not caught up with a new topic yet: its first two
    TxnOffsetCommit answers name the partition UNKNOWN_TOPIC_OR_PARTITION."""

    unknown_answers = 2

    async def TxnOffsetCommit(self, request, context):  # type: ignore[no-untyped-def]
        self.unary += 1
        if self.unknown_answers:
            self.unknown_answers -= 1
            return x.TxnOffsetCommitResponse(
                results=[
                    x.TxnPartitionResult(
                        topic="new",
                        partition=0,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message="not in this coordinator's metadata yet",
                    )
                ]
            )
        return x.TxnOffsetCommitResponse()


def test_txn_offset_commit_retries_a_topic_its_coordinator_does_not_know_yet() -> None:
    servicer = _TopicNotYetKnown()
    identities, _ = run_calls(servicer, 1)  # raised KafkaError before the retry
    assert identities == [(7, 1)]
    assert servicer.unknown_answers == 0
    assert servicer.unary == 5  # AddOffsetsToTxn, TxnOffsetCommit three times, EndTxn


class _CountsOffsets(_UnaryOnly):
    """A coordinator that refuses a TxnOffsetCommit of more offsets than one may carry, as the
    real one does, and records those it takes."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []
        self.offsets: dict[tuple[str, int], int] = {}

    async def TxnOffsetCommit(self, request, context):  # type: ignore[no-untyped-def]
        self.unary += 1
        size = sum(len(topic.partitions) for topic in request.topics)
        if size > limits.admin_request_items_max:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{size} offsets")
        self.sizes.append(size)
        for topic in request.topics:
            for partition in topic.partitions:
                self.offsets[topic.name, partition.partition] = partition.committed_offset
        return x.TxnOffsetCommitResponse()


def add_offsets_at(servicer: _UnaryOnly, offsets: dict) -> None:
    """One TransactionClient.add_offsets of `offsets` against `servicer`."""

    async def run() -> None:
        server = grpc.aio.server()
        lookup = _Lookup()
        xg.add_TransactionCoordinatorServiceServicer_to_server(servicer, server)
        cg.add_CoordinatorLookupServiceServicer_to_server(lookup, server)
        lookup.endpoint = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
        await server.start()
        channels = AioChannels()
        client = TransactionClient(channels, lambda: [lookup.endpoint], "t", 60_000)
        try:
            deadline = asyncio.get_running_loop().time() + 10
            await client.add_offsets((7, 0), offsets, "g", "", -1, deadline)
        finally:
            await client.close()
            await channels.close()
            await server.stop(None)

    asyncio.run(run())


def test_offsets_over_one_requests_limit_go_in_several_txn_offset_commits() -> None:
    """A transaction that consumed more partitions than one TxnOffsetCommit may name commits
    their offsets in several, every offset once (Kafka's sendOffsetsToTransaction has no cap)."""
    servicer = _CountsOffsets()
    wanted = {(f"in-{n % 7}", n): n * 10 for n in range(2 * limits.admin_request_items_max + 5)}

    add_offsets_at(servicer, wanted)
    assert servicer.sizes == [limits.admin_request_items_max] * 2 + [5]
    assert servicer.offsets == wanted


class _IntLike:
    """An integer that is no int (numpy's int64 is one)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __int__(self) -> int:
        return self.value


def test_txn_offset_commits_name_the_epoch_given_and_minus_one_for_a_bare_offset() -> None:
    """A bare offset goes with committed_leader_epoch -1, set on the wire: left unset, proto3
    read it as epoch 0, and a member resuming there was sent back to where epoch 0 ended."""
    sent: list[x.TxnOffsetCommitPartition] = []

    class Keeps(_UnaryOnly):
        async def TxnOffsetCommit(self, request, context):  # type: ignore[no-untyped-def]
            sent.extend(p for topic in request.topics for p in topic.partitions)
            return x.TxnOffsetCommitResponse()

    offsets = {("in", 0): 5, ("in", 1): OffsetAndMetadata(9, 4, "m"), ("in", 2): _IntLike(7)}
    add_offsets_at(Keeps(), offsets)
    assert all(p.HasField("committed_leader_epoch") for p in sent)
    assert [(p.committed_offset, p.committed_leader_epoch, p.metadata) for p in sent] == [
        (5, -1, ""),
        (9, 4, "m"),
        (7, -1, ""),
    ]
