"""One owned partition of `__consumer_offsets` at run time: the groups' shard on the shared
partition runtime (coordinator_partition.py: load, fence, write, keepalive).

Serving (DESIGN §6): a handler runs on the shard (which applies its records at once), then
`write` queues the records in the partition's writer *before any await*, so the log order is the
order in which the shard applied them; the handler answers once they are durable. The timer task
expires sessions and offsets (`shard.expire`).

Offsets committed in a transaction (group_txn_offsets.py) are written differently: as a
transactional batch under the *producer's* id and epoch (`write_transactional`, one producer at a
time, sequences continuing from what this partition's log holds for that producer), so that the
transaction coordinator's marker for that producer commits or aborts them. The next owner's fence
does not stop such a batch, so it is (re)sent only while this process is in touch with the
controllers (`Coordinator.in_touch`): one sent after it was replaced could land past the new
owner's load, which would never see it. Once durable they are pending in the shard; while any
are, a watcher reads the partition from the oldest pending batch on and resolves each producer's
records at its marker (the same rule loading applies).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping

from samsa.common import limits
from samsa.common.errors import ErrorCode, is_retriable
from samsa.common.record.codec import (
    CONTROL_TYPE_COMMIT,
    build_batch,
    decode_batches,
    read_control_marker,
)
from samsa.common.record.header import HEADER_BYTES, BatchHeader
from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC
from samsa.metadata.image import CoordinatorAssignment
from samsa.services.coordinator import coordinator_metrics, group_records
from samsa.services.coordinator.coordinator_gauges import rebalances_in
from samsa.services.coordinator.coordinator_partition import (
    MAX_BATCH_BYTES,
    MAX_BATCH_RECORDS,
    RETRY_BACKOFF_MAX_S,
    RETRY_BACKOFF_S,
    CoordinatorPartition,
    KeyValue,
    PartitionUnavailableError,
    now_ms,
)
from samsa.services.coordinator.group_model import GroupConfig
from samsa.services.coordinator.group_records import GroupRecord
from samsa.services.coordinator.group_shard import EXPIRE_RECORDS_MAX, GroupCoordinatorShard
from samsa.services.coordinator.offsets_log import OffsetsLog
from samsa.services.coordinator.record_writer import SEQUENCE_MODULUS

log = logging.getLogger(__name__)

TIMER_TICK_MAX_S = 1.0  # the longest sleep between expiry checks (offset retention has no deadline)
MARKER_POLL_S = 0.05  # the watcher's pause when it has read up to the high watermark
# A record's framing in a batch beyond its key and value: its length, attributes, timestamp and
# offset deltas, key and value lengths and header count (varints at their largest).
RECORD_FRAMING_BYTES_MAX = 32


class TxnWriteRefusedError(Exception):
    """The broker refused the producer's transactional batch for good: answer `code`."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class OffsetsPartition(CoordinatorPartition):
    """The groups of one partition of `__consumer_offsets`."""

    topic = CONSUMER_OFFSETS_TOPIC

    def __init__(
        self,
        assignment: CoordinatorAssignment,
        *,
        coordinator_id: int,
        offsets_log: OffsetsLog,
        config: GroupConfig,
        on_ended: Callable[[CoordinatorPartition], None],
        in_touch: Callable[[], bool] = lambda: True,
        topic_ids: Callable[[], Mapping[str, bytes]] | None = None,
    ) -> None:
        super().__init__(
            assignment, coordinator_id=coordinator_id, offsets_log=offsets_log, on_ended=on_ended
        )
        self.shard = GroupCoordinatorShard(config)
        # Whether this process may still own the partition (Coordinator.in_touch): asked before
        # each attempt of a transactional batch, which the next owner's fence does not stop.
        self.in_touch = in_touch
        # The metadata's topic ids now (Coordinator.topic_ids), checked once loaded: see
        # on_loaded. None: not checked (tests that load a partition by hand).
        self.topic_ids = topic_ids
        # Per producer id with transactional batches here: (epoch, next sequence).
        self._txn_sequences: dict[int, tuple[int, int]] = {}
        self._txn_locks: dict[int, asyncio.Lock] = {}
        self._watch_from: int | None = None  # the oldest pending transactional batch's offset
        self._watcher: asyncio.Task[None] | None = None
        self._topics_deleted: frozenset[str] = frozenset()  # seen while loading: see on_loaded

    async def write(self, records: list[GroupRecord]) -> None:
        """Queue `records` (already applied to the shard) and return once they, and everything
        queued before them, are durable. Must be called right after the handler, with no await
        in between. Raises PartitionUnavailableError when the partition failed or was dropped.
        Records that would not fit one batch go as several (`split_write`)."""
        durable = self._queue(records)
        await asyncio.shield(asyncio.gather(*durable))
        coordinator_metrics.for_coordinator().rebalanced(rebalances_in(records))

    def _queue(self, records: list[GroupRecord]) -> list[asyncio.Future[int]]:
        return [
            self.queue_encoded(encoded, self._on_durable(part))
            for part, encoded in split_write(records)
        ]

    def on_topics_deleted(self, topics: frozenset[str]) -> None:
        """The metadata image deleted `topics` (or created them again under their names): every
        group's offsets of them are deleted now, once loaded if the partition is loading. The
        tombstones are written in the background; a partition that fails meanwhile is loaded
        again from the log, where they may be missing, as in Kafka."""
        if self.ended:
            return
        if self.writer is None:
            self._topics_deleted |= topics
            return
        self._write_in_background(self.shard.delete_topics(topics).records)

    def _write_in_background(self, written: list[GroupRecord]) -> None:
        if not written:
            return
        for durable in self._queue(written):
            durable.add_done_callback(_ignore_failure)  # a failed partition is reloaded

    async def write_transactional(
        self, producer_id: int, producer_epoch: int, written: list[GroupRecord]
    ) -> None:
        """Write `written` (checked, not applied) as one transactional batch of the producer's
        and make them pending once durable. Raises PartitionUnavailableError when the partition
        was given up, TxnWriteRefusedError when the broker refused the batch."""
        self.check_serving()
        groups = sorted({key.offset_commit.group_id for key, _ in written})
        for group_id in groups:  # from now until pending: see GroupCoordinatorShard.expire
            self.shard.transactional_write_started(group_id)
        writing = self._write_transactional(producer_id, producer_epoch, written)
        task = asyncio.ensure_future(writing)
        task.add_done_callback(lambda _: self._transactional_write_ended(groups))
        await asyncio.shield(task)

    def _transactional_write_ended(self, groups: list[str]) -> None:
        for group_id in groups:
            self.shard.transactional_write_ended(group_id)

    async def _write_transactional(
        self, producer_id: int, producer_epoch: int, written: list[GroupRecord]
    ) -> None:
        lock = self._txn_locks.setdefault(producer_id, asyncio.Lock())
        async with lock:
            epoch, sequence = self._txn_sequences.get(producer_id, (producer_epoch, 0))
            if epoch != producer_epoch:
                sequence = 0  # a new epoch starts its sequences over
            encoded = [group_records.encode(record) for record in written]
            batch = build_batch(
                [value for _, value in encoded],
                keys=[key for key, _ in encoded],
                timestamps=now_ms(),
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=sequence,
                transactional=True,
            )
            backoff = RETRY_BACKOFF_S
            attempted = False
            while True:
                self.check_serving()
                if not self.in_touch():
                    self._stop_sending(attempted)
                attempted = True
                result = await self.offsets_log.produce(self.topic, self.partition, batch)
                if not result.error_code:
                    break
                code = ErrorCode(result.error_code)
                if not is_retriable(code):
                    raise TxnWriteRefusedError(code, result.error_message)
                await asyncio.sleep(backoff)  # the same batch again: the broker deduplicates
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
            after = (sequence + len(written)) % SEQUENCE_MODULUS
            self._txn_sequences[producer_id] = (producer_epoch, after)
            self.shard.replay_transactional(
                producer_id, [(result.base_offset + i, r) for i, r in enumerate(written)]
            )
            self._watch(result.base_offset)

    def _stop_sending(self, attempted: bool) -> None:
        """Give a transactional batch up, this process having lost touch with the controllers:
        written under the producer's identity, one sent after it was replaced would land past the
        new owner's load, unseen by it (the marker would commit offsets the group's coordinator
        does not know). If an attempt was sent, whether it landed is unknown, and with it the
        producer's next sequence here: the partition ends, to be loaded again from the log."""
        message = (
            "this coordinator has lost touch with the controllers and may have been replaced; "
            "find the coordinator again and retry"
        )
        if attempted:
            self._end(ErrorCode.NOT_COORDINATOR, message)
            if self._task is not None:
                self._task.cancel()  # its write loop would wait for a wake-up that never comes
        raise PartitionUnavailableError(ErrorCode.NOT_COORDINATOR, message)

    def _on_durable(self, records: list[GroupRecord]) -> Callable[[int], None] | None:
        """What to tell the shard once records it applied live are durable (group_replay.py)."""
        if not records:
            return None
        return lambda first_offset: self.shard.mark_durable(records, first_offset)

    def _watch(self, offset: int) -> None:
        """Read from `offset` (at the latest) for markers until nothing is pending. Records
        made pending after the watcher read past them (their write's answer came after a marker
        that resolves them, which an abort by timeout or fencing can write meanwhile) are
        resolved: the watcher goes back to `offset`, even from a read in flight."""
        if self._watch_from is None or offset < self._watch_from:
            self._watch_from = offset
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.ensure_future(self._watch_markers())

    async def _watch_markers(self) -> None:
        backoff = RETRY_BACKOFF_S
        while self.shard.txn_offsets and not self.ended:
            assert self._watch_from is not None
            offset = self._watch_from
            result = await self.offsets_log.fetch(self.topic, self.partition, offset)
            if result.error_code:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
                continue
            backoff = RETRY_BACKOFF_S
            records = result.records  # read once: each read of a bytes field copies it
            if not records:
                await asyncio.sleep(MARKER_POLL_S)
                continue
            batches = [b for b in decode_batches(records) if b.header.last_offset >= offset]
            if any(batch.header.is_control for batch in batches):
                # A plain commit still in flight may have landed before these markers: know
                # where every write queued so far landed first (group_txn_offsets.py).
                try:
                    await self.write_encoded([])
                except PartitionUnavailableError:
                    return
            if self._watch_from is not None and self._watch_from < offset:
                # `_watch` rewound while this read was in flight: records made pending then
                # may lie before markers this read (or an earlier one) passed, so read again
                # from there rather than move past them (resolving a marker twice is harmless:
                # its producer's records before it are gone after the first time).
                continue
            for batch in batches:
                head = batch.header
                if head.is_control:
                    marker_type, _ = read_control_marker(batch)
                    committed = marker_type == CONTROL_TYPE_COMMIT
                    self.replay_marker(head.producer_id, committed, head.base_offset)
                if self._watch_from is not None and head.next_offset > self._watch_from:
                    self._watch_from = head.next_offset
        self._watch_from = None

    async def stop(self) -> None:
        await super().stop()
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher

    # --- the runtime's hooks ----------------------------------------------------------------

    def replay_record(self, key: bytes, value: bytes | None, offset: int) -> None:
        self.shard.replay(group_records.decode(key, value), offset)

    def replay_transactional(
        self, head: BatchHeader, next_sequence: int, written: list[tuple[int, KeyValue]]
    ) -> None:
        producer_id = head.producer_id
        self._txn_sequences[producer_id] = (head.producer_epoch, next_sequence)
        readable = []
        for offset, (key, value) in written:
            try:
                readable.append((offset, group_records.decode(key, value)))
            except ValueError as error:
                log.error(
                    "skipping an unreadable transactional record",
                    extra={"partition": self.partition, "error": str(error)},
                )
        self.shard.replay_transactional(producer_id, readable)

    def replay_marker(self, producer_id: int, committed: bool, offset: int) -> None:
        applied = self.shard.complete_transaction(producer_id, committed, offset)
        if applied:
            log.info(
                "transactional offsets committed",
                extra={"partition": self.partition, "producer_id": producer_id, "offsets": applied},
            )

    def writer_epoch_record(self) -> KeyValue:
        epoch = self.assignment.assignment_epoch
        return group_records.encode(group_records.writer_epoch(self.coordinator_id, epoch))

    def on_loaded(self) -> None:
        """Also deletes the offsets of topics deleted, or created again, while no coordinator
        had the partition loaded, which no image change here told of: those recorded under a
        topic id the metadata no longer shows for their topic. The metadata is current enough to
        judge by: this process owns the partition by an assignment its image holds, later than
        any image a previous owner committed under, and each image since reached
        `on_topics_deleted`."""
        self.shard.start_timers(now_ms())
        deleted, self._topics_deleted = self._topics_deleted, frozenset()
        if deleted:
            self.on_topics_deleted(deleted)
        if self.topic_ids is not None:
            stale = self.shard.delete_offsets_of_other_topics(self.topic_ids()).records
            self._write_in_background(stale)
        if self.shard.txn_offsets:
            self._watch(self.loaded_end_offset)

    def describe_loaded(self) -> dict[str, object]:
        return {"groups": len(self.shard.state.groups)}

    async def timer_loop(self) -> None:
        expired: list[GroupRecord] = []
        while True:
            deadline = self.shard.next_deadline_ms()
            wait_s = TIMER_TICK_MAX_S
            if len(expired) >= EXPIRE_RECORDS_MAX:
                wait_s = 0.0  # the last expiry stopped at its bound: more is due
            elif deadline is not None:
                wait_s = min(wait_s, max(0.0, (deadline - now_ms()) / 1000))
            await asyncio.sleep(wait_s)
            now = now_ms()
            expired = self.shard.expire(now).records
            try:
                if expired:
                    await self.write(expired)
                if keepalive := self.keepalive_records(now):  # after the expired records
                    await self.write_encoded(keepalive)
            except PartitionUnavailableError:
                return


