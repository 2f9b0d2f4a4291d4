"""Reading one partition for a Fetch: leadership and replica checks, the leader epoch and
diverging-epoch checks (KIP-320), a preferred read replica (KIP-392), the read itself within the
answer's byte budget, a follower's progress and the high watermark it moves, and typed records for
clients without a codec.

`PartitionReader` serves one pass over a fetch's partitions (fetch.py decides which: all of a
sessionless request, or a session's named and changed ones); each `read` fills one
PartitionResponse and says what happened (`Outcome`), so that the pass knows whether to answer
at once (an error), to skip (the answer is full: the client asks again from there), or to wait.
"""

from __future__ import annotations

import enum

from samsa.common import limits
from samsa.common.errors import ErrorCode, SamsaError
from samsa.services.broker.hosted_partition import HostedPartition, LeadershipError
from samsa.services.broker.log.local_log import ReadResult
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.record_trace import PartitionTraces
from samsa.services.broker.requests.partition_decode import decode_into, fail
from samsa.v1 import broker_pb2, records_pb2

PARTITION_MAX_BYTES_DEFAULT = 1024 * 1024  # Kafka's max.partition.fetch.bytes
MAX_BYTES_DEFAULT = 50 * 1024 * 1024  # Kafka's fetch.max.bytes
# A leader's refusals that no replica's read may stand in for (KIP-392's fallback, `_read`).
_NOT_SERVED_BY_REPLICAS = (
    ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.INVALID_REQUEST,
    ErrorCode.KAFKA_STORAGE_ERROR,
)

FetchPartition = broker_pb2.FetchResponse.PartitionResponse
WantedPartition = broker_pb2.FetchRequest.PartitionData


class Outcome(enum.Enum):
    READ = "read"  # the result holds the partition's state and any records
    FAILED = "failed"  # the result holds an error
    SKIPPED = "skipped"  # the answer is full: the client asks again from here
    ANSWERED = "answered"  # a diverging epoch or a preferred replica, no records


