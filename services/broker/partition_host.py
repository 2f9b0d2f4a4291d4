"""The partitions one broker hosts: their logs on disk and their leadership state.

Theory of operation. The broker follows the metadata log; `metadata_diff.partition_changes`
turns each new image into actions, and `apply` carries them out here:

- BecomeLeader / BecomeFollower open (or create) the partition's log in
  `<data-dir>/<topic>-<partition>/` and record who leads at which leader epoch. Opening an
  existing directory recovers it (Log.open). Each directory holds a `topic_id` file: a directory
  left by a deleted topic of the same name (deleted while this broker was down) is wiped before
  the new topic's log is created there, and one holding records under an unreadable id is
  refused (partition_directory.py).
- StopReplica(delete) closes the log and removes its directory; UpdateConfig reopens nothing, it
  swaps the configuration the maintenance loop and appends use, and re-checks the high watermark
  and the waiting acks=all produces against a min.insync.replicas that may have changed.

Corruption at rest (the scrubber, services/broker/scrubber.py). A replica whose own log holds a
bad batch remembers where it went bad (`corrupt`, and on disk until the repair, so that a
restart does not forget it: corrupt_mark.py), stops fetching it, and asks the controller to take
it out of the ISR.
The scrubber finds it in closed segments; opening a log finds it in a durable segment that
failed its index check and its re-check (loading.py keeps that segment whole and the log
exposes the bad batch, `Log.corrupt_at_open`), and `_open` marks the replica the same way.
When that batch lost its framing in the active segment, the log end is unknown (it stops at the
bad batch, below records this replica may have acknowledged): `leader` then refuses every leader
request (LeadershipError.log_end_unknown), so no follower truncates to that end.
`repair_corrupt` truncates the log to that offset only once the applied metadata shows this
broker neither leading nor in the ISR (DESIGN §4: an ISR member with a shortened log could be
elected and lose acknowledged records); the replica fetcher, told at once (`on_repaired`),
then re-fetches from there and the leader's ISR upkeep lets it back in once caught up. A leader
forgets a follower's progress when the follower leaves the ISR, so only a fetch made after
leaving can bring it back.

Each hosted partition is a HostedPartition (hosted_partition.py): its log, its waiters and its
`PartitionReplica`. Every partition's leadership, ISR and high watermark live in that replica
(replica/partition_replica.py, pure: the rules, and the only code that changes them). On the leader,
`advance_high_watermark` moves the high watermark to the smallest log end offset over the ISR
(followers report theirs by the offset they fetch from), and not at all while the ISR is below
min.insync.replicas; a follower takes the leader's, kept within its own log (applied by the
follower's half, replica/follower_apply.py). Consumers never read above it. Appends and a moved high
watermark wake fetches waiting on the partition (`data_arrived`), so a long-poll answers as soon as
data is there instead of polling. The high watermarks of all hosted partitions live in one file per
data directory (high_watermark_checkpoint.py, Kafka's replication-offset-checkpoint), read once at
start and rewritten by `checkpoint_high_watermarks` — by the maintenance loop when some moved, at
once when one moves backwards (`repair_corrupt`), and by `close_all`."""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage, PartitionState
from samsa.services.broker import broker_metrics
from samsa.services.broker.hosted_partition import HostedPartition, LeadershipError
from samsa.services.broker.log.checkpoint_file import read_if_exists, write_atomically
from samsa.services.broker.log.checkpoint_format import CorruptCheckpointError
from samsa.services.broker.log.corrupt_mark import write_mark
from samsa.services.broker.log.log import Log
from samsa.services.broker.log.scrub import CorruptBatch
from samsa.services.broker.metadata.metadata_diff import (
    BecomeFollower,
    BecomeLeader,
    PartitionAction,
    StopReplica,
    UpdateConfig,
    changed_topics,
)
from samsa.services.broker.partition_directory import (
    TOPIC_ID_BYTES,
    TOPIC_ID_FILE,
    prepare_partition_directory,
    write_topic_id,
)
from samsa.services.broker.partition_log_config import log_config
from samsa.services.broker.record_trace import RecordTracer
from samsa.services.broker.replica.high_watermark_checkpoint import (
    HIGH_WATERMARK_CHECKPOINT_FILE,
    decode_high_watermarks,
    encode_high_watermarks,
)
from samsa.services.broker.replica.partition_replica import PartitionReplica
from samsa.services.broker.replica.replication import high_watermark_within
from samsa.services.broker.replica.replication_throttle import ReplicationThrottles

