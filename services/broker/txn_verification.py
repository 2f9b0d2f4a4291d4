"""KIP-890 part 1 on the broker: a transactional produce is written only to partitions the
transaction coordinator added to the producer's transaction.

Theory of operation. A Produce with a `transactional_id` whose batches are transactional
(attribute bit 4) would open a transaction on each partition it writes. If the coordinator never
heard of that partition, no marker would ever end that transaction, and every read_committed
reader would wait at its first offset for ever (a *hanging transaction*). So before appending:

1. `transactional_partitions` reads each partition's first batch header (no record is decoded):
   the producer id and epoch it carries, for the partitions whose batches are transactional;
2. a partition where that producer already has a transaction open at that epoch passes at once:
   the coordinator added it when that transaction's first batch was checked, and its marker will
   end it (a late batch of an ended transaction carries an older epoch: the epoch is bumped at
   every end, so the log refuses it);
3. the others are checked with one AddPartitionsToTxn(verify_only) at the transactional id's
   coordinator (found from this broker's metadata image), retried while it answers
   CONCURRENT_TRANSACTIONS or is loading, within `VERIFY_TIMEOUT_S`.

Each partition ends verified (appended with `allow_transactional`) or refused with an error the
producer acts on: INVALID_TXN_STATE (not in the transaction: a bug in the producer, which aborts)
or a retriable one (no coordinator now: retry). Non-transactional produce never gets here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import grpc

from samsa.common.errors import CorruptRecordError, ErrorCode
from samsa.common.record.header import TRANSACTIONAL, read_header
from samsa.metadata.coordinators import TRANSACTION_KEY_TYPE, find_coordinator
from samsa.metadata.image import MetadataImage
from samsa.services.broker.partition_host import LeadershipError, PartitionHost
from samsa.v1 import broker_pb2, coordinator_pb2, transactions_pb2, transactions_pb2_grpc

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Identity = tuple[int, int]  # (producer id, producer epoch)
Refusal = tuple[ErrorCode, str]

VERIFY_TIMEOUT_S = 5.0
RETRY_BACKOFF_S = 0.02
RETRY_BACKOFF_MAX_S = 0.5
RETRY_WHILE = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    }
)


def transactional_partitions(request: broker_pb2.ProduceRequest) -> dict[TopicPartition, Identity]:
    """The partitions whose (first) batch is transactional, with the identity it carries. A
    partition whose bytes cannot be read is left to the log's validation, which refuses it."""
    found: dict[TopicPartition, Identity] = {}
    for topic in request.topics:
        for data in topic.partitions:
            if not data.records:
                continue
            try:
                header = read_header(data.records, 0)
            except CorruptRecordError:
                continue
            if header.attributes & TRANSACTIONAL:
                found[(topic.name, data.partition)] = (header.producer_id, header.producer_epoch)
    return found


def verdicts_of(
    asked: list[TopicPartition], answer: transactions_pb2.AddPartitionsToTxnResponse
) -> dict[TopicPartition, Refusal | None]:
    """Per asked partition: None when the coordinator confirmed it, else the refusal."""
    if answer.error_code:
        code = ErrorCode(answer.error_code)
        return dict.fromkeys(asked, (code, f"the transaction coordinator: {answer.error_message}"))
    verdicts: dict[TopicPartition, Refusal | None] = {}
    for result in answer.results:
        key = (result.topic, result.partition)
        if result.error_code:
            message = f"the transaction coordinator: {result.error_message}"
            verdicts[key] = (ErrorCode(result.error_code), message)
        else:
            verdicts[key] = None
    for key in asked:
        verdicts.setdefault(
            key, (ErrorCode.INVALID_TXN_STATE, "the transaction coordinator did not confirm it")
        )
    return verdicts


