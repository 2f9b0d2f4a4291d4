"""TransactionCoordinatorService: the gRPC adapter between producers (and brokers verifying
their produce) and the owned partitions of `__transaction_state`.

Theory of operation. Each request names a transactional id; it lives in partition
hash(id) mod N of `__transaction_state` (`Coordinator.transaction_partition_for`), which this
process must own and have loaded, otherwise the answer is NOT_COORDINATOR (find the coordinator
again) or COORDINATOR_LOAD_IN_PROGRESS (retry shortly). The handler asks the partition's shard
for a step and `TransactionPartition.run` carries it out: the answer goes out once its record is
durable. Partitions a producer adds must exist (UNKNOWN_TOPIC_OR_PARTITION otherwise) and must
not be internal: offsets join a transaction through AddOffsetsToTxn. A verify_only
AddPartitionsToTxn (a broker checking a transactional produce, KIP-890) changes nothing and is
answered from durable state. Brokers send theirs (checks, and adds on a producer's behalf) over
one AddPartitionsToTxnStream each, every request a task of its own, answered by correlation id
(services/runtime/stream_answers.py). Producers may send EndTxn, AddOffsetsToTxn and
TxnOffsetCommit over one TransactionStream each (transaction_stream.py), answered by the same
code as the unary calls. AddPartitionsToTxn and AddOffsetsToTxn that meet their id busy
(phase 2 of the transaction just ended, most often) wait for it up to SETTLE_WAIT_S before
answering CONCURRENT_TRANSACTIONS (`TransactionPartition.run_when_settled`).

TxnOffsetCommit is the one request for the GROUP's coordinator (`Coordinator.partition_for`):
the offsets are checked like an OffsetCommit and written as the producer's transactional batch
(offsets_partition.py, group_txn_offsets.py), once the transaction coordinator confirms that
the group's partition joined the producer's transaction (AddOffsetsToTxn; KIP-890, asked with
verify_only through services/runtime/txn_added_check.py): offsets no marker would resolve are
never written.

AbortTransaction (KIP-664's abort of a hanging transaction) is served by every coordinator,
whatever it owns: it asks the partition's leader for its producers, lets
`hanging_transactions.abort_decision` judge, and writes the ABORT marker itself (signed as this
coordinator, as its own markers are).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import grpc

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.common.request_counts import named_twice, too_many
from samsa.metadata.acls import ResourceType
from samsa.metadata.coordinators import (
    CONSUMER_OFFSETS_TOPIC,
    INTERNAL_TOPICS,
    group_id_problem,
    group_partition,
)
from samsa.services.coordinator import hanging_transactions
from samsa.services.coordinator.coordinator_partition import PartitionUnavailableError
from samsa.services.coordinator.group_offsets import commit_write_error
from samsa.services.coordinator.offsets_partition import TxnWriteRefusedError
from samsa.services.coordinator.transaction_partition import TransactionPartition
from samsa.services.coordinator.transaction_stream import (
    serve_transaction_stream,
    too_many_partitions,
    txn_offsets_refusal,
)
from samsa.services.runtime import caller
from samsa.services.runtime.stream_answers import Refusal, StreamAnswers
from samsa.v1 import transactions_pb2 as x
from samsa.v1 import transactions_pb2_grpc

if TYPE_CHECKING:
    from samsa.services.coordinator.coordinator import Coordinator

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class TransactionCoordinatorServicer(transactions_pb2_grpc.TransactionCoordinatorServiceServicer):
    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator

    async def InitTransactions(self, request, context):
        try:
            partition = self.coordinator.transaction_partition_for(request.transactional_id)
            return await partition.run(await partition.init_transactions(request))
        except PartitionUnavailableError as error:
            return x.InitTransactionsResponse(
                error_code=error.code,  # type: ignore[arg-type]
                error_message=error.message,
                producer_id=-1,
                producer_epoch=-1,
            )

    async def AddPartitionsToTxn(self, request, context):
        if (refusal := too_many_partitions(request)) is not None:
            await context.abort(*refusal)
        return await self._add_partitions(request)

    async def AddPartitionsToTxnStream(self, request_iterator, context):
        # Brokers' checks and adds on one stream: each request runs as a task of its own (an
        # add may wait on phase 2 of the producer's last transaction), answered by id.
        stream: StreamAnswers[x.AddPartitionsToTxnStreamResponse] = StreamAnswers(
            self.coordinator.draining
        )

        async def answer(item: x.AddPartitionsToTxnStreamRequest) -> None:
            response = await self._add_partitions(item.request)
            await stream.put(
                x.AddPartitionsToTxnStreamResponse(
                    correlation_id=item.correlation_id, response=response
                )
            )

        def refusal(item: x.AddPartitionsToTxnStreamRequest) -> Refusal | None:
            return too_many_partitions(item.request)

        reader = stream.answer_each(request_iterator, refusal, answer)
        async for response in stream.serve(reader, context):
            yield response

    async def _add_partitions(
        self, request: x.AddPartitionsToTxnRequest
    ) -> x.AddPartitionsToTxnResponse:
        try:
            partition = self.coordinator.transaction_partition_for(
                request.producer.transactional_id
            )
            if (refused := self._unknown_partitions(request)) is not None:
                return refused
            if request.verify_only:
                return partition.shard.verify_partitions(request)
            return await partition.run_when_settled(
                lambda: partition.shard.add_partitions(request, _now_ms())
            )
        except PartitionUnavailableError as error:
            return x.AddPartitionsToTxnResponse(
                error_code=error.code,  # type: ignore[arg-type]
                error_message=error.message,
            )

    async def AddOffsetsToTxn(self, request, context):
        return await self.add_offsets_to_txn(request)

    async def add_offsets_to_txn(
        self, request: x.AddOffsetsToTxnRequest
    ) -> x.AddOffsetsToTxnResponse:
        """AddOffsetsToTxn's answer (the unary call's and TransactionStream's)."""
        try:
            if (problem := group_id_problem(request.group_id)) is not None:
                raise PartitionUnavailableError(ErrorCode.INVALID_GROUP_ID, problem)
            partition = self.coordinator.transaction_partition_for(
                request.producer.transactional_id
            )
            offsets = self.coordinator.metadata.image.topics.get(CONSUMER_OFFSETS_TOPIC)
            if offsets is None or not offsets.partitions:
                raise PartitionUnavailableError(
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    f"{CONSUMER_OFFSETS_TOPIC} does not exist yet; retry shortly",
                )
            group_at = (
                CONSUMER_OFFSETS_TOPIC,
                group_partition(request.group_id, len(offsets.partitions)),
            )
            return await partition.run_when_settled(
                lambda: partition.shard.add_offsets(request, group_at, _now_ms())
            )
        except PartitionUnavailableError as error:
            return x.AddOffsetsToTxnResponse(
                error_code=error.code,  # type: ignore[arg-type]
                error_message=error.message,
            )

    async def TxnOffsetCommit(self, request, context):
        if (refusal := txn_offsets_refusal(request)) is not None:
            await context.abort(*refusal)
        return await self.txn_offset_commit(request)

    async def txn_offset_commit(
        self, request: x.TxnOffsetCommitRequest
    ) -> x.TxnOffsetCommitResponse:
        """TxnOffsetCommit's answer, once `txn_offsets_refusal` passed it (the unary call's and
        TransactionStream's)."""
        producer = request.producer
        try:
            if producer.producer_id < 0 or producer.producer_epoch < 0:
                raise TxnWriteRefusedError(
                    ErrorCode.INVALID_REQUEST,
                    "producer_id and producer_epoch must be the transactional producer's "
                    "(from InitTransactions or its last EndTxn)",
                )
            partition = self.coordinator.partition_for(request.group_id)
            topics, topic_ids = self.coordinator.topics, self.coordinator.topic_ids
            result = partition.shard.commit_txn_offsets(request, _now_ms(), topics, topic_ids)
            if result.records:
                await self._check_offsets_added(producer, partition.partition)
                # Checked again as the offsets are written, as Kafka validates after its
                # verification: the member may have left or been fenced while the transaction
                # coordinator answered, and a zombie's offsets must not commit (KIP-447).
                result = partition.shard.commit_txn_offsets(
                    request, _now_ms(), self.coordinator.topics, self.coordinator.topic_ids
                )
            if result.records:
                await partition.write_transactional(
                    producer.producer_id, producer.producer_epoch, result.records
                )
        except (PartitionUnavailableError, TxnWriteRefusedError) as error:
            return _offsets_failed(request, *commit_write_error(error.code, error.message))
        return result.response

    async def _check_offsets_added(self, producer: x.TransactionalProducer, number: int) -> None:
        """KIP-890 for offsets: the group's partition of `__consumer_offsets` must be in the
        producer's transaction (AddOffsetsToTxn), or no marker would ever resolve the offsets
        written here; TxnWriteRefusedError with the transaction coordinator's answer if not."""
        where = (CONSUMER_OFFSETS_TOPIC, number)
        verdicts = await self.coordinator.transaction_check.ask(
            producer.transactional_id, producer.producer_id, producer.producer_epoch, [where]
        )
        refusal = verdicts[where]
        if refusal is not None:
            code, message = refusal
            if code == ErrorCode.INVALID_TXN_STATE:  # not for a fenced producer or a retry
                message += " (call AddOffsetsToTxn for the group before TxnOffsetCommit)"
            raise TxnWriteRefusedError(code, message)

    async def EndTxn(self, request, context):
        return await self.end_txn(request)

    async def TransactionStream(self, request_iterator, context):
        async for response in serve_transaction_stream(self, request_iterator, context):
            yield response

    async def end_txn(self, request: x.EndTxnRequest) -> x.EndTxnResponse:
        """EndTxn's answer (the unary call's and TransactionStream's)."""
        try:
            partition = self.coordinator.transaction_partition_for(
                request.producer.transactional_id
            )
            return await partition.run(await partition.end_transaction(request))
        except PartitionUnavailableError as error:
            return x.EndTxnResponse(
                error_code=error.code,  # type: ignore[arg-type]
                error_message=error.message,
                producer_id=-1,
                producer_epoch=-1,
            )

    async def ListTransactions(self, request, context):
        # Each owned partition filters by them: huge ones would hold the event loop meanwhile.
        for count, what in (
            (len(request.state_filters), "state filters"),
            (len(request.producer_id_filters), "producer id filters"),
        ):
            message = too_many(count, what, limits.admin_request_items_max)
            if message is not None:
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)
        response = x.ListTransactionsResponse()
        in_touch = self.coordinator.in_touch()
        now = _now_ms()
        visible = caller.listing_filter(caller.current_caller(), ResourceType.TRANSACTIONAL_ID)
        for partition in self.coordinator.owned_transaction_partitions():
            if not in_touch or not partition.loaded:  # not listed: retry shortly
                response.partitions_loading.append(partition.partition)
                continue
            listed = partition.shard.list_transactions(request, now, visible)
            response.transactions.extend(listed)
        response.transactions.sort(key=lambda listed: listed.transactional_id)
        return response

    async def DescribeTransactions(self, request, context):
        message = too_many(
            len(request.transactional_ids), "transactional ids", limits.admin_request_items_max
        )
        if message is not None:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)
        # Each once: a transaction's description lists its partitions (up to 10,000).
        if (message := named_twice(request.transactional_ids, "transactional id")) is not None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, message)
        response = x.DescribeTransactionsResponse()
        for transactional_id in request.transactional_ids:
            try:
                partition: TransactionPartition = self.coordinator.transaction_partition_for(
                    transactional_id
                )
            except PartitionUnavailableError as error:
                response.transactions.add(
                    transactional_id=transactional_id,
                    error_code=error.code,  # type: ignore[arg-type]
                    error_message=error.message,
                )
                continue
            response.transactions.append(partition.shard.describe_transaction(transactional_id))
        return response

    async def AbortTransaction(self, request, context):
        code, message = await self._abort_hanging(request)
        return x.AbortTransactionResponse(
            error_code=code,  # type: ignore[arg-type]
            error_message=message,
        )

    async def _abort_hanging(self, request: x.AbortTransactionRequest) -> tuple[int, str]:
        """Write the ABORT marker of a hanging transaction if `abort_decision` allows it."""
        where = f"{request.topic}-{request.partition}"
        problem = hanging_transactions.request_problem(
            request.topic, request.partition, request.producer_id, request.producer_epoch
        )
        if problem is not None:
            return ErrorCode.INVALID_REQUEST, problem
        if not self.coordinator.in_touch():
            return (
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "this coordinator is out of touch with the controllers; retry shortly",
            )
        topic = self.coordinator.metadata.image.topics.get(request.topic)
        if topic is None or request.partition not in topic.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{where} does not exist"
        offsets_log = self.coordinator.offsets_log
        described = await offsets_log.describe_producers(request.topic, request.partition)
        if described.error_code != ErrorCode.NONE:
            return (
                described.error_code,
                f"describing {where}'s producers: {described.error_message}",
            )
        decision = hanging_transactions.abort_decision(
            where,
            described.producers,
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
            max_timeout_ms=self.coordinator.transaction_config.max_timeout_ms,
        )
        if isinstance(decision, hanging_transactions.AbortRefused):
            return decision.code, decision.message
        # Not the transaction's coordinator: no ownership epoch to write into the marker.
        results = await offsets_log.write_txn_markers(
            producer_id=decision.producer_id,
            producer_epoch=decision.marker_epoch,
            committed=False,
            coordinator_epoch=-1,
            partitions=[(request.topic, request.partition)],
        )
        code, message = results[(request.topic, request.partition)]
        if code != ErrorCode.NONE:
            return code, f"writing the ABORT marker to {where}: {message}"
        log.warning(
            "hanging transaction aborted",
            extra={
                "partition": where,
                "producer_id": decision.producer_id,
                "producer_epoch": request.producer_epoch,
                "txn_start_offset": decision.txn_start_offset,
            },
        )
        return ErrorCode.NONE, ""

    def _unknown_partitions(
        self, request: x.AddPartitionsToTxnRequest
    ) -> x.AddPartitionsToTxnResponse | None:
        """A refusal naming the partitions that do not exist (or are internal), or None."""
        topics = self.coordinator.metadata.image.topics
        response = x.AddPartitionsToTxnResponse()
        for entry in request.partitions:
            topic = topics.get(entry.topic)
            for number in entry.partitions:
                if entry.topic in INTERNAL_TOPICS and not request.verify_only:
                    message = (
                        f"{entry.topic} is internal: a group's offsets join a transaction "
                        "through AddOffsetsToTxn"
                    )
                    code = ErrorCode.INVALID_REQUEST
                elif topic is None or number not in topic.partitions:
                    message = f"{entry.topic}-{number} does not exist"
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    continue
                response.results.add(
                    topic=entry.topic,
                    partition=number,
                    error_code=code,  # type: ignore[arg-type]
                    error_message=message,
                )
        if not response.results:
            return None
        first = response.results[0]
        response.error_code = first.error_code
        response.error_message = f"{first.error_message}; nothing was added"
        return response


def _offsets_failed(
    request: x.TxnOffsetCommitRequest, code: ErrorCode, message: str
) -> x.TxnOffsetCommitResponse:
    response = x.TxnOffsetCommitResponse()
    for topic in request.topics:
        for entry in topic.partitions:
            response.results.add(
                topic=topic.name,
                partition=entry.partition,
                error_code=code,  # type: ignore[arg-type]
                error_message=message,
            )
    return response
