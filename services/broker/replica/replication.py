"""The leader's view of its followers: their progress, what the high watermark may rise to, and
ISR decisions. Pure (time comes in as `now_ms`); one `LeaderReplication` per partition this broker
leads, held by its `PartitionReplica` (partition_replica.py), which keeps the high watermark.
Kafka's rules (DESIGN §4):

- A follower reports its log end offset by the offset it fetches from. It is *caught up* at a
  fetch if it asked for the leader's log end offset, or for at least what the leader's log end
  offset was at its previous fetch (it has everything that existed then): Kafka's
  lastCaughtUpTime.
- High watermark = the smallest log end offset over the ISR (the leader's own included). It only
  moves forward, and not at all while the ISR is smaller than `min.insync.replicas`.
- Low watermark = the smallest log start offset over the ISR, as the followers' fetches report
  it: a DeleteRecords is complete when it reaches the deleted offset.
- A follower that holds the whole log stays caught up while it fetches anything from this broker:
  fetch sessions leave idle partitions out of its requests. For the same reason, the first read
  of a partition after the leader's log grew past such a follower counts its previous fetch
  (of any partition) as caught up, as Kafka's, which reads every session partition on every
  fetch, would have: that fetch did not read the partition, so it had not grown yet.
- A follower leaves the ISR after `replica.lag.time.max.ms` without catching up; one outside it
  rejoins once its log end offset reaches the high watermark and the start of the current
  leader epoch (so it holds everything this leader committed), by fetches read while its
  current registration (broker epoch) was the one in this leader's metadata: a follower that
  restarted may have lost the tail it had not flushed, so what its previous incarnation fetched
  proves nothing (Kafka's KIP-903). The leader only *proposes* these changes (AlterPartition);
  they are true once the controller commits them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass
class FollowerProgress:
    """What the leader knows about one follower since it became leader."""

    log_end_offset: int
    last_caught_up_ms: int
    last_fetch_ms: int = -1
    leader_end_at_last_fetch: int = -1
    log_start_offset: int = -1  # as its fetches report it; -1 until one does
    # The follower's broker epoch in this leader's metadata when its last fetch was read (-1:
    # unknown): its registration, which a restart renews.
    broker_epoch: int = -1


class LeaderReplication:
    """Follower progress of one partition this broker leads (the high watermark it yields is
    kept by partition_replica.PartitionReplica)."""

    def __init__(self, *, leader_id: int, replicas: Sequence[int], now_ms: int) -> None:
        self.leader_id = leader_id
        # Every follower starts with a full lag window: a new leader has heard from nobody yet.
        self.followers = {
            replica: FollowerProgress(log_end_offset=-1, last_caught_up_ms=now_ms)
            for replica in replicas
            if replica != leader_id
        }

    def on_follower_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        leader_end_offset: int,
        now_ms: int,
        log_start_offset: int = -1,
        previous_fetch_ms: int = -1,
        broker_epoch: int = -1,
    ) -> bool:
        """Take a follower's fetch; True when its known log start offset moved (the low
        watermark may have: a DeleteRecords may be waiting for it). Its first report is not a
        move: every partition gets one when a leader starts, and no wake is owed then.
        `previous_fetch_ms`: when the follower last fetched anything from this broker before
        (-1: unknown); `broker_epoch`: its registration in this broker's metadata now. The
        module doc says why each counts."""
        progress = self.followers.get(replica_id)
        if progress is None:
            progress = self.followers[replica_id] = FollowerProgress(-1, now_ms)
        if fetch_offset >= leader_end_offset:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, now_ms)
        elif progress.last_fetch_ms >= 0 and fetch_offset >= progress.leader_end_at_last_fetch:
            # It held everything at this partition's last read, and at every fetch since that
            # did not read it (the partition had not changed): the last of those is the
            # previous one. Without it, a follower of a partition idle for longer than the lag
            # looked out of sync from the first append after, until it reported that append.
            last_whole_ms = max(progress.last_fetch_ms, min(previous_fetch_ms, now_ms))
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, last_whole_ms)
        progress.log_end_offset = fetch_offset
        progress.broker_epoch = broker_epoch
        progress.last_fetch_ms = now_ms
        progress.leader_end_at_last_fetch = leader_end_offset
        moved = 0 <= progress.log_start_offset != log_start_offset
        progress.log_start_offset = log_start_offset
        return moved

    def broker_epochs(self, replicas: Iterable[int]) -> tuple[tuple[int, int], ...]:
        """(follower, the broker epoch its latest fetch was read under; -1: none) for each."""
        epochs = []
        for replica in replicas:
            progress = self.followers.get(replica)
            epochs.append((replica, -1 if progress is None else progress.broker_epoch))
        return tuple(epochs)

    def smallest_log_end(self, leader_end_offset: int, isr: Sequence[int]) -> int:
        """The smallest log end offset over the leader and `isr`'s followers (-1 for one that
        has not fetched since this broker became leader): what the high watermark may rise to."""
        ends = [leader_end_offset]
        for replica in isr:
            if replica != self.leader_id:
                progress = self.followers.get(replica)
                ends.append(-1 if progress is None else progress.log_end_offset)
        return min(ends)

    def low_watermark(self, leader_log_start_offset: int, isr: Sequence[int]) -> int:
        """The smallest log start offset over the leader and the ISR's followers (Kafka's low
        watermark): below it, no replica that could be elected holds a record."""
        starts = [leader_log_start_offset]
        for replica in isr:
            if replica != self.leader_id:
                progress = self.followers.get(replica)
                starts.append(-1 if progress is None else progress.log_start_offset)
        return min(starts)

    def proposed_isr(
        self,
        *,
        isr: Sequence[int],
        replicas: Sequence[int],
        eligible: set[int],
        high_watermark: int,
        epoch_start_offset: int,
        now_ms: int,
        lag_max_ms: int,
        leader_end_offset: int,
        replica_fetch_ms: Mapping[int, int],
        broker_epochs: Mapping[int, int] | None = None,
    ) -> tuple[int, ...] | None:
        """The ISR this leader should ask for, or None when the current one is right.
        `eligible`: replicas that may join (registered, unfenced); a joiner must hold the
        `high_watermark` and the epoch's start. `replica_fetch_ms`: when each follower last
        fetched from this broker at all. `broker_epochs`: each broker's registration in this
        leader's metadata; a joiner's progress must have been read under its current one
        (None: not checked)."""
        keep = set()
        for replica in isr:
            if replica == self.leader_id:
                keep.add(replica)
                continue
            progress = self.followers.get(replica)
            if (
                progress is not None
                and now_ms
                - self._caught_up_ms(replica, progress, leader_end_offset, replica_fetch_ms)
                <= lag_max_ms
            ):
                keep.add(replica)
        for replica in replicas:
            progress = self.followers.get(replica)
            if (
                replica not in isr
                and replica in eligible
                and progress is not None
                and (broker_epochs is None or progress.broker_epoch == broker_epochs.get(replica))
                and progress.log_end_offset >= high_watermark
                and progress.log_end_offset >= epoch_start_offset
                and now_ms
                - self._caught_up_ms(replica, progress, leader_end_offset, replica_fetch_ms)
                <= lag_max_ms
            ):
                keep.add(replica)
        proposed = tuple(replica for replica in replicas if replica in keep)
        return None if set(proposed) == set(isr) else proposed

    @staticmethod
    def _caught_up_ms(
        replica: int,
        progress: FollowerProgress,
        leader_end_offset: int,
        replica_fetch_ms: Mapping[int, int],
    ) -> int:
        """When the follower last had everything. A follower holding the whole log is caught up
        for as long as it keeps fetching at all: in a fetch session it names an idle partition
        in no request, so that partition's own progress never moves (KIP-227). That is
        remembered, so an append after a long idle spell finds it caught up as of this look
        (the ISR manager looks every replica.lag.time.max.ms / 2), not as of its last read of
        the partition: before its next fetch reports the append, it is merely behind by it."""
        if progress.log_end_offset >= leader_end_offset:
            progress.last_caught_up_ms = max(
                progress.last_caught_up_ms, replica_fetch_ms.get(replica, -1)
            )
        return progress.last_caught_up_ms


def high_watermark_within(high_watermark: int, log_start_offset: int, log_end_offset: int) -> int:
    """A high watermark kept within a replica's log: a follower's is the leader's capped by what
    it holds itself, and none is below the log's start (a log that started over at the leader's
    log start, or a checkpoint older than a DeleteRecords; Kafka clamps the same way)."""
    return min(max(high_watermark, log_start_offset), log_end_offset)
