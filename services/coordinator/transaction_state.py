"""The transaction coordinator's state machine: one TransactionMetadata per transactional id.

Theory of operation. Transactions are two-phase commit (DESIGN §5, KIP-98). The coordinator of a
transactional id owns its metadata (transaction_model.TransactionMetadata), which is exactly the
last record of that id in `__transaction_state`. Every operation below is pure: it validates a
request against the current metadata and returns an `Outcome` — an error to answer, and/or the new
metadata to write, and/or the markers to write — and changes nothing. The caller writes the record
and calls `transaction_model.apply` only once it is durable (Kafka's prepare/complete split); so
the in-memory map is always the replay of the log, and a coordinator that takes the partition over
(transaction_records.replay, then `resume_after_load`) holds the same map and finishes what was
decided. (One exception, in transaction_shard.py: COMPLETE_x is applied once phase 2 is done,
before its record, because a reload derives it anyway.)

The caller keeps at most one write in flight per transactional id: while one is pending it
answers CONCURRENT_TRANSACTIONS (retriable) without calling in here (Kafka's `pendingState`).

Phase 1 is the PREPARE_COMMIT / PREPARE_ABORT record: once it is durable the decision is taken,
the client is answered, and nothing can undo it. Phase 2 writes a COMMIT / ABORT control batch
(`MarkerWrite`) to every partition of the transaction — a group's offsets are one more partition,
the `__consumer_offsets` partition that owns the group, which the caller computes and adds like any
other — and then `markers_written` records COMPLETE_x. A failover between the two resumes phase 2.

Epochs (KIP-890, transactions version 2). Every end of a transaction bumps the producer epoch:
the PREPARE_x record carries the bumped epoch, the markers carry it, and the EndTxn answer gives
it to the producer, which uses it for its next transaction. So a late produce or marker of a
finished transaction (older epoch) can never land in the next one. Fencing bumps it too: an
InitProducerId over an open transaction, and the abort of a timed-out transaction, write
PREPARE_ABORT at the bumped epoch, so the old instance's next request carries an older epoch and
is refused with PRODUCER_FENCED. When the epoch is exhausted (transaction_model
.PRODUCER_EPOCH_EXHAUSTED) the producer's next identity is a new producer id at epoch 0: the caller
allocates it when `init_needs_new_producer_id` / `end_needs_new_producer_id` say so, which they
do only for a request that decides (never for a refusal or a retry, whose answer must not
depend on whether an id can be taken now).

Idempotent EndTxn. An EndTxn whose answer was lost is retried with the epoch from before the
bump. PREPARE_x and COMPLETE_x remember that identity (previous_producer_id/epoch): the same
decision answers success with the same identity and writes nothing; the other decision is
INVALID_TXN_STATE. Fences store no previous epoch, so a fenced producer never passes for a retry.

Fencing choice. Samsa does not write Kafka's PREPARE_EPOCH_FENCE: InitProducerId over an ONGOING
transaction writes PREPARE_ABORT with the epoch bumped directly (the one record Kafka ends up
writing too) and answers CONCURRENT_TRANSACTIONS until the abort completes; the new instance
retries and then gets the epoch after it. A loaded PREPARE_EPOCH_FENCE (from another writer) is
finished as an abort at its recorded epoch by `resume_after_load`.

Empty abort (KIP-890 allows it: a TV2 producer may abort without knowing whether any partition was
added). EndTxn(abort) with the current identity in EMPTY or COMPLETE_x bumps the epoch and writes
COMPLETE_ABORT at once: there are no partitions, so no markers. EndTxn(commit) there is
INVALID_TXN_STATE.

Transitions (state -> operation -> new state; "·" writes nothing):

    (none)          init                 -> EMPTY, epoch 0, the new producer id
    EMPTY, COMPLETE_x
                    init                 -> EMPTY, epoch + 1 (exhausted: new producer id, epoch 0)
                    add_partitions       -> ONGOING (start time = now)
                    end(abort)           -> COMPLETE_ABORT, epoch + 1 (empty abort, no markers)
                    end(commit)          ·  INVALID_TXN_STATE
                    end retry (COMPLETE_x, previous identity): same decision · NONE,
                                            other · INVALID_TXN_STATE
                    expire               -> DEAD (tombstone)
    ONGOING         init                 -> PREPARE_ABORT, epoch + 1, answer CONCURRENT_TRANSACTIONS
                    add_partitions       -> ONGOING with more partitions (nothing new: ·)
                    end(commit / abort)  -> PREPARE_COMMIT / PREPARE_ABORT, epoch + 1 + markers
                    timeout              -> PREPARE_ABORT, epoch + 1 + markers (fences)
    PREPARE_x       markers_written      -> COMPLETE_x (partitions cleared; next producer id taken)
                    init, add, end       ·  CONCURRENT_TRANSACTIONS (end retry: as COMPLETE_x)
                    load                 ·  resume: markers again
    PREPARE_EPOCH_FENCE
                    load                 -> PREPARE_ABORT at its epoch + markers
                    init, add, end       ·  CONCURRENT_TRANSACTIONS
    DEAD            init                 ·  CONCURRENT_TRANSACTIONS (the tombstone is being written)
                    add, end             ·  INVALID_PRODUCER_ID_MAPPING

Before any state rule, add_partitions and end check the producer's identity (the fencing rules,
with every refusal's wording, are in transaction_refusals.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.transaction_model import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    DEAD,
    EMPTY,
    IDLE,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    PREPARED,
    Outcome,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    is_epoch_exhausted,
    marker_write_of,
    refusal,
)
from samsa.services.coordinator.transaction_refusals import (
    concurrent_transactions,
    identity_refusal,
    init_refusal,
    invalid_producer_id_mapping,
    invalid_txn_state,
    is_end_retry,
)

# Kafka's transaction.max.timeout.ms (15 minutes; the default of the coordinator's
# --transaction-max-timeout-ms): the longest transaction.timeout.ms a producer may ask for. A
# transaction holds back the last stable offset of every partition it wrote to, so consumers in
# read_committed wait at most this long behind a stuck producer.
TRANSACTION_TIMEOUT_MS_MAX = 15 * 60 * 1000
# Kafka's transactional.id.expiration.ms (7 days): an idle transactional id is forgotten after it.
TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT = 7 * 24 * 3600 * 1000
# The most partitions one transaction may span. The whole set is rewritten in every record of the
# id, and one record must fit in one batch of `__transaction_state`: 10 000 partitions of a 249-byte
# topic name in one TopicPartitions stay under ~60 KB.
TRANSACTION_PARTITIONS_MAX = 10_000
# The most bytes a transaction's partitions may take in its record (`partitions_bytes`). The count
# above does not bound them once the partitions span many topics: 10 000 topics with 249-byte
# names are 2.5 MB, and a record the broker refuses as too large fails the partition's writer,
# which gives the partition up (and every transactional id on it) at each retry of the add. A
# quarter of the coordinator's 512 KiB batches (coordinator_partition.MAX_BATCH_BYTES) leaves
# room for the rest of the record and for the topic's 1 MiB max.message.bytes.
TRANSACTION_PARTITIONS_BYTES_MAX = 128 * 1024

# The allowed moves (from -> to); `_transition` asserts every new metadata against it.
TRANSITIONS: Mapping[TransactionState, frozenset[TransactionState]] = {
    EMPTY: frozenset({EMPTY, ONGOING, COMPLETE_ABORT, DEAD}),
    ONGOING: frozenset({ONGOING, PREPARE_COMMIT, PREPARE_ABORT}),
    PREPARE_COMMIT: frozenset({COMPLETE_COMMIT}),
    PREPARE_ABORT: frozenset({COMPLETE_ABORT}),
    COMPLETE_COMMIT: frozenset({EMPTY, ONGOING, COMPLETE_ABORT, DEAD}),
    COMPLETE_ABORT: frozenset({EMPTY, ONGOING, COMPLETE_ABORT, DEAD}),
    PREPARE_EPOCH_FENCE: frozenset({PREPARE_ABORT}),
    DEAD: frozenset(),
}


def _transition(current: TransactionMetadata, **changes: object) -> TransactionMetadata:
    new = dataclasses.replace(current, **changes)  # type: ignore[arg-type]
    assert new.state in TRANSITIONS[current.state], f"{current.state.name} -> {new.state.name}"
    assert new.producer_epoch >= current.producer_epoch or new.producer_id != current.producer_id
    return new


def init_needs_new_producer_id(current: TransactionMetadata | None) -> bool:
    """True when `init_producer_id` of a valid request will take the new producer id (the
    caller allocates one, after `init_refusal` passed the request)."""
    return current is None or (current.state in IDLE and is_epoch_exhausted(current.producer_epoch))


def end_needs_new_producer_id(
    current: TransactionMetadata | None, producer_id: int, producer_epoch: int, txn_commit: bool
) -> bool:
    """True when `end_transaction` with these arguments will take the new producer id (the
    caller allocates one): a decision at an exhausted epoch. A retry or a refusal takes none, so
    that its answer never depends on whether an id can be taken now."""
    if _end_without_decision(current, producer_id, producer_epoch, txn_commit) is not None:
        return False
    assert current is not None
    return is_epoch_exhausted(current.producer_epoch)


def init_producer_id(
    current: TransactionMetadata | None,
    transactional_id: str,
    timeout_ms: int,
    now_ms: int,
    new_producer_id: int | None,
    max_timeout_ms: int = TRANSACTION_TIMEOUT_MS_MAX,
) -> Outcome:
    """InitProducerId for a transactional id: a new identity, fencing any older instance.
    `new_producer_id` is used only when `init_needs_new_producer_id(current)`; else None will do.
    `max_timeout_ms` is the coordinator's transaction.max.timeout.ms."""
    refused = init_refusal(transactional_id, timeout_ms, max_timeout_ms)
    if refused is not None:
        return refused
    if init_needs_new_producer_id(current):
        assert new_producer_id is not None and new_producer_id >= 0, "allocate a producer id"
    if current is None:
        assert new_producer_id is not None
        metadata = TransactionMetadata(
            transactional_id, new_producer_id, 0, timeout_ms, EMPTY, now_ms
        )
        return Outcome(metadata=metadata, producer_id=new_producer_id, producer_epoch=0)
    assert current.transactional_id == transactional_id
    if current.state == ONGOING:
        return _fence(current, now_ms, ErrorCode.CONCURRENT_TRANSACTIONS)
    if current.state not in IDLE:
        return concurrent_transactions(current)  # PREPARE_x, PREPARE_EPOCH_FENCE, DEAD
    if is_epoch_exhausted(current.producer_epoch):
        assert new_producer_id is not None
        producer_id, producer_epoch = new_producer_id, 0
    else:
        producer_id, producer_epoch = current.producer_id, current.producer_epoch + 1
    metadata = _transition(
        current,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        previous_producer_id=current.producer_id,
        previous_producer_epoch=current.producer_epoch,
        transaction_timeout_ms=timeout_ms,
        state=EMPTY,
        last_update_ms=now_ms,
    )
    return Outcome(metadata=metadata, producer_id=producer_id, producer_epoch=producer_epoch)


