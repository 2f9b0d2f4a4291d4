"""What a fetch's answer, or its failure, does to the consumer's partition table.

Theory of operation. The fetch state (fetch_state.py) sends at most one fetch per broker and
remembers, per broker, the fetch offset it asked of each partition (`InFlight`). An answer is read
only for the partitions still fetched from that offset: one sought, reset or unassigned since the
fetch was sent is left out of the fetch in flight (the fetch state's `_drop`), so the answer for
its old offset is ignored. So is one whose new offset the request limit left out of the fetch: the
broker's session reads it at the old offset (fetch_sessions.py's `answered_at`). Each partition's
result is, in this order of precedence:
- an error: OFFSET_OUT_OF_RANGE from the leader resets the partition per `auto.offset.reset` (a
  reset due at once: offset_resets.py), or with `none` is an error `poll()` raises; from a read
  replica (which may only lag) it sends the partition back to the leader at the same offset;
  the errors that mean a leader moved or cannot serve for now (RETRY_AFTER_REFRESH) ask for a
  metadata refresh, and the partition is fetched again from its new leader (at once, and the
  leader the answer names, KIP-951, goes back to the driver), or from the same broker after
  retry.backoff.ms (fetch_state.py); any other is raised by `poll()` (TOPIC_AUTHORIZATION_FAILED,
  the ACLs refusing that partition's topic, as the AuthorizationError naming it, while the other
  partitions of the answer are read as ever: Kafka's TopicAuthorizationException). Every error
  sends the partition back to its leader rather than a read replica;
- a diverging epoch (KIP-320): the leader's log no longer holds what we read (an unclean leader
  election truncated it), so the partition goes back to where the logs agree, or is reset when
  the leader does not say where; with auto.offset.reset=none it is an error `poll()` raises;
- a preferred read replica (KIP-392): the partition is fetched from that replica from then on
  (until an error, a failed fetch from it, another leader, or READ_REPLICA_MAX_AGE_MS:
  fetch_state.py);
- records: decoded (consumer_records.py) and buffered for `poll()`; the fetch offset moves past
  them. A corrupt batch ends what is buffered: fetched again once the records before it were
  taken, it fails alone, an error `poll()` raises. Batches that hide all their records (markers,
  aborted records) move the position too, so that a commit moves past them.

`on_fetch_answer(...)` -> AnswerEffects: refresh the metadata (a leader moved), and whether records
`poll()` can take were buffered (then the driver fetches again only once `poll()` took them, as
the consumer always did; otherwise at once). `on_fetch_failed`: a fetch that failed or could not
be sent starts its broker's session over, and the broker is not fetched from again for
FETCH_RETRY_BACKOFF_MS. Pure: no I/O, no clock (the driver passes `now_ms`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import NamedTuple

from samsa.client.config import ConsumerConfig
from samsa.client.consumer_records import decode_records
from samsa.client.errors import AuthorizationError, KafkaError
from samsa.client.fetch_partitions import Buffered, InFlight, Partition, TopicPartition
from samsa.client.fetch_sessions import BrokerFetchSessions
from samsa.client.offset_resets import NO_RESET, OffsetResets
from samsa.common.errors import CorruptRecordError, ErrorCode, OffsetOutOfRangeError
from samsa.v1 import broker_pb2

log = logging.getLogger(__name__)

# After a fetch from a broker failed, that broker is not fetched from again for this long (the
# consumer used to sleep this long in poll()).
FETCH_RETRY_BACKOFF_MS = 50

# Fetch errors after which the partition is fetched again once the metadata is refreshed: its
# leader moved, or the broker cannot serve it for now (a failed disk, whose partitions the
# controller moves; a leader that does not know its high watermark yet), as Kafka's consumer
# retries them. From the broker that answered, only after retry.backoff.ms (fetch_state.py).
RETRY_AFTER_REFRESH = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_ID,  # deleted and created again: the refresh shows the new id
    }
)


class AnswerEffects(NamedTuple):
    """What `on_fetch_answer` asks of the driver."""

    metadata_stale: bool  # a leader moved: refresh the metadata
    records_ready: bool  # records poll() can take were buffered: fetch again after it took them
    # (tp, leader id, leader epoch) the broker named with its refusal (KIP-951 current_leader):
    # the driver writes them into its metadata, so the partition goes there with no refresh.
    new_leaders: tuple[tuple[TopicPartition, int, int], ...] = ()


NO_EFFECTS = AnswerEffects(False, False)


class FetchAnswers:
    """Fetch answers and failures into the fetch state's tables (see the module doc).

    The fetch state owns the tables and shares them: the partitions, the errors `poll()` raises,
    the fetches in flight, the brokers' backoffs and fetch sessions, and the resets; `drop` is its
    `_drop`, which forgets what a partition had fetched."""

    def __init__(
        self,
        config: ConsumerConfig,
        *,
        partitions: dict[TopicPartition, Partition],
        errors: dict[TopicPartition, Exception],
        in_flight: dict[int, InFlight],
        backoff_until_ms: dict[int, int],
        sessions: BrokerFetchSessions,
        resets: OffsetResets,
        drop: Callable[[TopicPartition], None],
    ) -> None:
        self._config = config
        self._partitions = partitions
        self._errors = errors
        self._in_flight = in_flight
        self._backoff_until_ms = backoff_until_ms
        self._sessions = sessions
        self._resets = resets
        self._drop = drop

    def on_fetch_failed(
        self, node: int, now_ms: int, refused: AuthorizationError | None = None
    ) -> None:
        """The fetch to `node` failed or could not be sent: start its session over, back off,
        and read from leaders rather than from `node` as a preferred read replica. `refused`:
        the ACLs refused it (its topic, or whatever it asked), which the next poll() raises for
        the partitions it asked (Kafka's consumer throws from poll)."""
        in_flight = self._in_flight.pop(node, None)
        if refused is not None and in_flight is not None:
            self.on_refused(refused, in_flight.offsets)
        self._sessions.on_failure(node)
        self._backoff_until_ms[node] = now_ms + FETCH_RETRY_BACKOFF_MS
        for partition in self._partitions.values():
            if partition.read_replica == node:
                partition.read_replica = None

    def on_refused(
        self, refused: AuthorizationError, asked: Iterable[TopicPartition] | None = None
    ) -> None:
        """The ACLs refused the partitions `asked` (None: every assigned one) of its topic (all of
        them when it names none): the next poll() raises it (then they are asked again)."""
        topic = refused.topic
        for tp in self._partitions if asked is None else asked:
            if topic is None or tp[0] == topic:
                self._errors[tp] = refused

    def on_fetch_answer(self, node: int, response: broker_pb2.FetchResponse) -> AnswerEffects:
        """Apply a fetch answer. When it buffered records poll() can take, the next fetch to
        `node` waits until poll() took them (as it always did): sent now, a long poll for the
        partitions that had nothing would hold the node's one fetch slot meanwhile."""
        in_flight = self._in_flight.pop(node, None)
        if in_flight is None:
            return NO_EFFECTS
        self._backoff_until_ms.pop(node, None)
        offsets = in_flight.offsets
        if not self._sessions.on_answer(node, in_flight.parts, response):
            log.info("fetch session with broker %d: %s", node, response.error_message)
            return NO_EFFECTS
        stale = False
        ready = False
        new_leaders: list[tuple[TopicPartition, int, int]] = []
        for topic in response.topics:
            for result in topic.partitions:
                tp = (topic.name, result.partition)
                asked = offsets.get(tp)
                partition = self._partitions.get(tp)
                if asked is None or partition is None or partition.fetch_offset != asked:
                    continue  # sought or unassigned since the fetch was sent
                if result.error_code != ErrorCode.NONE:
                    stale = self._on_partition_error(tp, partition, result, node) or stale
                    if result.HasField("current_leader") and result.current_leader.leader_id >= 0:
                        leader = result.current_leader
                        new_leaders.append((tp, leader.leader_id, leader.leader_epoch))
                elif result.HasField("diverging_epoch"):
                    self._on_truncation(tp, partition, result.diverging_epoch)
                elif result.HasField("preferred_read_replica"):
                    partition.read_replica = result.preferred_read_replica
                    partition.read_replica_leader = node
                    partition.read_replica_until_ms = None  # aged from the next planning
                elif self._on_records(tp, partition, result, asked):
                    ready = ready or not partition.paused
        return AnswerEffects(stale, ready, tuple(new_leaders))

    def _on_records(
        self,
        tp: TopicPartition,
        partition: Partition,
        result: broker_pb2.FetchResponse.PartitionResponse,
        asked: int,
    ) -> bool:
        """Buffer the records of one partition's answer; True when there were some."""
        records = result.records  # read once: each read of a bytes field copies it
        leader_epoch = -1
        if records:
            try:
                aborted = [(a.producer_id, a.first_offset) for a in result.aborted_transactions]
                decoded, leader_epoch, corrupt_at = decode_records(tp, records, asked, aborted)
            except CorruptRecordError as error:
                self._errors[tp] = error
                self._sessions.refetch(tp)  # fetched again, it fails again
                return False
            if decoded:
                partition.fetch_offset = (
                    corrupt_at  # fetched again, it fails alone once these are polled
                    if corrupt_at is not None
                    else max(decoded[-1].offset + 1, result.next_fetch_offset)
                )
                partition.buffers.append(Buffered(decoded, leader_epoch, partition.fetch_offset))
                return True
        if result.next_fetch_offset > asked:
            partition.fetch_offset = result.next_fetch_offset
            if not partition.buffers:
                # Everything fetched was hidden (markers, aborted records): consumed, as in
                # Kafka, so that the position and a commit move past it.
                partition.position = result.next_fetch_offset
                # The epoch ending at the new fetch offset (KIP-320); none known when the answer
                # skipped ahead without a batch (an epoch may have begun in the gap).
                partition.leader_epoch = leader_epoch
        return False

    def _on_truncation(
        self,
        tp: TopicPartition,
        partition: Partition,
        diverging: broker_pb2.FetchResponse.EpochEndOffset,
    ) -> None:
        """The leader's log no longer holds what we read past `end_offset` (an unclean leader
        election truncated it): go back there rather than silently skipping what replaced it."""
        end_offset = diverging.end_offset
        self._sessions.refetch(tp)  # fetched again, at the same offset with `none`
        position = partition.position
        if position is None:  # a reset is pending: it decides where to start
            return
        if end_offset >= position:
            # The leader's log reaches our position under an epoch we did not name (ours began
            # later there, or never became its): no truncation, as Kafka's consumer judges it
            # (SubscriptionState.maybeCompleteValidation). The next fetch names its epoch.
            partition.leader_epoch = diverging.leader_epoch
            return
        if self._config.auto_offset_reset == "none":
            self._errors[tp] = OffsetOutOfRangeError(
                f"log truncation detected on {tp[0]}-{tp[1]}: the leader's log ends epoch "
                f"{diverging.leader_epoch} at {end_offset}, below what this consumer read"
            )
            return
        log.warning(
            "log truncation detected on %s-%d: resetting to offset %d", tp[0], tp[1], end_offset
        )
        self._drop(tp)
        if end_offset < 0:
            self._resets.set_reset(tp, self._resets.default_reset(), due=True)
        else:
            partition.position = partition.fetch_offset = min(end_offset, position)
            # The epoch the leader's log holds there, sent with the next fetch as Kafka's
            # consumer keeps it: a second truncation (another unclean election) is seen too.
            partition.leader_epoch = diverging.leader_epoch

    def _on_partition_error(
        self,
        tp: TopicPartition,
        partition: Partition,
        result: broker_pb2.FetchResponse.PartitionResponse,
        node: int,
    ) -> bool:
        """True when the metadata is stale."""
        code = result.error_code
        # Fetched again (at the leader, or once poll() raised the error), the partition is
        # named: the broker answered this error as news and would not look at it again.
        self._sessions.refetch(tp)
        had_replica = partition.read_replica is not None
        partition.read_replica = None  # back to the leader, which may name another
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if had_replica:
                # A follower may lag (its log ends below our offset) or have a higher log
                # start: only the leader says whether the offset is out of range. Ask it at the
                # same offset, as Kafka's consumer does (KIP-392).
                log.debug("%s-%d: out of range at a read replica, asking the leader", *tp)
                return False
            spec = self._resets.default_reset()
            if spec == NO_RESET:
                self._errors[tp] = OffsetOutOfRangeError(
                    f"offset {partition.fetch_offset} of {tp[0]}-{tp[1]} is out of range and "
                    "auto.offset.reset=none"
                )
            else:
                self._drop(tp)
                self._resets.set_reset(tp, spec, due=True)
            return False
        if code in RETRY_AFTER_REFRESH:
            partition.refused_by = node  # not asked again at once while it leads (fetch_state)
            partition.retry_at_ms = None
            return True
        if code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:  # per partition, as Kafka's Fetch
            message = result.error_message or f"{tp[0]}: TOPIC_AUTHORIZATION_FAILED"
            self._errors[tp] = AuthorizationError(message, ErrorCode(code), f"topic:{tp[0]}")
            return False
        self._errors[tp] = KafkaError.of(code, result.error_message)
        return False