log = logging.getLogger(__name__)


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class PartitionHost:
    """Logs and leadership of every partition this broker holds a replica of."""

    def __init__(self, data_dir: Path, broker_id: int) -> None:
        self.data_dir = data_dir
        self.broker_id = broker_id
        # Set by the broker while tracing is on: makes the spans of traced records' journeys.
        self.record_tracer: RecordTracer | None = None
        self.partitions: dict[tuple[str, int], HostedPartition] = {}
        # The hosted partition numbers by topic (kept by _open and _stop): a metadata change
        # refreshes the partitions of the topics it changed without walking all the others.
        self.partitions_by_topic: dict[str, set[int]] = {}
        # Partitions marked corrupt (by mark_corrupt; a key stays until repair_corrupt finds it
        # repaired, stopped or re-opened): corruption is rare, so repair looks only at these.
        self.corrupt_partitions: set[tuple[str, int]] = set()
        # Told the partitions `repair_corrupt` truncated, at once (the broker sets it to the
        # replica fetchers'): their fetch sessions must name the new log end before the leader
        # reads the old one again, which it would count as this replica's progress.
        self.on_repaired: Callable[[list[tuple[str, int]]], None] | None = None
        self.image = MetadataImage.empty()
        # Partitions whose log, high watermark or leadership changed since the periodic work
        # (flush policy, high-watermark checkpoint) last looked: an idle partition costs nothing.
        self.changed: set[tuple[str, int]] = set()
        # Callbacks told of every change, by partition: the fetch sessions that hold it.
        self.watchers: dict[tuple[str, int], set[Callable[[tuple[str, int]], None]]] = {}
        # When each follower broker last fetched from this one (ms): a follower whose log end
        # matches an idle partition's stays caught up by fetching at all (fetch sessions name
        # idle partitions in no request; replication.LeaderReplication.proposed_isr).
        self.replica_fetch_ms: dict[int, int] = {}
        # Partitions a follower outside the ISR fetched: the ISR manager's next look (it may
        # rejoin). Filled by fetch.py, taken by isr_manager.py.
        self.isr_candidates: set[tuple[str, int]] = set()
        # The broker's instruments (no-ops while metrics are off): the produce and fetch paths
        # count through them, the maintenance loop refreshes their gauges (broker_metrics.py).
        self.metrics = broker_metrics.for_broker()
        self.throttles = ReplicationThrottles(broker_id)  # KIP-73's two quotas
        # The checkpointed high watermarks, read once; `_open` takes each partition's from here.
        self.high_watermarks_at_start = _read_high_watermarks(data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)

    def get(self, topic: str, partition: int) -> HostedPartition | None:
        return self.partitions.get((topic, partition))

    def leader(
        self, topic: str, partition: int, topic_id: bytes = b""
    ) -> HostedPartition | LeadershipError:
        """The partition if this broker leads it, else why not (and who does). With `topic_id`
        (KIP-516), a partition hosted, or a topic known, here under another id is refused
        (LeadershipError.unknown_topic_id), an id not 16 bytes long as malformed
        (LeadershipError.malformed_topic_id). Empty: not checked. A leader whose log end is
        unknown is refused too (LeadershipError.log_end_unknown)."""
        hosted = self.partitions.get((topic, partition))
        if topic_id:
            if len(topic_id) != TOPIC_ID_BYTES:
                return LeadershipError.malformed_topic_id(topic, topic_id, TOPIC_ID_BYTES)
            # The hosted partition's id, else the id of the topic in the image, else none.
            known = getattr(hosted or self.image.topics.get(topic), "topic_id", b"")
            if topic_id != known:
                return LeadershipError.unknown_topic_id(topic, topic_id, known, self.image)
        if hosted is not None and hosted.is_leader:
            if hosted.log.log_end_unknown:
                return LeadershipError.log_end_unknown(hosted)
            return hosted
        image_topic = self.image.topics.get(topic)
        state = None if image_topic is None else image_topic.partitions.get(partition)
        if state is None:
            return LeadershipError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"{topic}-{partition} does not exist (as of metadata offset "
                f"{self.image.end_offset})",
                -1,
                -1,
            )
        return LeadershipError(
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"broker {self.broker_id} does not lead {topic}-{partition}; its leader is "
            f"{state.leader} (epoch {state.leader_epoch})",
            state.leader,
            state.leader_epoch,
        )

    def apply(self, image: MetadataImage, actions: Iterable[PartitionAction], now_ms: int) -> None:
        """Carry out the actions that take this broker from the previous image to `image`, then
        refresh the partitions of the topics that changed and those the actions lead or follow.
        The broker applies a large change as several calls with the same `image`, a slice of
        its actions each (broker.py): the first refreshes every changed partition hosted then,
        each later one only the partitions its own actions name."""
        previous = self.image
        # A later slice of the same change: nothing differs (and walking every topic name
        # again per slice cost a cluster of 10,000 topics a second per change).
        topics = set() if previous is image else changed_topics(previous, image)
        self.image = image
        named: set[tuple[str, int]] = set()
        for action in actions:
            key = (action.topic, action.partition)
            if isinstance(action, StopReplica):
                self._stop(key, delete=action.delete)
            elif isinstance(action, BecomeLeader | BecomeFollower):
                named.add(key)
                hosted = self.partitions.get(key) or self._open(action, now_ms)
                self._configure(hosted, action.configs)
                if isinstance(action, BecomeLeader):
                    hosted.replica.become_leader(
                        action.leader_epoch, self._state_of(key), hosted.log.log_end_offset, now_ms
                    )
                    hosted.log.start_leader_epoch(action.leader_epoch)
                else:
                    hosted.replica.become_follower(
                        action.leader_id, action.leader_epoch, self._state_of(key)
                    )
                log.info(
                    "partition leadership",
                    extra={
                        "partition": f"{action.topic}-{action.partition}",
                        "leader": hosted.leader_id,
                        "leader_epoch": hosted.leader_epoch,
                    },
                )
                hosted.notify_appended()  # waiting fetches re-check who leads
            elif isinstance(action, UpdateConfig) and key in self.partitions:
                hosted = self.partitions[key]
                self._configure(hosted, action.configs)
                # min.insync.replicas may have changed, and nothing else re-checks it on an idle
                # partition: lowered, the high watermark may move now; raised above the ISR,
                # waiting acks=all produces are over (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
                if not hosted.advance_high_watermark():
                    hosted.notify_appended()
        self._refresh_states(topics, previous, named)
        self.repair_corrupt()

    def _refresh_states(
        self,
        topics: Iterable[str],
        previous: MetadataImage,
        named: Iterable[tuple[str, int]] = (),
    ) -> None:
        """Take the hosted partitions of `topics` to their state in the image (ISR and partition
        epoch changes), and the `named` ones (just led or followed) too: a replica that left the
        ISR must fetch again to rejoin (see the module doc), and a smaller ISR, or a new leader
        whose ISR is itself alone, may let the high watermark move (Kafka's makeLeader moves it:
        nothing else does on an idle partition). Every other topic is the same object as in the
        previous image (replay shares unchanged topics, and a changed topic's unchanged
        partitions), so a metadata batch costs the partitions it changed: a controlled shutdown
        moving 5,000 leaderships in many batches refreshed all 5,000 on each."""
        refreshed: set[tuple[str, int]] = set()
        for topic in sorted(topics):
            before = previous.topics.get(topic)
            before_states = {} if before is None else before.partitions
            for partition in sorted(self.partitions_by_topic.get(topic, ())):
                key = (topic, partition)
                hosted = self.partitions.get(key)
                if hosted is None:  # close_all emptied the host
                    continue
                state = self._state_of(key)
                if state is not None and state is hosted.state is before_states.get(partition):
                    continue  # untouched by the batch (replay shares unchanged partitions)
                refreshed.add(key)
                hosted.replica.state_changed(state)
                hosted.advance_high_watermark()
        for key in sorted(set(named) - refreshed):
            hosted = self.partitions.get(key)
            if hosted is not None:
                hosted.replica.state_changed(self._state_of(key))
                hosted.advance_high_watermark()

    def mark_corrupt(self, hosted: HostedPartition, corrupt: CorruptBatch) -> bool:
        """Remember where this replica's log went bad, on disk too (corrupt_mark.py: a restart
        must not forget it); True when that is news."""
        if hosted.corrupt is not None and hosted.corrupt.offset <= corrupt.offset:
            return False
        hosted.corrupt = corrupt
        self.corrupt_partitions.add((hosted.topic, hosted.partition))
        if corrupt != hosted.log.corrupt_at_open:  # that one the open wrote
            write_mark(hosted.log.directory, corrupt)
        return True

    def repair_corrupt(self) -> list[tuple[str, int]]:
        """Truncate every corrupt replica the applied metadata has taken out of the ISR, the
        eligible leader replicas and the leadership to where its corruption starts; the
        partitions truncated, also told to `on_repaired`. (An eligible replica may be elected
        cleanly: truncated while still one, it could lead without records it had
        acknowledged.)"""
        repaired = []
        for key in sorted(self.corrupt_partitions):
            hosted = self.partitions.get(key)
            if hosted is None or hosted.corrupt is None:  # stopped, re-opened or reset since
                self.corrupt_partitions.discard(key)
                continue
            state = hosted.state
            if hosted.is_leader or state is None or self.broker_id in (*state.isr, *state.elr):
                continue
            self.corrupt_partitions.discard(key)
            corrupt, hosted.corrupt = hosted.corrupt, None
            offset = corrupt.offset
            log_end_offset = hosted.log.truncate_at_batch(
                corrupt.segment_base_offset, corrupt.segment_size_bytes, corrupt.position
            )
            if log_end_offset is None:  # rewritten or deleted since: the next pass re-checks it
                log.info("corrupt segment gone", extra={"partition": f"{key[0]}-{key[1]}"})
                continue
            hosted.log_changed()  # the high watermark kept within the log, and told to it
            if hosted.high_watermark_unsaved:  # moved back: a restart must not start above it
                self.checkpoint_high_watermarks()
            log.warning(
                "corrupt replica truncated: re-fetching from the leader",
                extra={
                    "partition": f"{key[0]}-{key[1]}",
                    "corrupt_from": offset,
                    "log_end_offset": hosted.log.log_end_offset,
                    "leader": hosted.leader_id,
                },
            )
            hosted.notify_appended()
            repaired.append(key)
        if repaired and self.on_repaired is not None:
            self.on_repaired(repaired)
        return repaired

    def _state_of(self, key: tuple[str, int]) -> PartitionState | None:
        topic = self.image.topics.get(key[0])
        return None if topic is None else topic.partitions.get(key[1])

    @staticmethod
    def _configure(hosted: HostedPartition, configs: Mapping[str, str]) -> None:
        hosted.topic_configs = dict(configs)
        hosted.config = log_config(configs, hosted.topic)
        hosted.log.reconfigure(hosted.config)

    def _open(self, action: BecomeLeader | BecomeFollower, now_ms: int) -> HostedPartition:
        directory = self.data_dir / partition_dir_name(action.topic, action.partition)
        created = prepare_partition_directory(directory, action.topic_id)
        config = log_config(action.configs, action.topic)
        # A missing entry means 0, as the file would say if it held one. The log settles the
        # transactions ended below it (those above still hold the LSO after a restart).
        checkpointed = self.high_watermarks_at_start.pop((action.topic, action.partition), 0)
        partition_log = Log.open(directory, config, now_ms=now_ms, high_watermark=checkpointed)
        if created:
            write_topic_id(directory, action.topic_id)
        if created or partition_log.size_bytes() == 0:  # perhaps never fsynced: a new log's
            # id is durable before its first flushed record (partition_directory.py)
            partition_log.sync_before_records(directory / TOPIC_ID_FILE)
        hosted = HostedPartition(
            topic=action.topic,
            partition=action.partition,
            topic_id=action.topic_id,
            log=partition_log,
            config=config,
            replica=PartitionReplica(
                self.broker_id,
                # The checkpoint may predate a DeleteRecords that moved the log start above it,
                # or a crash that lost the log's tail.
                high_watermark=high_watermark_within(
                    checkpointed, partition_log.log_start_offset, partition_log.log_end_offset
                ),
            ),
            data_arrived=asyncio.Event(),
            on_change=self._partition_changed,
            checkpointed_high_watermark=checkpointed,
        )
        self.partitions[(action.topic, action.partition)] = hosted
        self.partitions_by_topic.setdefault(action.topic, set()).add(action.partition)
        if partition_log.corrupt_at_open is not None:  # a durable segment found bad, kept
            self.mark_corrupt(hosted, partition_log.corrupt_at_open)
        return hosted

    def partitions_of(self, topics: Iterable[str]) -> set[tuple[str, int]]:
        """The hosted partitions of `topics`."""
        return {
            (topic, partition)
            for topic in topics
            for partition in self.partitions_by_topic.get(topic, ())
        }

    def _partition_changed(self, hosted: HostedPartition) -> None:
        key = (hosted.topic, hosted.partition)
        self.changed.add(key)
        for wake in tuple(self.watchers.get(key, ())):
            wake(key)

    def watch(self, key: tuple[str, int], wake: Callable[[tuple[str, int]], None]) -> None:
        """Call `wake(key)` whenever the partition changes, until `unwatch`."""
        self.watchers.setdefault(key, set()).add(wake)

    def unwatch(self, key: tuple[str, int], wake: Callable[[tuple[str, int]], None]) -> None:
        wakes = self.watchers.get(key)
        if wakes is not None:
            wakes.discard(wake)
            if not wakes:
                del self.watchers[key]

    def _stop(self, key: tuple[str, int], *, delete: bool) -> None:
        hosted = self.partitions.pop(key, None)
        if hosted is not None:
            numbers = self.partitions_by_topic[key[0]]
            numbers.discard(key[1])
            if not numbers:
                del self.partitions_by_topic[key[0]]
            hosted.log.close()
            hosted.stop()  # a write waiting on it is refused at once, not at its timeout
        if delete:
            directory = self.data_dir / partition_dir_name(*key)
            shutil.rmtree(directory, ignore_errors=True)
            log.info("partition deleted", extra={"partition": f"{key[0]}-{key[1]}"})

    def remove_strays(self) -> list[str]:
        """Delete partition directories this broker no longer hosts (topics deleted while it
        was down); call once the first full image has been applied."""
        hosted = {partition_dir_name(*key) for key in self.partitions}
        removed = []
        for directory in sorted(self.data_dir.iterdir()):
            is_partition = directory.is_dir() and (directory / TOPIC_ID_FILE).exists()
            if is_partition and directory.name not in hosted:
                shutil.rmtree(directory, ignore_errors=True)
                removed.append(directory.name)
        return removed

    def checkpoint_high_watermarks(self) -> None:
        """Rewrite the data directory's high-watermark checkpoint with every hosted partition's
        high watermark: one atomic write (an fsync of the file and one of the directory), so
        callers call it once per batch of changes, not per partition."""
        high_watermarks = {key: hosted.high_watermark for key, hosted in self.partitions.items()}
        write_atomically(
            self.data_dir / HIGH_WATERMARK_CHECKPOINT_FILE, encode_high_watermarks(high_watermarks)
        )
        for hosted in self.partitions.values():
            hosted.checkpointed_high_watermark = hosted.high_watermark

    def close_all(self) -> None:
        """Write the high-watermark checkpoint once (if any moved), then close every log."""
        if any(hosted.high_watermark_unsaved for hosted in self.partitions.values()):
            self.checkpoint_high_watermarks()
        for hosted in self.partitions.values():
            hosted.log.close()
        self.partitions.clear()


def _read_high_watermarks(data_dir: Path) -> dict[tuple[str, int], int]:
    """The checkpointed high watermarks by partition; none when the file is missing or
    unreadable (every partition then starts at 0, which is safe: it only moves up)."""
    data = read_if_exists(data_dir / HIGH_WATERMARK_CHECKPOINT_FILE)
    if data is None:
        return {}
    try:
        return decode_high_watermarks(data)
    except CorruptCheckpointError as error:
        log.warning(
            "unreadable high watermark checkpoint: every partition starts at 0",
            extra={"dir": str(data_dir), "reason": str(error)},
        )
        return {}
