"""The transactional producer's calls to the coordinators (transactions.proto), on the driver's
loop: find the coordinator of the transactional id (or of the group, for TxnOffsetCommit), send,
and retry what is retriable until the caller's deadline.

EndTxn, AddOffsetsToTxn and TxnOffsetCommit go over one TransactionStream per coordinator
(common/request_stream.py), opened on first use and again after it broke: commit_transaction()
waits on an EndTxn round trip, and a message on an open stream costs about half of a new unary call
(DESIGN §12). A coordinator that answers UNIMPLEMENTED (one from before the stream, in a rolling
upgrade) gets unary calls from then on, until one of those fails. A stream the coordinator ended at
its SASL ticket's expiry is no refusal (refusals.py): its call is retried on a new one; an idle
stream is reopened before that once its ticket is due for renewal. When the application traces (it
set a tracer provider), every call is unary, so that each is a span of its trace as before: a
stream would be one span for the connection. InitTransactions is always unary (once per producer).

Retried: the coordinator moved or is loading (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE: found again), an earlier request of the id is still being written
(CONCURRENT_TRANSACTIONS, at a constant short backoff), and unreachable coordinators. Anything
else is the answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import grpc

from samsa.client.channels import AioChannels, tracing_configured
from samsa.client.errors import KafkaError
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.offset_commit_parts import commit_parts_of
from samsa.client.refusals import authorization_error
from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.common.request_stream import RequestStream, StreamBrokenError
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import coordinator_pb2_grpc as cg
from samsa.v1 import transactions_pb2 as x
from samsa.v1 import transactions_pb2_grpc as xg

TopicPartition = tuple[str, int]
Identity = tuple[int, int]  # (producer id, producer epoch)

RETRIED = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
    }
)
# TxnOffsetCommit also retries a partition its group coordinator does not know yet: a topic just
# created reaches that coordinator's metadata a moment later (Kafka's TxnOffsetCommitHandler).
# Like CONCURRENT_TRANSACTIONS, it keeps the coordinator it found.
KEEP_COORDINATOR = frozenset(
    {ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
)
RETRIED_TXN_OFFSET_COMMIT = RETRIED | {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
TXN = c.COORDINATOR_KEY_TYPE_TRANSACTION
CALL_TIMEOUT_S = 10.0
BACKOFF_S = 0.02
BACKOFF_MAX_S = 0.5
# The calls TransactionStream carries, and the field of its messages each request goes in.
STREAMED = frozenset({"EndTxn", "AddOffsetsToTxn", "TxnOffsetCommit"})
_FIELD_OF_REQUEST = {
    x.EndTxnRequest: "end_txn",
    x.AddOffsetsToTxnRequest: "add_offsets_to_txn",
    x.TxnOffsetCommitRequest: "txn_offset_commit",
}
# A refusal of the request itself: sending it again would be refused again.
REFUSED = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED)


class CallFailed(Exception):
    """A call (or stream message) that got no answer: the status it ended with, if any."""

    def __init__(
        self, code: grpc.StatusCode | None, details: str, rpc_error: grpc.RpcError | None = None
    ) -> None:
        super().__init__(details)
        self.code = code
        self.details = details
        # An ACL refusal: raised at once, never retried (every coordinator refuses it the same).
        self.refused = None if rpc_error is None else authorization_error(rpc_error)


class TransactionStream(RequestStream[Any, Any]):
    """One TransactionStream to one coordinator: each request in the field of its kind, its
    answer read from the field the coordinator set (None if it set none)."""

    def __init__(self, stub: xg.TransactionCoordinatorServiceStub, generation: int = 0) -> None:
        self.generation = generation  # the SASL login's, as it opened (channels.py)
        super().__init__(
            stub.TransactionStream,
            limits.produce_stream_in_flight_max,
            x.TransactionStreamRequest,
        )

    def retire(self) -> bool:
        """End the stream if no request waits on it (for one with a fresh SASL ticket); False,
        nothing done, while one does."""
        if self._pending or self.broken:
            return False
        self._break("reopened with a new SASL ticket")
        return True

    def _message(self, correlation_id: int, request: Any) -> x.TransactionStreamRequest:
        field = _FIELD_OF_REQUEST[type(request)]
        return x.TransactionStreamRequest(correlation_id=correlation_id, **{field: request})

    def _answer(self, item: x.TransactionStreamResponse) -> Any:
        kind = item.WhichOneof("response")
        return None if kind is None else getattr(item, kind)


class TransactionClient:
    def __init__(
        self,
        channels: AioChannels,
        bootstrap: Callable[[], list[str]],
        transactional_id: str,
        transaction_timeout_ms: int,
    ) -> None:
        self._channels = channels
        self._bootstrap = bootstrap  # endpoints that answer FindCoordinator
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._found: dict[tuple[int, str], str] = {}
        self._next = 0
        self._streamed = not tracing_configured()
        self._streams: dict[str, TransactionStream] = {}
        self.unary_only: set[str] = set()  # coordinators that answered UNIMPLEMENTED to the stream

    async def close(self) -> None:
        """Close the streams (before the channels close)."""
        streams = list(self._streams.values())
        self._streams.clear()
        for stream in streams:
            await stream.close()

    def producer(self, identity: Identity) -> x.TransactionalProducer:
        return x.TransactionalProducer(
            transactional_id=self.transactional_id,
            producer_id=identity[0],
            producer_epoch=identity[1],
        )

    async def init(self, deadline: float) -> Identity:
        request = x.InitTransactionsRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.transaction_timeout_ms,
        )
        answer = await self._call(TXN, "InitTransactions", request, deadline)
        return answer.producer_id, answer.producer_epoch

    async def add_offsets(
        self,
        identity: Identity,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        group_id: str,
        member_id: str,
        member_epoch: int,
        deadline: float,
    ) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit at the group's coordinator (KIP-447). A bare
        offset is committed with no leader epoch (-1), as Kafka's OffsetAndMetadata(offset) is."""
        producer = self.producer(identity)
        request = x.AddOffsetsToTxnRequest(producer=producer, group_id=group_id)
        await self._call(TXN, "AddOffsetsToTxn", request, deadline)
        # A coordinator takes at most admin_request_items_max offsets per TxnOffsetCommit, and
        # their records must fit one batch of __consumer_offsets (offset_commit_parts.py): more
        # go in several, all pending in this transaction until its marker (Kafka's has no cap).
        ordered = dict(sorted(offsets.items()))
        parts = commit_parts_of(group_id, ordered, limits.admin_request_items_max)
        for part in parts or [[]]:  # none: one empty, as before
            commit = x.TxnOffsetCommitRequest(
                producer=producer, group_id=group_id, member_id=member_id, member_epoch=member_epoch
            )
            by_topic: dict[str, x.TxnOffsetCommitTopic] = {}
            for topic, partition in part:
                if topic not in by_topic:
                    by_topic[topic] = commit.topics.add(name=topic)
                at = OffsetAndMetadata.of(ordered[topic, partition])
                by_topic[topic].partitions.add(
                    partition=partition,
                    committed_offset=at.offset,
                    committed_leader_epoch=at.leader_epoch,
                    metadata=at.metadata,
                )
            await self._call(
                c.COORDINATOR_KEY_TYPE_GROUP,
                "TxnOffsetCommit",
                commit,
                deadline,
                key=group_id,
                code_of=_first_result_code,
                retried=RETRIED_TXN_OFFSET_COMMIT,
            )

    async def end(self, identity: Identity, committed: bool, deadline: float) -> Identity:
        """EndTxn: the identity for the next transaction (its epoch bumped, KIP-890)."""
        request = x.EndTxnRequest(producer=self.producer(identity), committed=committed)
        answer = await self._call(TXN, "EndTxn", request, deadline)
        return answer.producer_id, answer.producer_epoch

    # --- plumbing -----------------------------------------------------------------------------

    async def _call(
        self,
        key_type: int,
        method: str,
        request: Any,
        deadline: float,
        *,
        key: str | None = None,
        code_of: Callable[[Any], tuple[int, str]] | None = None,
        retried: frozenset[ErrorCode] = RETRIED,
    ) -> Any:
        key = self.transactional_id if key is None else key
        code_of = code_of or _top_code
        loop = asyncio.get_running_loop()
        backoff = BACKOFF_S
        problem = (ErrorCode.COORDINATOR_NOT_AVAILABLE, "no coordinator was found")
        while True:
            endpoint = await self._coordinator(key_type, key, deadline)
            if endpoint is not None:
                timeout = max(0.05, min(CALL_TIMEOUT_S, deadline - loop.time()))
                try:
                    answer = await self._send(endpoint, method, request, timeout)
                except CallFailed as failed:
                    if failed.code in REFUSED:
                        raise KafkaError(failed.details, ErrorCode.INVALID_REQUEST) from None
                    if failed.refused is not None:
                        raise failed.refused from None
                    self._found.pop((key_type, key), None)
                    problem = (
                        ErrorCode.NETWORK_EXCEPTION,
                        f"{endpoint} did not answer ({failed.details})",
                    )
                else:
                    code, message = code_of(answer)
                    if code == ErrorCode.NONE:
                        return answer
                    if code not in retried:
                        raise KafkaError.of(code, f"{method}: {message}")
                    if code not in KEEP_COORDINATOR:
                        self._found.pop((key_type, key), None)
                    problem = (ErrorCode(code), message)
            if loop.time() + backoff >= deadline:
                raise KafkaError(
                    f"{method} for {key!r} did not complete in time: {problem[1]}", problem[0]
                )
            await asyncio.sleep(backoff)
            # The previous transaction's markers take a few ms: CONCURRENT_TRANSACTIONS is asked
            # again at the short backoff (Kafka's 20 ms for AddPartitionsToTxn), not a growing
            # one that would stall the next transaction behind every commit.
            if problem[0] != ErrorCode.CONCURRENT_TRANSACTIONS:
                backoff = min(backoff * 2, BACKOFF_MAX_S)

    async def _send(self, endpoint: str, method: str, request: Any, timeout_s: float) -> Any:
        """`endpoint`'s answer to `request`, on its stream or as a unary call (see the module
        docstring); CallFailed when none came."""
        if self._streamed and method in STREAMED and endpoint not in self.unary_only:
            try:
                answer = await self._stream_to(endpoint).send(request, timeout_s)
            except StreamBrokenError as error:
                if error.code != grpc.StatusCode.UNIMPLEMENTED:
                    raise CallFailed(error.code, str(error), error.rpc_error) from None
                # Refused as the stream opened, before any request was read: send it unary.
                self.unary_only.add(endpoint)
            else:
                if answer is None:
                    raise CallFailed(None, f"the answer to {method} carried no response")
                return answer
        stub = xg.TransactionCoordinatorServiceStub(self._channels.get(endpoint))
        try:
            return await getattr(stub, method)(request, timeout=timeout_s)
        except grpc.RpcError as error:
            self.unary_only.discard(endpoint)  # it may come back upgraded: try the stream again
            if isinstance(error, grpc.aio.AioRpcError):  # not a grpc.Call: its status is here
                raise CallFailed(error.code(), error.details() or "", error) from None
            raise CallFailed(None, str(error)) from None

    def _stream_to(self, endpoint: str) -> TransactionStream:
        """The coordinator's stream; a new one if it broke, or if it is idle and its SASL
        ticket is due for renewal (the broker would end it at expiry, KIP-368)."""
        stream = self._streams.get(endpoint)
        channels = self._channels
        if stream is not None and channels.stream_stale(stream.generation):
            stream.retire()
        if stream is None or stream.broken:
            stub = xg.TransactionCoordinatorServiceStub(channels.get(endpoint))
            stream = TransactionStream(stub, channels.stream_generation())
            self._streams[endpoint] = stream
        return stream

    async def _coordinator(self, key_type: int, key: str, deadline: float) -> str | None:
        found = self._found.get((key_type, key))
        if found is not None:
            return found
        endpoints = self._bootstrap()
        if not endpoints:
            return None
        endpoint = endpoints[self._next % len(endpoints)]
        self._next += 1
        stub = cg.CoordinatorLookupServiceStub(self._channels.get(endpoint))
        timeout = max(0.05, min(CALL_TIMEOUT_S, deadline - asyncio.get_running_loop().time()))
        try:
            answer = await stub.FindCoordinator(
                c.FindCoordinatorRequest(key_type=key_type, keys=[key]), timeout=timeout
            )
        except grpc.RpcError as error:
            if refused := authorization_error(error):  # every server refuses it the same
                raise refused from None
            return None
        location = answer.coordinators[0]
        if location.error_code:
            if location.error_code not in RETRIED:
                raise KafkaError.of(location.error_code, location.error_message)
            return None
        self._found[(key_type, key)] = location.endpoint
        return location.endpoint


def _top_code(answer: Any) -> tuple[int, str]:
    return answer.error_code, answer.error_message


def _first_result_code(answer: x.TxnOffsetCommitResponse) -> tuple[int, str]:
    for result in answer.results:
        if result.error_code:
            return result.error_code, f"{result.topic}-{result.partition}: {result.error_message}"
    return ErrorCode.NONE, ""
