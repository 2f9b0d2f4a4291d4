"""One owned partition of a coordinator topic at run time: load, fence, write, keep alive.

Theory of operation (DESIGN §6). A coordinator owns partitions of `__consumer_offsets` (groups,
offsets_partition.py) and of `__transaction_state` (transactions, transaction_partition.py). Both
are kept the same way; this base class does it, and a subclass says how to replay a record into
its shard, what its writer-epoch record is, and what its timers do. When the controller gives
this coordinator a partition, under (producer_id, assignment_epoch), the partition is loaded
before anything is served:

1. read the partition from its leader up to the high watermark, replaying every record into the
   subclass's fresh shard, and note the next sequence of batches this writer identity wrote
   before (a reload by the same owner continues its sequence; a new epoch starts at 0);
2. fence: append a writer-epoch record with the new identity (acks=all). From then on every
   broker refuses the previous owner's writes with INVALID_PRODUCER_EPOCH, and every record it
   ever got acknowledged lies below this one. When the partition's producer id was rotated (its
   epochs ran out, coordinator_control.py), a writer-epoch record as (retired id,
   PRODUCER_EPOCH_MAX, sequence 0) comes first: the retired id's owners wrote with lower epochs,
   so they are refused as well (the brokers never expire that entry on a coordinator topic,
   ProducerStateTable.expire); a later owner's repeat is answered as a duplicate. Replay
   takes it as any writer-epoch record and ignores it for this writer's sequence;
3. read on up to and including that record, so the shard holds everything ever acknowledged;
4. `on_loaded` (start the shard's timers, resume unfinished work), then serve. Until then the
   partition answers COORDINATOR_LOAD_IN_PROGRESS.

Serving: `write_encoded` queues records in the partition's `RecordWriter` *before any await*, so
the log order is the order in which they were queued. One writer task sends the writer's
batches, one at a time, with acks=all (each in its first traced write's span, whose trace the
broker's spans join), and completes each caller's future once its records (and every record
queued before them) are durable. Reads pass through `write_encoded([])` too, so an
answer never shows state the log does not hold yet.

Failure: a retriable produce error (leader moved, timeout, broker down) resends the same batch
(same sequence: the broker deduplicates). A batch refused as too large that merged several
writes is sent again one write per batch; one write refused so answers its request
MESSAGE_TOO_LARGE (not retriable), then fails the writer as below (the shard holds it already).
Anything else (fenced by a newer owner, the broker's producer state lost) fails the writer: every
waiting caller gets NOT_COORDINATOR, and the partition ends; its owner reloads it from the log
when it still owns it, since the shard may be ahead of the log. The writer-epoch record is
rewritten when the partition has been idle for an hour, so that the brokers' producer state for
this writer never expires (which would make its next write UNKNOWN_PRODUCER_ID).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from samsa.common.errors import ErrorCode, is_retriable
from samsa.common.record.codec import (
    CONTROL_TYPE_COMMIT,
    build_batch,
    decode_batches,
    read_control_marker,
)
from samsa.common.record.header import BatchHeader
from samsa.metadata.image import NO_PRODUCER_ID, CoordinatorAssignment
from samsa.services.coordinator import coordinator_metrics
from samsa.services.coordinator.internal_produce_stream import joined, sampled_span_context
from samsa.services.coordinator.offsets_log import OffsetsLog
from samsa.services.coordinator.partition_tasks import together
from samsa.services.coordinator.record_writer import (
    PRODUCER_EPOCH_MAX,
    SEQUENCE_MODULUS,
    BatchToSend,
    Completed,
    RecordWriter,
    WriterFailedError,
)
from samsa.v1 import broker_pb2

log = logging.getLogger(__name__)

MAX_BATCH_RECORDS = 2_000
MAX_BATCH_BYTES = 512 * 1024  # below the topic's default max.message.bytes (1 MiB)
BOUNDS = {"max_batch_records": MAX_BATCH_RECORDS, "max_batch_bytes": MAX_BATCH_BYTES}
RETRY_BACKOFF_S = 0.05
RETRY_BACKOFF_MAX_S = 1.0
WRITER_KEEPALIVE_MS = 3_600_000
# A batch the broker refuses for its size: it wrote none of it (record_writer.split_in_flight).
TOO_LARGE = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE})

Token = asyncio.Future[int]
KeyValue = tuple[bytes, bytes | None]


def now_ms() -> int:
    return int(time.time() * 1000)


class PartitionUnavailableError(Exception):
    """The partition cannot serve the request now: answer `code` (retriable) to the client."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class LoadFailedError(Exception):
    """Loading stopped on a non-retriable error; the owner tries again later."""