class TransactionVerifier:
    """Checks transactional produce with the coordinators (see the module docstring)."""

    def __init__(self, image: Callable[[], MetadataImage]) -> None:
        self.image = image
        self._channels: dict[str, grpc.aio.Channel] = {}

    async def close(self) -> None:
        await asyncio.gather(*(channel.close() for channel in self._channels.values()))

    async def verify(
        self, host: PartitionHost, request: broker_pb2.ProduceRequest
    ) -> tuple[set[TopicPartition], dict[TopicPartition, Refusal]]:
        """(partitions that may take transactional batches, partitions refused and why)."""
        wanted = transactional_partitions(request)
        verified: set[TopicPartition] = set()
        ask: dict[TopicPartition, Identity] = {}
        for key, (producer_id, epoch) in wanted.items():
            hosted = host.leader(*key)
            if isinstance(hosted, LeadershipError):
                continue  # produce() answers the leadership error
            if hosted.log.has_open_transaction(producer_id, epoch):
                verified.add(key)
            else:
                ask[key] = (producer_id, epoch)
        if not ask:
            return verified, {}
        if len(set(ask.values())) > 1:
            message = "one Produce carries the batches of one transactional producer"
            return verified, dict.fromkeys(ask, (ErrorCode.INVALID_REQUEST, message))
        if not request.transactional_id:
            message = "transactional batches need the request's transactional_id"
            return verified, dict.fromkeys(ask, (ErrorCode.INVALID_TXN_STATE, message))
        ((producer_id, epoch),) = set(ask.values())
        verdicts = await self._ask(request.transactional_id, producer_id, epoch, list(ask))
        refused = {key: verdict for key, verdict in verdicts.items() if verdict is not None}
        verified |= {key for key, verdict in verdicts.items() if verdict is None}
        return verified, refused

    async def _ask(
        self, transactional_id: str, producer_id: int, epoch: int, asked: list[TopicPartition]
    ) -> dict[TopicPartition, Refusal | None]:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in asked:
            by_topic.setdefault(topic, []).append(partition)
        request = transactions_pb2.AddPartitionsToTxnRequest(
            producer=transactions_pb2.TransactionalProducer(
                transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch
            ),
            partitions=[
                coordinator_pb2.TopicPartitions(topic=topic, partitions=numbers)
                for topic, numbers in by_topic.items()
            ],
            verify_only=True,
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + VERIFY_TIMEOUT_S
        backoff = RETRY_BACKOFF_S
        while True:
            verdicts = await self._ask_once(transactional_id, request, asked, deadline)
            codes = {v[0] for v in verdicts.values() if v is not None}
            if not codes & RETRY_WHILE or loop.time() + backoff >= deadline:
                return verdicts
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)

    async def _ask_once(
        self,
        transactional_id: str,
        request: transactions_pb2.AddPartitionsToTxnRequest,
        asked: list[TopicPartition],
        deadline: float,
    ) -> dict[TopicPartition, Refusal | None]:
        lookup = find_coordinator(self.image(), TRANSACTION_KEY_TYPE, transactional_id)
        if lookup.error_code:
            message = f"no transaction coordinator: {lookup.error_message}"
            return dict.fromkeys(asked, (ErrorCode(lookup.error_code), message))
        stub = transactions_pb2_grpc.TransactionCoordinatorServiceStub(
            self._channel(lookup.endpoint)
        )
        timeout = max(0.05, deadline - asyncio.get_running_loop().time())
        try:
            answer = await stub.AddPartitionsToTxn(request, timeout=timeout)
        except grpc.aio.AioRpcError as error:
            message = f"the transaction coordinator at {lookup.endpoint}: {error.details()}"
            return dict.fromkeys(asked, (ErrorCode.COORDINATOR_NOT_AVAILABLE, message))
        return verdicts_of(asked, answer)

    def _channel(self, endpoint: str) -> grpc.aio.Channel:
        channel = self._channels.get(endpoint)
        if channel is None:
            channel = self._channels[endpoint] = grpc.aio.insecure_channel(endpoint)
        return channel