class PartitionReader:
    """One pass's reads of single partitions, sharing the answer's byte budget."""

    def __init__(
        self,
        host: PartitionHost,
        request: broker_pb2.FetchRequest,
        now_ms: int,
        room_bytes: int | None = None,
    ) -> None:
        self.host = host
        self.request = request
        self.replica_id = replica_id_of(request)
        # Followers replicate everything; read_committed consumers read up to the last stable
        # offset and are told which aborted transactions to skip.
        self.read_committed = (
            self.replica_id < 0
            and request.isolation_level == records_pb2.ISOLATION_LEVEL_READ_COMMITTED
        )
        self.now_ms = now_ms
        # Each partition's stored bytes, by (topic, partition), kept beside the answer rather
        # than in it: the stream handlers splice them into the serialized answer (fetch_wire.py),
        # so a batch is not copied into the message, its copy and its serialization.
        self.records: dict[tuple[str, int], bytes] = {}
        self.budget = min(request.max_bytes or MAX_BYTES_DEFAULT, limits.fetch_response_bytes_max)
        # What the broker's answer budget lets this answer hold (answer_budget.py), KIP-74's
        # first batch included; None: unbounded (a follower's fetch, exempt). A partition whose
        # first batch does not fit is skipped, and `room_needed` says how much it needs.
        self.room_bytes = room_bytes
        self.room_needed = 0
        if room_bytes is not None:
            self.budget = min(self.budget, room_bytes)
        self.total = 0
        # Stored bytes read, by topic: the broker's bytes-out counter, once this pass answers.
        self.bytes_by_topic: dict[str, int] = {}
        # Offsets sent, by topic, from each partition's fetch offset: the records-out counter
        # without reading a batch (offsets a compaction removed count too).
        self.records_by_topic: dict[str, int] = {}
        # A consumer's reads of partitions with traced batches, (traces, fetch offset, next
        # offset): their `fetch` spans, once this pass answers. A long-poll pass that is read
        # again later was never sent, and each pass made a span for the same answer.
        self.traced_reads: list[tuple[PartitionTraces, int, int]] = []
        # A partition failed or has an answer of its own (a diverging epoch, a preferred read
        # replica): the fetch is answered at once, never parked until max_wait_ms. A follower
        # that must truncate after a leader change would otherwise wait out the whole wait
        # before it can catch up, and acks=all writes with it (Kafka answers these at once too).
        self.answer_now = False
        # A follower's fetch before this one (of any partition; -1: none known): the first read
        # of a partition after it grew counts it as caught up (replication.py says why).
        self.previous_fetch_ms = -1
        if self.replica_id >= 0:
            self.previous_fetch_ms = host.replica_fetch_ms.get(self.replica_id, -1)
            host.replica_fetch_ms[self.replica_id] = self.now_ms

    def read(
        self, topic: str, wanted: WantedPartition, result: FetchPartition, topic_id: bytes = b""
    ) -> Outcome:
        """Read one partition into `result`. `topic_id`: the id the fetcher's metadata shows
        for the topic (KIP-516); a partition hosted here under another one answers
        UNKNOWN_TOPIC_ID with no records. Empty: not checked."""
        outcome = self._read(topic, wanted, result, topic_id)
        if outcome is Outcome.FAILED or outcome is Outcome.ANSWERED:
            self.answer_now = True
        return outcome

    def count_answer(self) -> None:
        """Count this pass's bytes as sent, and make the `fetch` spans of the traced batches it
        returns (call once, for the pass that answers)."""
        if self.bytes_by_topic:
            self.host.metrics.fetched(
                self.bytes_by_topic, self.records_by_topic, follower=self.replica_id >= 0
            )
        for traces, fetch_offset, next_offset in self.traced_reads:
            traces.served(fetch_offset, next_offset, -1)

    def _cut(self, need_bytes: int) -> Outcome:
        """Skip a partition whose first batch needs `need_bytes` of room; the fetch may wait
        for the least any cut partition needs."""
        assert self.room_bytes is not None and not self.total
        self.room_needed = min(self.room_needed or need_bytes, need_bytes)
        return Outcome.SKIPPED

    def _first_room(self) -> int | None:
        """How large a decoded first batch may be: the room, when it is below what one answer
        carries at most (above it, a batch too large for any answer is MESSAGE_TOO_LARGE)."""
        room = self.room_bytes
        return room if room is not None and room < limits.fetch_response_bytes_max else None

    def _read(
        self, topic: str, wanted: WantedPartition, result: FetchPartition, topic_id: bytes
    ) -> Outcome:
        host, request, replica_id = self.host, self.request, self.replica_id
        hosted = host.leader(topic, wanted.partition, topic_id)
        if (
            isinstance(hosted, LeadershipError)
            and replica_id < 0
            and hosted.code not in _NOT_SERVED_BY_REPLICAS
        ):
            # Any replica serves consumers up to its own high watermark (KIP-392): a consumer
            # sent here by its leader's preferred_read_replica, or one whose metadata is a
            # little stale. Committed data only, so it is never wrong. (Never another topic's
            # log: `leader` checked the id against the hosted partition's, nor for a malformed
            # id; nor a leader whose log end is unknown: its high watermark was cut to that end.)
            hosted = host.get(topic, wanted.partition) or hosted
        if isinstance(hosted, LeadershipError):
            hosted.refuse(result)
            return Outcome.FAILED
        if replica_id >= 0 and not _is_replica(hosted, replica_id, result):
            return Outcome.FAILED
        if _fenced(hosted, wanted, result):
            return Outcome.FAILED
        if _diverged(hosted, wanted, result):
            return Outcome.ANSWERED
        if request.rack_id and replica_id < 0 and hosted.is_leader:
            preferred = _replica_in_rack(host, hosted, request.rack_id, wanted.fetch_offset)
            if preferred is not None:
                result.preferred_read_replica = preferred
                result.high_watermark = hosted.high_watermark
                return Outcome.ANSWERED
        high_watermark = hosted.high_watermark
        stable = hosted.log.last_stable_offset(high_watermark)
        result.high_watermark = high_watermark
        result.last_stable_offset = stable
        result.log_start_offset = hosted.log.log_start_offset
        partition_budget = min(
            wanted.partition_max_bytes or PARTITION_MAX_BYTES_DEFAULT,
            limits.fetch_partition_bytes_max,
            max(self.budget - self.total, 0),
        )
        if self.total and partition_budget <= 0:
            return Outcome.SKIPPED
        if self.room_bytes == 0:  # no room at all: not even a read
            return self._cut(1)
        # A throttled follower outside the ISR (KIP-73, replication_throttle.py) gets at most what
        # the leader's quota has left; nothing (an empty answer, its progress still counted) when
        # it is used up.
        throttle_room = None
        if replica_id >= 0 and hosted.is_leader:
            in_isr = replica_id in hosted.isr
            throttle_room = host.throttles.leader_room(
                host.image, topic, wanted.partition, in_isr, self.now_ms
            )
            if throttle_room is not None:
                partition_budget = min(partition_budget, throttle_room)
                if throttle_room == 0:
                    host.metrics.replication_throttled("leader", 0, 1)
        # Followers read up to the log end (that is how the high watermark advances);
        # consumers only up to the high watermark, or the last stable offset (read_committed).
        upper = None if replica_id >= 0 else stable if self.read_committed else high_watermark
        try:
            if throttle_room == 0:
                read = ReadResult(b"", wanted.fetch_offset, wanted.fetch_offset, 0, 0)
            else:
                read = hosted.log.read(
                    wanted.fetch_offset, max(partition_budget, 1), max_offset=upper
                )
        except SamsaError as error:
            fail(result, error.code, str(error))
            return Outcome.FAILED
        if replica_id >= 0 and hosted.is_leader:
            registration = host.image.brokers.get(replica_id)
            start_moved = hosted.replica.follower_fetched(
                replica_id,
                wanted.fetch_offset,
                hosted.log.log_end_offset,
                self.now_ms,
                wanted.log_start_offset,
                self.previous_fetch_ms,
                -1 if registration is None else registration.broker_epoch,
            )
            if start_moved:
                hosted.notify_appended()  # wakes a DeleteRecords waiting on the low watermark
            if replica_id not in hosted.isr:
                host.isr_candidates.add((topic, wanted.partition))
            if hosted.advance_high_watermark():
                result.high_watermark = hosted.high_watermark
                result.last_stable_offset = hosted.log.last_stable_offset(hosted.high_watermark)
        if self.total and len(read.records) > self.budget - self.total:
            # The log returns a first batch whole whatever its size; only the answer's first
            # batch may go past max_bytes (KIP-74). Beyond it the answer could outgrow the
            # client's receive limit, on every retry of the same fetch. Its progress above
            # still counts; the batch comes in a later fetch.
            return Outcome.SKIPPED
        if self.room_bytes is not None and len(read.records) > self.room_bytes - self.total:
            return self._cut(len(read.records))  # a first batch larger than the room
        result.next_fetch_offset = read.next_offset
        if read.records:
            aborted = (
                hosted.log.aborted_transactions(wanted.fetch_offset, read.next_offset)
                if self.read_committed
                else []
            )
            size_bytes = len(read.records)
            if request.decode_records:
                # The records count as they decode, not as stored: a zstd batch of a few
                # hundred bytes may inflate to limits.batch_uncompressed_bytes_max.
                first_max = self.budget - self.total if self.total else self._first_room()
                decoded = decode_into(
                    result, read.records, wanted.fetch_offset, aborted, partition_budget, first_max
                )
                if decoded is None:
                    # The answer's first batch cut by the room decodes to more than it: to
                    # how much more is not known, so the fetch waits for more room than now.
                    if self.total or first_max is None:
                        return Outcome.SKIPPED
                    return self._cut(first_max + 1)
                if result.error_code:
                    return Outcome.FAILED
                size_bytes = decoded
            else:
                self.records[(topic, wanted.partition)] = read.records
                for transaction in aborted:
                    result.aborted_transactions.add(
                        producer_id=transaction.producer_id, first_offset=transaction.first_offset
                    )
            self.total += size_bytes
            if throttle_room is not None:  # per answered partition, never per record
                host.throttles.record_leader(size_bytes, self.now_ms)
                host.metrics.replication_throttled("leader", size_bytes, 0)
            self.bytes_by_topic[topic] = self.bytes_by_topic.get(topic, 0) + size_bytes
            sent = result.next_fetch_offset - wanted.fetch_offset
            self.records_by_topic[topic] = self.records_by_topic.get(topic, 0) + sent
        if hosted.traced is not None:  # a traced batch may be in this answer (record_trace.py)
            if replica_id >= 0:  # the fetch offset says what the follower holds: true now
                hosted.traced.served(wanted.fetch_offset, result.next_fetch_offset, replica_id)
            else:  # spans for what the answer returns, if this pass is the one answered
                self.traced_reads.append(
                    (hosted.traced, wanted.fetch_offset, result.next_fetch_offset)
                )
        return Outcome.READ


