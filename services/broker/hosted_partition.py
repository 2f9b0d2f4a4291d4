"""One partition as its broker hosts it: its log, the waiters on it, and its replication state.

Theory of operation. A HostedPartition bundles what the request handlers need for one partition:
the Log, the topic's log config and configs, the `PartitionReplica` (replica/partition_replica.py,
pure: every change of leadership, ISR or high watermark goes through it, and this class only shows
its state read-only), and `data_arrived`, the event that wakes long-polling fetches and acks=all
produces when data or the high watermark moves. PartitionHost (partition_host.py) creates and
removes them as the metadata log says; `LeadershipError` is its answer when a request names a
partition this broker cannot serve.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage, PartitionState
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.log import Log
from samsa.services.broker.log.scrub import CorruptBatch
from samsa.services.broker.record_trace import PartitionTraces
from samsa.services.broker.replica.partition_replica import PartitionReplica


class LeadershipError(NamedTuple):
    """Why a request for a partition cannot be served here, with the leader to go to."""

    code: ErrorCode
    message: str
    leader_id: int
    leader_epoch: int

    @classmethod
    def unknown_topic_id(
        cls, topic: str, asked_id: bytes, known_id: bytes, image: MetadataImage
    ) -> LeadershipError:
        """KIP-516: a request named `topic` by `asked_id`, and this broker holds it as
        `known_id` (empty: no topic of that name): the topic was deleted and created again
        under the same name, and this broker or the client is behind on metadata. Both ids in
        hex (broker.proto); no leader to name, the client refreshes its metadata."""
        here = f"topic id {known_id.hex()}" if known_id else "no topic of that name"
        return cls(
            ErrorCode.UNKNOWN_TOPIC_ID,
            f"{topic}: the request names topic id {asked_id.hex()}, this broker has {here} (as "
            f"of metadata offset {image.end_offset}): was the topic deleted and created again? "
            "Refresh metadata",
            -1,
            -1,
        )

    @classmethod
    def malformed_topic_id(cls, topic: str, asked_id: bytes, id_bytes: int) -> LeadershipError:
        """A request named `topic` by an id that is not `id_bytes` long: no topic has it, and no
        metadata refresh makes it one, so it is the request's fault (INVALID_REQUEST, not
        retriable), not UNKNOWN_TOPIC_ID, which a client retries after a refresh."""
        return cls(
            ErrorCode.INVALID_REQUEST,
            f"{topic}: the request's topic_id has {len(asked_id)} bytes; a topic id is "
            f"{id_bytes} (the metadata's topic_id, a UUID): send it as the metadata shows it, "
            "or leave it empty",
            -1,
            -1,
        )

    @classmethod
    def log_end_unknown(cls, hosted: HostedPartition) -> LeadershipError:
        """This broker leads the partition, but its log's end is unknown (bytes past a bad batch
        of its active segment no frame bounds, kept at open: segment_loading.py), so its log end
        offset may lie below records it acknowledged. As a Kafka log directory taken offline by
        a KafkaStorageException, it serves no leader request (KAFKA_STORAGE_ERROR, retriable, no
        leader named): a follower answered from that end (a diverging epoch, OFFSET_OUT_OF_RANGE
        with a high watermark kept within it) would truncate acknowledged records. It is marked
        corrupt, and the scrubber asks the controller to elect another leader."""
        return cls(
            ErrorCode.KAFKA_STORAGE_ERROR,
            f"{hosted.topic}-{hosted.partition}: this leader's log end is unknown (the records "
            f"from offset {hosted.log.log_end_offset} are corrupt at rest): it serves no leader "
            f"request until another replica leads; refresh metadata",
            -1,
            -1,
        )

    def refuse(self, result: Any) -> None:
        """Write this refusal into one partition's result (of Produce, Fetch, DeleteRecords or
        WriteTxnMarkers: each has error_code, error_message and current_leader), with the
        leader to retry at when this broker knows one (KIP-951)."""
        result.error_code = self.code
        result.error_message = self.message
        if self.leader_id >= 0:
            result.current_leader.leader_id = self.leader_id
            result.current_leader.leader_epoch = self.leader_epoch


@dataclass
class HostedPartition:
    """One partition's log and waiters, and its replication state (`replica`, pure: every
    change of leadership, ISR or high watermark goes through it)."""

    topic: str
    partition: int
    topic_id: bytes
    log: Log
    config: LogConfig
    replica: PartitionReplica
    data_arrived: asyncio.Event
    # Called by notify_appended: the host's record of what changed (see PartitionHost.changed).
    on_change: Callable[[HostedPartition], None] | None = None
    topic_configs: Mapping[str, str] = field(default_factory=dict)
    # The high watermark the data directory's checkpoint file holds for it (-1: none yet).
    checkpointed_high_watermark: int = -1
    # Where this replica's own log failed its scrub, until the log is truncated there; None
    # when nothing is known corrupt.
    corrupt: CorruptBatch | None = None
    # The traced batches whose later steps still get spans (record_trace.py); None until a
    # traced produce arrives, and always while tracing is off.
    traced: PartitionTraces | None = None

    def __post_init__(self) -> None:
        # The log learns the high watermark it starts with (a checkpoint's, at load): what a
        # replay found below it is settled before anyone reads the LSO.
        self.log.on_high_watermark(self.replica.high_watermark)

    @property
    def corrupt_from(self) -> int | None:
        """The offset this replica's log is known corrupt from, if any."""
        return None if self.corrupt is None else self.corrupt.offset

    @property
    def min_insync_replicas(self) -> int:
        return int(self.topic_configs.get("min.insync.replicas", "1"))

    # Read-only views of the replica's state, which only PartitionReplica's events change.
    @property
    def high_watermark(self) -> int:
        return self.replica.high_watermark

    @property
    def high_watermark_caught_up(self) -> bool:
        """Leader: whether the high watermark has reached the log end at which this leader's
        epoch began. Until then it is the one this replica had as a follower, which may lag the
        previous leader's, so an end offset read from it could go backwards (Kafka answers
        ListOffsets OFFSET_NOT_AVAILABLE meanwhile)."""
        return self.replica.high_watermark >= self.replica.epoch_start_offset

    @property
    def is_leader(self) -> bool:
        return self.replica.is_leader

    @property
    def leader_id(self) -> int:
        return self.replica.leader_id

    @property
    def leader_epoch(self) -> int:
        return self.replica.leader_epoch

    @property
    def state(self) -> PartitionState | None:
        return self.replica.state

    @property
    def isr(self) -> tuple[int, ...]:
        return self.replica.isr

    @property
    def replica_count(self) -> int:
        """The replicas the ISR should hold: those being added by a reassignment (KIP-455) do
        not count until it completes, as in Kafka (OngoingReassignmentState.replicationFactor),
        so a move alone does not show the partition under-replicated."""
        if self.state is None:
            return 0
        return len(self.state.replicas) - len(self.state.adding)

    @property
    def producer_count(self) -> int:
        return self.log.producer_count

    def notify_appended(self) -> None:
        """Wake every fetch and acks=all produce waiting on this partition, and tell the host
        (its periodic work and its fetch sessions look only at partitions that changed)."""
        self.data_arrived.set()
        self.data_arrived = asyncio.Event()
        if self.on_change is not None:
            self.on_change(self)

    def stop(self) -> None:
        """The host stops hosting the partition (StopReplica: deleted, or moved off this
        broker): no longer its leader or follower, and every waiter woken to see it, so an
        acks=all write waiting on it is refused at once instead of timing out."""
        self.replica.stop()
        self.notify_appended()

    def on_leader_append(self) -> None:
        """After an append as leader: move the high watermark if the ISR allows (RF=1: at once)
        and wake every waiter once; `advance_high_watermark` wakes them itself when it moved."""
        if not self.advance_high_watermark():
            self.notify_appended()

    def advance_high_watermark(self) -> bool:
        """Leader: move the high watermark by the ISR's progress; wakes waiters if it moved.
        Each move is told to the log, which settles the transactions it passed (so do the
        follower's and a truncation's: `take_leader_high_watermark`, `log_changed`)."""
        moved = self.replica.advance_high_watermark(
            self.log.log_end_offset, self.min_insync_replicas
        )
        if moved:
            self.log.on_high_watermark(self.replica.high_watermark)
            self.notify_appended()
            if self.traced is not None:
                self.traced.high_watermark_moved(self.high_watermark)
        return moved

    def take_leader_high_watermark(self, leader_high_watermark: int) -> bool:
        """Follower: the leader's high watermark, kept within this replica's log; True if it
        moved (the caller wakes the waiters)."""
        log = self.log
        moved = self.replica.take_leader_high_watermark(
            leader_high_watermark, log.log_start_offset, log.log_end_offset
        )
        if moved:
            log.on_high_watermark(self.replica.high_watermark)
        return moved

    def log_changed(self) -> None:
        """After a truncation or a new log start: the high watermark kept within the log and
        told to it, moved or not (the replay that rebuilt the log's transactions may have
        brought back some it passed), and every waiter woken (a follower's next fetch asks
        from the new log end)."""
        self.replica.log_changed(self.log.log_start_offset, self.log.log_end_offset)
        self.log.on_high_watermark(self.replica.high_watermark)
        if self.traced is not None:  # a traced batch cut away gets no later span
            self.traced.truncated(self.log.log_end_offset)
        self.notify_appended()

    @property
    def high_watermark_unsaved(self) -> bool:
        """The high watermark moved since the checkpoint file was last written."""
        return self.high_watermark != self.checkpointed_high_watermark