def _fence(current: TransactionMetadata, now_ms: int, error: ErrorCode) -> Outcome:
    """Abort the open transaction at a bumped epoch: the producer's next request is fenced."""
    assert current.state == ONGOING, current.state
    metadata = _transition(
        current,
        producer_epoch=current.producer_epoch + 1,
        previous_producer_id=current.producer_id,
        previous_producer_epoch=NO_PRODUCER_EPOCH,
        state=PREPARE_ABORT,
        last_update_ms=now_ms,
    )
    message = (
        f"transactional id {current.transactional_id!r} had an open transaction: it is being "
        "aborted and its producer fenced; retry after a backoff"
    )
    return Outcome(
        error=error,
        message=message if error != ErrorCode.NONE else "",
        metadata=metadata,
        markers=marker_write_of(metadata),
    )


def add_partitions(
    current: TransactionMetadata | None,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
    now_ms: int,
) -> Outcome:
    """AddPartitionsToTxn (and AddOffsetsToTxn, as the group's `__consumer_offsets` partition)."""
    if current is None or current.state == DEAD:
        return invalid_producer_id_mapping(current)
    refused = identity_refusal(current, producer_id, producer_epoch)
    if refused is not None:
        return refused
    if current.state not in IDLE | {ONGOING}:
        return concurrent_transactions(current)
    requested = frozenset(partitions)
    for topic, partition in requested:
        if not topic or partition < 0:
            return refusal(ErrorCode.INVALID_REQUEST, f"bad partition {topic!r}/{partition}")
    combined = current.partitions | requested if current.state == ONGOING else requested
    if len(combined) > TRANSACTION_PARTITIONS_MAX:
        return refusal(
            ErrorCode.INVALID_REQUEST,
            f"a transaction may span at most {TRANSACTION_PARTITIONS_MAX} partitions: "
            "commit more often",
        )
    if (size := partitions_bytes(combined)) > TRANSACTION_PARTITIONS_BYTES_MAX:
        return refusal(
            ErrorCode.INVALID_REQUEST,
            f"the transaction's partitions would take {size} bytes of its record, above "
            f"{TRANSACTION_PARTITIONS_BYTES_MAX} (too many topics): commit more often",
        )
    answer = current.answer_identity()
    if combined == current.partitions or not combined:
        # Nothing new (or nothing at all) to add: no record, the transaction stays as it is.
        return Outcome(producer_id=answer[0], producer_epoch=answer[1])
    start_ms = current.transaction_start_ms if current.state == ONGOING else now_ms
    metadata = _transition(
        current,
        state=ONGOING,
        partitions=combined,
        transaction_start_ms=start_ms,
        last_update_ms=now_ms,
    )
    return Outcome(metadata=metadata, producer_id=answer[0], producer_epoch=answer[1])