def replica_id_of(request: broker_pb2.FetchRequest) -> int:
    return request.replica_id if request.HasField("replica_id") else -1


def _replica_in_rack(
    host: PartitionHost, hosted: HostedPartition, rack: str, fetch_offset: int
) -> int | None:
    """An in-sync follower in the consumer's rack, when the leader is not in it (KIP-392), that
    holds `fetch_offset` as its last fetch reported its log (Kafka's findPreferredReadReplica):
    one whose log starts above it would answer OFFSET_OUT_OF_RANGE, and the consumer, sent back
    to the leader, would be sent to it again, for ever."""
    brokers = host.image.brokers
    me = brokers.get(host.broker_id)
    leading = hosted.replica.leading
    if me is None or me.rack == rack or leading is None:
        return None
    for replica in hosted.isr:
        broker = brokers.get(replica)
        progress = leading.followers.get(replica)
        usable = replica != host.broker_id and broker is not None and not broker.fenced
        holds = progress is not None and (
            0 <= progress.log_start_offset <= fetch_offset <= progress.log_end_offset
        )
        if usable and holds and broker.rack == rack:  # type: ignore[union-attr]
            return replica
    return None


def _is_replica(hosted: HostedPartition, replica_id: int, result: FetchPartition) -> bool:
    if hosted.state is not None and replica_id in hosted.state.replicas:
        return True
    fail(
        result,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        f"broker {replica_id} is not a replica of {hosted.topic}-{hosted.partition}",
    )
    return False