class CoordinatorPartition:
    """The writer and tasks of one partition of `topic` this coordinator owns; subclasses hold
    the shard (see the module docstring)."""

    topic: str  # set by each subclass

    def __init__(
        self,
        assignment: CoordinatorAssignment,
        *,
        coordinator_id: int,
        offsets_log: OffsetsLog,
        on_ended: Callable[[CoordinatorPartition], None],
    ) -> None:
        self.assignment = assignment
        self.partition = assignment.partition
        self.coordinator_id = coordinator_id
        self.offsets_log = offsets_log
        self.writer: RecordWriter[Token] | None = None
        self.on_ended = on_ended
        self.ended = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_write_ms = now_ms()
        self.loaded_end_offset = -1  # once loaded: the offset after the fence, all replayed

    # --- what a subclass provides -----------------------------------------------------------

    def replay_record(self, key: bytes, value: bytes | None, offset: int) -> None:
        """Apply one record read from the log at `offset`; ValueError for an unreadable one."""
        raise NotImplementedError

    def writer_epoch_record(self) -> KeyValue:
        """The record that fences the previous owner (written at load and as a keepalive)."""
        raise NotImplementedError

    def replay_transactional(
        self, head: BatchHeader, next_sequence: int, written: list[tuple[int, KeyValue]]
    ) -> None:
        """The records of one transactional batch read from the log, each with its offset
        (`next_sequence`: the producer's next sequence after it). Only `__consumer_offsets` has
        them."""
        where = {"topic": self.topic, "partition": self.partition}
        log.error(
            "skipping an unexpected transactional batch",
            extra={**where, "producer_id": head.producer_id},
        )

    def replay_marker(self, producer_id: int, committed: bool, offset: int) -> None:
        """A transaction marker read from the log at `offset`."""

    def on_loaded(self) -> None:
        """Everything acknowledged is replayed and the writer is ready: start serving."""

    async def timer_loop(self) -> None:
        """Runs while the partition is loaded (expiry, timeouts); returns when it has nothing
        more to do. It should call `keepalive_records` now and then."""

    def describe_loaded(self) -> dict[str, object]:
        """What to log once the partition is loaded."""
        return {}

    # --- lifecycle --------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return self.writer is not None and not self.ended

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"{self.topic}-{self.partition}")

    async def stop(self) -> None:
        """Give the partition up: waiting callers answer NOT_COORDINATOR."""
        self._end(ErrorCode.NOT_COORDINATOR, "this coordinator no longer owns the partition")
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def check_serving(self) -> None:
        """Raise PartitionUnavailableError unless handlers may run on the shard now."""
        if self.ended:
            raise PartitionUnavailableError(
                ErrorCode.NOT_COORDINATOR,
                f"partition {self.partition} of {self.topic} was given up here; "
                "find the coordinator again and retry",
            )
        if self.writer is None:
            raise PartitionUnavailableError(
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                f"partition {self.partition} of {self.topic} is loading; retry shortly",
            )

    async def write_encoded(
        self, records: list[KeyValue], on_durable: Callable[[int], None] | None = None
    ) -> None:
        """Queue `records` and return once they are durable (see `queue_encoded`)."""
        await asyncio.shield(self.queue_encoded(records, on_durable))

    def queue_encoded(
        self, records: list[KeyValue], on_durable: Callable[[int], None] | None = None
    ) -> Token:
        """Queue `records` now; the future completes once they and all queued before are
        durable, after `on_durable(offset of the first record)` ran (even if the caller was
        cancelled). Raises PartitionUnavailableError when the partition failed or was dropped."""
        self.check_serving()
        assert self.writer is not None
        future: Token = asyncio.get_running_loop().create_future()
        if on_durable is not None:
            future.add_done_callback(_when_written(on_durable))
        try:
            done = self.writer.append(records, future, sampled_span_context())
        except WriterFailedError as error:
            raise PartitionUnavailableError(ErrorCode.NOT_COORDINATOR, str(error)) from error
        _settle(done)
        if records:
            self._wake.set()
        return future

    def keepalive_records(self, now: int) -> list[KeyValue]:
        """The writer-epoch record again when nothing was written for an hour, else nothing."""
        if now - self._last_write_ms >= WRITER_KEEPALIVE_MS:
            return [self.writer_epoch_record()]
        return []

    # --- the tasks --------------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            writer = await self._load()
            self.writer = writer
            self.on_loaded()
            coordinator_metrics.for_coordinator().loaded(self)  # its gauges count this one
            epoch = self.assignment.assignment_epoch
            where = {"topic": self.topic, "partition": self.partition, "assignment_epoch": epoch}
            log.info("partition loaded", extra={**where, **self.describe_loaded()})
            await together(self._write_loop(writer), self.timer_loop())
        except asyncio.CancelledError:
            raise
        except (LoadFailedError, WriterFailedError) as error:
            log.warning("partition %s-%d given up: %s", self.topic, self.partition, error)
            self._end(ErrorCode.NOT_COORDINATOR, str(error))
        except Exception:
            log.exception("partition %s-%d failed", self.topic, self.partition)
            self._end(ErrorCode.NOT_COORDINATOR, "the coordinator failed on this partition")

    def _end(self, code: ErrorCode, message: str) -> None:
        if self.ended:
            return
        self.ended = True
        coordinator_metrics.for_coordinator().dropped(self)
        if self.writer is not None and self.writer.failure is None:
            for token in self.writer.on_fatal(code, message):
                _fail(token, code, message)
        self.on_ended(self)

    async def _load(self) -> RecordWriter[Token]:
        offset, next_sequence = await self._read(0, None)
        retired_producer_id = self.assignment.retired_producer_id
        if retired_producer_id != NO_PRODUCER_ID:  # its owners wrote with epochs below the max
            await self._fence(RecordWriter(retired_producer_id, PRODUCER_EPOCH_MAX, **BOUNDS))
        writer: RecordWriter[Token] = RecordWriter(
            self.assignment.producer_id,
            self.assignment.assignment_epoch,
            first_sequence=next_sequence,
            **BOUNDS,
        )
        fence_offset = await self._fence(writer)
        await self._read(offset, fence_offset + 1)
        self.loaded_end_offset = fence_offset + 1
        return writer

    async def _fence(self, writer: RecordWriter[Token]) -> int:
        """Write the writer-epoch record as `writer`'s identity (acks=all); its offset."""
        token: Token = asyncio.get_running_loop().create_future()
        writer.append([self.writer_epoch_record()], token)
        await self._send_until_idle(writer)
        return token.result()

    async def _read(self, offset: int, until: int | None) -> tuple[int, int]:
        """Replay committed records from `offset` up to `until` (None: the high watermark as
        first seen). Returns the next offset and this writer identity's next sequence."""
        next_sequence = 0
        backoff = RETRY_BACKOFF_S
        goal = until
        while goal is None or offset < goal:
            result = await self.offsets_log.fetch(self.topic, self.partition, offset)
            if (
                result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
                and result.log_start_offset > offset
            ):
                offset = result.log_start_offset
                continue
            if result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and offset == 0:
                offset = await self._log_start()
                continue
            if result.error_code:
                if not is_retriable(ErrorCode(result.error_code)):
                    raise LoadFailedError(
                        f"reading partition {self.partition} of {self.topic}: "
                        f"{ErrorCode(result.error_code).name} {result.error_message}"
                    )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
                continue
            backoff = RETRY_BACKOFF_S
            if goal is None:
                goal = result.high_watermark
            records = result.records  # read once: each read of a bytes field copies it
            if not records:
                if offset >= goal:
                    break
                await asyncio.sleep(RETRY_BACKOFF_S)  # the high watermark has not reached goal
                continue
            offset, next_sequence = self._replay(records, offset, next_sequence)
        return offset, next_sequence

    def _replay(self, data: bytes, offset: int, next_sequence: int) -> tuple[int, int]:
        for batch in decode_batches(data):
            head = batch.header
            if head.last_offset < offset:
                continue
            if (
                head.producer_id == self.assignment.producer_id
                and head.producer_epoch == self.assignment.assignment_epoch
            ):
                next_sequence = (head.base_sequence + head.record_count) % SEQUENCE_MODULUS
            if head.is_control:
                marker_type, _ = read_control_marker(batch)
                committed = marker_type == CONTROL_TYPE_COMMIT
                self.replay_marker(head.producer_id, committed, head.base_offset)
            elif head.is_transactional:
                fresh = [
                    (record_offset, (key or b"", value))
                    for record_offset, key, value in zip(
                        batch.offsets(), batch.keys, batch.values, strict=True
                    )
                    if record_offset >= offset
                ]
                after = (head.base_sequence + head.record_count) % SEQUENCE_MODULUS
                self.replay_transactional(head, after, fresh)
            else:
                for record_offset, key, value in zip(
                    batch.offsets(), batch.keys, batch.values, strict=True
                ):
                    if record_offset >= offset:
                        self._replay_one(record_offset, key, value)
            offset = head.next_offset
        return offset, next_sequence

    def _replay_one(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        try:
            self.replay_record(key or b"", value, offset)
        except ValueError as error:
            where = {"topic": self.topic, "partition": self.partition, "offset": offset}
            log.error("skipping an unreadable record", extra={**where, "error": str(error)})

    async def _log_start(self) -> int:
        answers = await self.offsets_log.list_offsets(
            [(self.topic, self.partition)], broker_pb2.OFFSET_SPEC_EARLIEST
        )
        answer = answers[(self.topic, self.partition)]
        if answer.error_code:
            await asyncio.sleep(RETRY_BACKOFF_S)
            return 0
        return answer.offset

    async def _send_until_idle(self, writer: RecordWriter[Token]) -> None:
        """Send the writer's batches until nothing is queued (used while loading)."""
        while (batch := writer.next_batch()) is not None:
            await self._send(writer, batch)
        if writer.failure is not None:
            raise writer.failure

    async def _send(self, writer: RecordWriter[Token], batch: BatchToSend) -> None:
        """Send one batch until it is durable (settling its callers) or fails for good."""
        backoff = RETRY_BACKOFF_S
        encoded = build_batch(
            batch.values,
            keys=batch.keys,
            timestamps=now_ms(),
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
        )
        while True:
            with joined(batch.trace_parent):  # the caller's trace, which the broker's span joins
                result = await self.offsets_log.produce(self.topic, self.partition, encoded)
            if not result.error_code:
                _settle(writer.on_success(result.base_offset))
                self._last_write_ms = now_ms()
                return
            code = ErrorCode(result.error_code)
            if code in TOO_LARGE and writer.split_in_flight():
                return  # its writes go again, one per batch
            if not is_retriable(code):
                message = (
                    f"writing partition {self.partition} of {self.topic} failed: "
                    f"{code.name} {result.error_message}"
                )
                if code in TOO_LARGE:  # the request's fault: the others retry once reloaded
                    _fail(writer.refused_token(), code, self._too_large(result.error_message))
                for token in writer.on_fatal(code, message):
                    _fail(token, ErrorCode.NOT_COORDINATOR, message)
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)

    def _too_large(self, refusal: str) -> str:
        return (
            f"the request's records are too large for one batch of partition {self.partition} "
            f"of {self.topic} ({refusal}): send less in one request (fewer partitions or less "
            "metadata per commit), or raise the topic's max.message.bytes"
        )

    async def _write_loop(self, writer: RecordWriter[Token]) -> None:
        while True:
            batch = writer.next_batch()
            if batch is None:
                if writer.failure is not None:
                    raise writer.failure
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._send(writer, batch)


def _when_written(on_durable: Callable[[int], None]) -> Callable[[Token], None]:
    def written(future: Token) -> None:
        if not future.cancelled() and future.exception() is None:
            on_durable(future.result())

    return written


def _settle(completions: list[Completed[Token]]) -> None:
    for completion in completions:
        if completion.token is not None and not completion.token.done():
            completion.token.set_result(completion.offset)


def _fail(token: Token, code: ErrorCode, message: str) -> None:
    if token is not None and not token.done():
        token.set_exception(PartitionUnavailableError(code, message))