def partitions_bytes(partitions: Iterable[TopicPartition]) -> int:
    """An upper bound of the bytes `partitions` take in a record (one TopicPartitions per topic:
    its name and framing, and a varint of at most 5 bytes per partition)."""
    topics: dict[str, int] = {}
    for topic, _ in partitions:
        topics[topic] = topics.get(topic, 0) + 1
    return sum(len(topic.encode()) + 11 + 5 * count for topic, count in topics.items())


def end_transaction(
    current: TransactionMetadata | None,
    producer_id: int,
    producer_epoch: int,
    txn_commit: bool,
    now_ms: int,
    new_producer_id: int | None = None,
) -> Outcome:
    """EndTxn: decide (PREPARE_x at the bumped epoch) and hand the markers to the caller."""
    answered = _end_without_decision(current, producer_id, producer_epoch, txn_commit)
    if answered is not None:
        return answered
    assert current is not None
    rotating = is_epoch_exhausted(current.producer_epoch)
    if rotating:
        assert new_producer_id is not None and new_producer_id >= 0, "allocate a producer id"
    if current.state in IDLE:
        # Empty abort: no partitions, so no markers; the identity moves on at once.
        producer_id_after, epoch_after = (
            (new_producer_id, 0) if rotating else (current.producer_id, current.producer_epoch + 1)
        )
        assert producer_id_after is not None
        metadata = _transition(
            current,
            producer_id=producer_id_after,
            producer_epoch=epoch_after,
            previous_producer_id=current.producer_id,
            previous_producer_epoch=current.producer_epoch,
            state=COMPLETE_ABORT,
            last_update_ms=now_ms,
        )
        return Outcome(metadata=metadata, producer_id=producer_id_after, producer_epoch=epoch_after)
    metadata = _transition(
        current,
        producer_epoch=current.producer_epoch + 1,
        previous_producer_id=current.producer_id,
        previous_producer_epoch=current.producer_epoch,
        next_producer_id=new_producer_id if rotating else NO_PRODUCER_ID,
        state=PREPARE_COMMIT if txn_commit else PREPARE_ABORT,
        last_update_ms=now_ms,
    )
    answer = metadata.answer_identity()
    return Outcome(
        metadata=metadata,
        producer_id=answer[0],
        producer_epoch=answer[1],
        markers=marker_write_of(metadata),
    )