def _fenced(
    hosted: HostedPartition, wanted: broker_pb2.FetchRequest.PartitionData, result: FetchPartition
) -> bool:
    """KIP-320: does the fetcher name another leader epoch than ours? Checked before anything
    is answered from the log (Kafka's order): a diverging epoch read from a leadership the
    fetcher does not know of is no answer to its log, and an "undefined" one (its last epoch
    above ours: this broker has not yet heard of a later leadership) would send a follower
    back to its high watermark, below records another leader acknowledged (KIP-101)."""
    refusal = leader_epoch_refusal(wanted, hosted.leader_epoch)
    if refusal is None:
        return False
    result.high_watermark = hosted.high_watermark
    result.log_start_offset = hosted.log.log_start_offset
    fail(result, *refusal)
    if refusal[0] == ErrorCode.FENCED_LEADER_EPOCH and hosted.leader_id >= 0:
        # KIP-951: the fetcher goes on at the leader named, with no metadata refresh.
        result.current_leader.leader_id = hosted.leader_id
        result.current_leader.leader_epoch = hosted.leader_epoch
    return True


def leader_epoch_refusal(
    wanted: WantedPartition | broker_pb2.ListOffsetsRequest.PartitionData, leader_epoch: int
) -> tuple[ErrorCode, str] | None:
    """KIP-320, for Fetch and ListOffsets: why a request naming another current leader epoch
    than `leader_epoch` is refused, or None. Unset or -1 is not checked (broker.proto): a
    client that knows no epoch says so with -1, as Kafka's do."""
    if not wanted.HasField("current_leader_epoch"):
        return None
    current = wanted.current_leader_epoch
    if current < 0 or current == leader_epoch:
        return None
    if current < leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH, f"leader epoch is {leader_epoch}: refresh metadata"
    return ErrorCode.UNKNOWN_LEADER_EPOCH, f"leader epoch is {leader_epoch}: refresh metadata"


def _diverged(
    hosted: HostedPartition, wanted: broker_pb2.FetchRequest.PartitionData, result: FetchPartition
) -> bool:
    """KIP-320: does the fetcher's log (its last fetched epoch) disagree with ours? If so the
    answer carries the epoch and end offset to truncate (a follower) or reset (a consumer) to."""
    if not wanted.HasField("last_fetched_epoch") or wanted.last_fetched_epoch < 0:
        return False
    epoch, end_offset = hosted.log.end_offset_for_epoch(wanted.last_fetched_epoch)
    if epoch == wanted.last_fetched_epoch and end_offset >= wanted.fetch_offset:
        return False
    result.diverging_epoch.leader_epoch = epoch
    result.diverging_epoch.end_offset = end_offset
    result.high_watermark = hosted.high_watermark
    result.log_start_offset = hosted.log.log_start_offset
    return True