def _ignore_failure(durable: asyncio.Future[int]) -> None:
    """Retrieve a background write's failure: the partition that failed reports it."""
    if not durable.cancelled():
        durable.exception()


def split_write(records: list[GroupRecord]) -> list[tuple[list[GroupRecord], list[KeyValue]]]:
    """The records of one write, encoded, in the parts to queue: all in one when they fit one
    batch of `__consumer_offsets` (its max.message.bytes), which the writer sends whole (a write
    of a handler stays atomic), else in consecutive parts within the writer's batch budget. A
    batch over max.message.bytes is refused by the broker, which fails the writer and every group
    of the partition, again at each retry: DeleteGroups of a group with 10,000 offsets, or that
    many expiring at once, write over 1 MiB of tombstones. Parts are safe to split: each record's
    replay depends only on those before it, so a log ending after any part loads (the next
    heartbeat completes a target assignment cut short, a retried DeleteGroups the deletion)."""
    encoded = [group_records.encode(record) for record in records]
    sizes = [len(key) + len(value or b"") + RECORD_FRAMING_BYTES_MAX for key, value in encoded]
    if HEADER_BYTES + sum(sizes) <= limits.max_message_bytes_default:
        return [(records, encoded)]
    parts: list[tuple[list[GroupRecord], list[KeyValue]]] = []
    start = size = 0
    for index, record_size in enumerate(sizes):
        full = size + record_size > MAX_BATCH_BYTES or index - start >= MAX_BATCH_RECORDS
        if index > start and full:
            parts.append((records[start:index], encoded[start:index]))
            start, size = index, 0
        size += record_size
    parts.append((records[start:], encoded[start:]))
    return parts