def _end_without_decision(
    current: TransactionMetadata | None, producer_id: int, producer_epoch: int, txn_commit: bool
) -> Outcome | None:
    """EndTxn's answer when it decides nothing (a retry of the decision on record, or a
    refusal), or None when it decides."""
    if current is None or current.state == DEAD:
        return invalid_producer_id_mapping(current)
    if is_end_retry(current, producer_id, producer_epoch):
        wanted = PREPARE_COMMIT if txn_commit else PREPARE_ABORT
        done = COMPLETE_COMMIT if txn_commit else COMPLETE_ABORT
        if current.state in (wanted, done):
            answer = current.answer_identity()
            return Outcome(producer_id=answer[0], producer_epoch=answer[1])
        return invalid_txn_state(current, txn_commit)
    refused = identity_refusal(current, producer_id, producer_epoch)
    if refused is not None:
        return refused
    if current.state not in IDLE | {ONGOING}:
        return concurrent_transactions(current)
    if current.state in IDLE and txn_commit:
        return invalid_txn_state(current, txn_commit)
    return None


def markers_written(current: TransactionMetadata, now_ms: int) -> Outcome:
    """Phase 2 done: every marker of the PREPARE_x is written; record COMPLETE_x."""
    assert current.state in PREPARED, f"markers written in {current.state.name}"
    rotating = current.next_producer_id != NO_PRODUCER_ID
    metadata = _transition(
        current,
        producer_id=current.next_producer_id if rotating else current.producer_id,
        producer_epoch=0 if rotating else current.producer_epoch,
        next_producer_id=NO_PRODUCER_ID,
        state=COMPLETE_COMMIT if current.state == PREPARE_COMMIT else COMPLETE_ABORT,
        partitions=frozenset(),
        transaction_start_ms=NO_TIMESTAMP,
        last_update_ms=now_ms,
    )
    return Outcome(
        metadata=metadata, producer_id=metadata.producer_id, producer_epoch=metadata.producer_epoch
    )


