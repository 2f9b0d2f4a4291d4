"""Asks a transactional id's coordinator whether partitions are in its producer's open
transaction (AddPartitionsToTxn with verify_only, KIP-890 part 1), or to add them to it on the
producer's behalf (without verify_only: KIP-890 part 2, for a producer that asked the broker to).

Two callers, one question. A broker asks before it appends a transactional produce to a
partition the producer has no transaction open on (services/broker/requests/txn_verification.py);
a group coordinator asks before it writes TxnOffsetCommit's offsets, whose partition of
`__consumer_offsets` the producer must have added with AddOffsetsToTxn. Either way, a
transactional write that no coordinator knows about would open a transaction that no marker
ever ends: a hanging transaction.

The coordinator is found from the caller's metadata image and asked over one long-lived
AddPartitionsToTxnStream per coordinator (common/request_stream.py: a stream message costs about
half of a new unary call, and the produce waits on the answer); CONCURRENT_TRANSACTIONS and the
coordinator errors (a broken stream among them) are asked again, with a backoff, within
`VERIFY_TIMEOUT_S` (CONCURRENT_TRANSACTIONS: the id has a write in flight, or its decided
transaction's markers are being written). Each partition ends confirmed (None) or refused with
the error the caller answers: INVALID_TXN_STATE (not in the transaction), PRODUCER_FENCED or
INVALID_PRODUCER_ID_MAPPING (the producer is not the id's current one), or a retriable one (no
coordinator now, or still CONCURRENT_TRANSACTIONS at the deadline). The channels follow TLS
rotations (service_channels.ChannelCache): after one, the next check opens its stream on a
channel dialled with the new files.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.common.request_stream import RequestStream, StreamBrokenError
from samsa.metadata.coordinators import TRANSACTION_KEY_TYPE, find_coordinator
from samsa.metadata.image import MetadataImage
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.membership import method_path
from samsa.services.runtime.service_channels import ChannelCache
from samsa.v1 import coordinator_pb2, transactions_pb2, transactions_pb2_grpc

STREAM_METHOD = method_path(
    transactions_pb2.DESCRIPTOR.services_by_name["TransactionCoordinatorService"].full_name,
    "AddPartitionsToTxnStream",
)

TopicPartition = tuple[str, int]
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


class AddPartitionsStream(
    RequestStream[
        transactions_pb2.AddPartitionsToTxnRequest, transactions_pb2.AddPartitionsToTxnResponse
    ]
):
    """One AddPartitionsToTxnStream to one coordinator; create and use it on one event loop."""

    def __init__(
        self,
        stub: transactions_pb2_grpc.TransactionCoordinatorServiceStub,
        proof: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(
            lambda requests: stub.AddPartitionsToTxnStream(requests, metadata=proof or None),
            limits.produce_stream_in_flight_max,
            transactions_pb2.AddPartitionsToTxnStreamRequest,
        )


class TransactionMembershipCheck:
    """Asks the coordinators (see the module docstring); one stream per coordinator endpoint."""

    def __init__(
        self, image: Callable[[], MetadataImage], signer: MemberSigner | None = None
    ) -> None:
        self.image = image
        # Signs each stream as this member, so that with ACLs on the coordinator lets the check
        # through without an ACL for this broker's own principal (authorization.py).
        self.signer = signer
        # No interceptor: a connection stream (common/quiet_rpcs.py). A rotation drops the
        # streams: the old ones finish what they carry, closed with their channel.
        self._channels = ChannelCache(traced=False, on_redial=self._drop_streams)
        self._streams: dict[str, AddPartitionsStream] = {}

    def _drop_streams(self) -> None:
        self._streams.clear()

    async def close(self) -> None:
        await asyncio.gather(*(stream.close() for stream in self._streams.values()))
        await self._channels.close()

    async def ask(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        add: bool = False,
    ) -> dict[TopicPartition, Refusal | None]:
        """Per partition: None when it is in the transaction (after adding it, with `add`),
        else the refusal. A coordinator takes at most admin_request_items_max partitions a
        request (it refuses more whole, ending the stream), so more go in several requests,
        one after the other (adds to one id would only meet each other's write in flight),
        all within one VERIFY_TIMEOUT_S."""
        asked = list(partitions)
        deadline = asyncio.get_running_loop().time() + VERIFY_TIMEOUT_S
        step = limits.admin_request_items_max
        verdicts: dict[TopicPartition, Refusal | None] = {}
        for start in range(0, len(asked), step):
            chunk = asked[start : start + step]
            producer = transactions_pb2.TransactionalProducer(
                transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch
            )
            verdicts |= await self._ask_until(producer, chunk, not add, deadline)
        return verdicts

    async def _ask_until(
        self,
        producer: transactions_pb2.TransactionalProducer,
        asked: list[TopicPartition],
        verify_only: bool,
        deadline: float,
    ) -> dict[TopicPartition, Refusal | None]:
        """One request's verdicts, asked again while retriable and `deadline` allows."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in asked:
            by_topic.setdefault(topic, []).append(partition)
        request = transactions_pb2.AddPartitionsToTxnRequest(
            producer=producer,
            partitions=[
                coordinator_pb2.TopicPartitions(topic=topic, partitions=numbers)
                for topic, numbers in by_topic.items()
            ],
            verify_only=verify_only,
        )
        loop = asyncio.get_running_loop()
        backoff = RETRY_BACKOFF_S
        while True:
            verdicts = await self._ask_once(producer.transactional_id, request, asked, deadline)
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
        image = self.image()
        lookup = find_coordinator(image, TRANSACTION_KEY_TYPE, transactional_id)
        if lookup.error_code:
            message = f"no transaction coordinator: {lookup.error_message}"
            return dict.fromkeys(asked, (ErrorCode(lookup.error_code), message))
        # Its internal listener when it has one (runtime/listeners.py).
        endpoint = image.coordinators[lookup.coordinator_id].member_endpoint
        timeout = max(0.05, deadline - asyncio.get_running_loop().time())
        try:
            answer = await self._stream(endpoint).send(request, timeout)
        except StreamBrokenError as error:
            message = f"the transaction coordinator at {endpoint}: {error}"
            return dict.fromkeys(asked, (ErrorCode.COORDINATOR_NOT_AVAILABLE, message))
        return verdicts_of(asked, answer)

    def _stream(self, endpoint: str) -> AddPartitionsStream:
        """The open stream to `endpoint`'s coordinator, or a new one."""
        channel = self._channels.get(endpoint)  # first: after a rotation, no old stream is kept
        stream = self._streams.get(endpoint)
        if stream is None or stream.broken:
            stub = transactions_pb2_grpc.TransactionCoordinatorServiceStub(channel)
            proof = () if self.signer is None else self.signer.metadata(STREAM_METHOD)
            stream = self._streams[endpoint] = AddPartitionsStream(stub, proof)
        return stream
