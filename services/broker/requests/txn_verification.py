"""KIP-890 part 1 on the broker: a transactional produce is written only to partitions the
transaction coordinator added to the producer's transaction.

Theory of operation. A Produce with a `transactional_id` whose batches are transactional
(attribute bit 4) would open a transaction on each partition it writes. If the coordinator never
heard of that partition, no marker would ever end that transaction, and every read_committed
reader would wait at its first offset for ever (a *hanging transaction*). So before appending:

1. `transactional_partitions` reads each partition's batch headers (no record is decoded): the
   producer id and epoch its transactional batches carry. All of them must carry the same one
   (else the partition is refused, INVALID_REQUEST): the verdict below is for that identity,
   and a batch of another producer or epoch riding behind a verified one would open a
   transaction nobody added. That one must be a producer's (id and epoch not negative, else
   INVALID_RECORD): a transactional batch carries what InitTransactions gave;
2. a partition where that producer already has a transaction open at that epoch passes at once:
   the coordinator added it when that transaction's first batch was checked, and its marker will
   end it (a late batch of an ended transaction carries an older epoch: the epoch is bumped at
   every end, so the log refuses it);
3. the others are checked with one AddPartitionsToTxn(verify_only) at the transactional id's
   coordinator (services/runtime/txn_added_check.py: found from this broker's metadata image,
   retried while it answers CONCURRENT_TRANSACTIONS or is loading). When the request says
   `add_partitions_to_txn` (KIP-890 part 2), the same call adds them instead of only checking:
   the producer sent no AddPartitionsToTxn, and its transaction starts with this batch. The
   coordinator refuses an older epoch, so only the open transaction's batches are added.

Each partition ends verified (appended with `allow_transactional`) or refused with an error the
producer acts on: INVALID_TXN_STATE (not in the transaction: a bug in the producer, which aborts),
PRODUCER_FENCED or INVALID_PRODUCER_ID_MAPPING (another instance took the transactional id
over, or it expired: the producer is fenced and closes), or a retriable one (no coordinator now,
or CONCURRENT_TRANSACTIONS past the check's retries: the producer retries the batch).
Non-transactional produce never gets here.
"""

from __future__ import annotations

from collections.abc import Callable

from samsa.common.errors import CorruptRecordError, ErrorCode
from samsa.common.record.header import TRANSACTIONAL, batch_size_at, read_header
from samsa.metadata.image import MetadataImage
from samsa.services.broker.hosted_partition import LeadershipError
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.txn_added_check import (
    Refusal,
    TopicPartition,
    TransactionMembershipCheck,
)
from samsa.v1 import broker_pb2

Identity = tuple[int, int]  # (producer id, producer epoch)
# The identity of a partition whose transactional batches carry more than one (refused). None,
# not a pair: a batch may carry any pair, (-1, -1) too, and must not be called mixed for it.
MIXED = None
MIXED_MESSAGE = (
    "the partition's transactional batches carry more than one producer id and epoch: one "
    "Produce carries the batches of one transactional producer"
)


def transactional_partitions(
    request: broker_pb2.ProduceRequest,
) -> dict[TopicPartition, Identity | None]:
    """The partitions holding a transactional batch, with the identity those carry (MIXED when
    they carry several). Headers are read up to the first unreadable one: the log's validation
    refuses the partition's bytes from there."""
    found: dict[TopicPartition, Identity | None] = {}
    for topic in request.topics:
        for data in topic.partitions:
            records = data.records  # read once: each read of a bytes field copies it
            identities = _transactional_identities(records)
            key = (topic.name, data.partition)
            if key in found:  # named twice (produce_refusal refuses that): one verdict for both
                earlier = found[key]
                if earlier is MIXED:
                    continue
                identities.add(earlier)
            if identities:
                one = len(identities) == 1
                found[key] = next(iter(identities)) if one else MIXED
    return found


def _transactional_identities(records: bytes) -> set[Identity]:
    identities: set[Identity] = set()
    position = 0
    while position < len(records):
        try:
            header = read_header(records, position)
            size = batch_size_at(records, position)
        except CorruptRecordError:
            break
        if size <= 0:
            break
        if header.attributes & TRANSACTIONAL:
            identities.add((header.producer_id, header.producer_epoch))
        position += size
    return identities


def _unidentified_message(identity: Identity) -> str:
    producer_id, epoch = identity
    return (
        f"the partition's transactional batches carry producer id {producer_id} and epoch "
        f"{epoch}: a transactional batch carries the producer id and epoch InitTransactions "
        "gave; fix the producer"
    )


class TransactionVerifier:
    """Checks transactional produce with the coordinators (see the module docstring)."""

    def __init__(
        self, image: Callable[[], MetadataImage], signer: MemberSigner | None = None
    ) -> None:
        self.check = TransactionMembershipCheck(image, signer)

    async def close(self) -> None:
        await self.check.close()

    async def verify(
        self, host: PartitionHost, request: broker_pb2.ProduceRequest
    ) -> tuple[set[TopicPartition], dict[TopicPartition, Refusal]]:
        """(partitions that may take transactional batches, partitions refused and why)."""
        wanted = transactional_partitions(request)
        verified: set[TopicPartition] = set()
        refused: dict[TopicPartition, Refusal] = {}
        ask: dict[TopicPartition, Identity] = {}
        # A partition of another topic id (KIP-516) is never added: produce() refuses it.
        topic_ids = {topic.name: topic.topic_id for topic in request.topics}
        for key, identity in wanted.items():
            if identity is MIXED:
                refused[key] = (ErrorCode.INVALID_REQUEST, MIXED_MESSAGE)
                continue
            producer_id, epoch = identity
            if producer_id < 0 or epoch < 0:
                refused[key] = (ErrorCode.INVALID_RECORD, _unidentified_message(identity))
                continue
            hosted = host.leader(*key, topic_ids.get(key[0], b""))
            if isinstance(hosted, LeadershipError):
                continue  # produce() answers the leadership error
            if hosted.log.has_open_transaction(producer_id, epoch):
                verified.add(key)
            else:
                ask[key] = (producer_id, epoch)
        if not ask:
            return verified, refused
        if len(set(ask.values())) > 1:
            message = "one Produce carries the batches of one transactional producer"
            refused |= dict.fromkeys(ask, (ErrorCode.INVALID_REQUEST, message))
            return verified, refused
        if not request.transactional_id:
            message = "transactional batches need the request's transactional_id"
            refused |= dict.fromkeys(ask, (ErrorCode.INVALID_TXN_STATE, message))
            return verified, refused
        ((producer_id, epoch),) = set(ask.values())
        verdicts = await self.check.ask(
            request.transactional_id,
            producer_id,
            epoch,
            list(ask),
            add=request.add_partitions_to_txn,
        )
        refused |= {key: verdict for key, verdict in verdicts.items() if verdict is not None}
        verified |= {key for key, verdict in verdicts.items() if verdict is None}
        return verified, refused