def _is_timed_out(metadata: TransactionMetadata, now_ms: int) -> bool:
    return (
        metadata.state == ONGOING
        and now_ms > metadata.transaction_start_ms + metadata.transaction_timeout_ms
    )


def timed_out(all_metadata: Mapping[str, TransactionMetadata], now_ms: int) -> list[str]:
    """The transactional ids whose ONGOING transaction outlived its timeout, sorted."""
    return sorted(name for name, md in all_metadata.items() if _is_timed_out(md, now_ms))


def abort_timed_out(current: TransactionMetadata, now_ms: int) -> Outcome:
    """Abort a timed-out transaction and fence its producer; nothing if it is no longer one (it
    ended, or a new transaction began, since `timed_out` listed it)."""
    if not _is_timed_out(current, now_ms):
        return Outcome()
    return _fence(current, now_ms, ErrorCode.NONE)


def expired(
    all_metadata: Mapping[str, TransactionMetadata], now_ms: int, expiration_ms: int
) -> list[TransactionMetadata]:
    """DEAD metadata (tombstones to write) for idle ids not touched for `expiration_ms`."""
    assert expiration_ms > 0
    return [
        _transition(md, state=DEAD, last_update_ms=now_ms)
        for name, md in sorted(all_metadata.items())
        if md.state in IDLE and now_ms - md.last_update_ms >= expiration_ms
    ]


def resume_after_load(all_metadata: Mapping[str, TransactionMetadata]) -> list[Outcome]:
    """What a coordinator that just loaded a partition must finish, sorted by id: markers for
    each PREPARE_x (phase 2 resumes; markers are idempotent at the brokers), and for a
    PREPARE_EPOCH_FENCE a PREPARE_ABORT at its recorded epoch (write it, then the markers).
    ONGOING transactions need nothing now: the timeout scan covers them."""
    outcomes: list[Outcome] = []
    for _, metadata in sorted(all_metadata.items()):
        if metadata.state in PREPARED:
            outcomes.append(Outcome(markers=marker_write_of(metadata)))
        elif metadata.state == PREPARE_EPOCH_FENCE:
            aborting = _transition(
                metadata, state=PREPARE_ABORT, previous_producer_epoch=NO_PRODUCER_EPOCH
            )
            outcomes.append(Outcome(metadata=aborting, markers=marker_write_of(aborting)))
    return outcomes
