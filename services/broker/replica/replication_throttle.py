"""Replication throttles (KIP-73), the broker's side: which replicas wait, and for how long. Pure.

Theory of operation. A broker has two byte-rate quotas, Kafka's ReplicationQuotaManager's: one
for what it sends as a leader to throttled replicas, one for what it fetches as a follower for
them, each bounded by its broker config (metadata/replication_throttles.py). A partition is
throttled on a side when its topic's `*.replication.throttled.replicas` names this broker's
replica of it, and only while the replica concerned (the fetching follower, on the leader's side;
this broker, on the follower's) is not in the ISR: a caught-up replica is never throttled, so an
acks=all write never waits on a throttle (Kafka's shouldLeaderThrottle / shouldFollowerThrottle).

- Leader: answering a replica fetch, a throttled partition's read is bounded by `leader_room`:
  nothing while the leader quota is used up (an empty answer, not an error: the follower's
  progress still counts), else at most the bytes the quota has left (a first batch still goes
  whole, KIP-74). Kafka only checks "exceeded"; bounding the read too keeps a 1 MiB read from
  overshooting a low rate. Bytes sent are recorded per answered partition.
- Follower: a throttled partition is left out of the next fetch while the follower quota is
  exceeded (`follower_held`); bytes received for it are recorded per answer.

The quota (`RateQuota`) measures bytes over sliding sample windows, as Kafka's Rate does
(replication.quota.window.num 11 windows of replication.quota.window.size.seconds 1 s): the
rate is the bytes in the live windows over the time they span. Kafka pads a short span up to
num - 1 windows, which lets a fresh throttle pass ten seconds' worth at once; here the span is
at least one window, so a fresh throttle passes at most one second's worth. The clock is given
(milliseconds), so all of this is deterministic and tested directly.

Cost: with no rate set (Long.MAX) nothing is parsed or recorded per fetch; the topic configs
are parsed once per metadata image.
"""

from __future__ import annotations

from collections import deque

from samsa.metadata.image import MetadataImage
from samsa.metadata.replication_throttles import (
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    LONG_MAX,
    NONE,
    ThrottledReplicas,
    broker_rates,
    topic_throttled,
)

WINDOW_MS = 1000  # Kafka's replication.quota.window.size.seconds
WINDOWS = 11  # Kafka's replication.quota.window.num


class RateQuota:
    """A byte rate over sliding sample windows, bounded by `bound` bytes per second."""

    def __init__(self, bound: int = LONG_MAX, window_ms: int = WINDOW_MS, windows: int = WINDOWS):
        assert window_ms > 0 and windows > 0
        self.bound = bound
        self.window_ms = window_ms
        self.windows = windows
        self._samples: deque[list[int]] = deque()  # [start ms, bytes], oldest first
        self._total = 0

    def _expire(self, now_ms: int) -> None:
        horizon = now_ms - self.window_ms * self.windows
        while self._samples and self._samples[0][0] <= horizon:
            self._total -= self._samples.popleft()[1]

    def record(self, size_bytes: int, now_ms: int) -> None:
        """Count `size_bytes` moved at `now_ms`."""
        self._expire(now_ms)
        if not self._samples or self._samples[-1][0] + self.window_ms <= now_ms:
            self._samples.append([now_ms, 0])
        self._samples[-1][1] += size_bytes
        self._total += size_bytes

    def _span_ms(self, now_ms: int) -> int:
        oldest = self._samples[0][0] if self._samples else now_ms
        return max(now_ms - oldest, self.window_ms)

    def rate(self, now_ms: int) -> float:
        """Bytes per second over the live windows (see the module doc)."""
        self._expire(now_ms)
        return self._total * 1000 / self._span_ms(now_ms)

    def is_exceeded(self, now_ms: int) -> bool:
        return self.bound < LONG_MAX and self.rate(now_ms) > self.bound

    def room(self, now_ms: int) -> int:
        """The bytes that may move now without exceeding the bound (0: none)."""
        if self.bound >= LONG_MAX:
            return LONG_MAX
        self._expire(now_ms)
        return max(self.bound * self._span_ms(now_ms) // 1000 - self._total, 0)


def is_throttled(replicas: ThrottledReplicas, partition: int, broker_id: int, in_isr: bool) -> bool:
    """Whether a replica is throttled: named by its topic's list, and not in the ISR."""
    return not in_isr and replicas.covers(partition, broker_id)


class ReplicationThrottles:
    """One broker's two quotas and its throttled partitions, from its metadata image."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.leader = RateQuota()
        self.follower = RateQuota()
        self._image: MetadataImage | None = None
        self._leader_lists: dict[str, ThrottledReplicas] = {}
        self._follower_lists: dict[str, ThrottledReplicas] = {}
        # Bytes recorded, and the times a partition was held back, per side: the metrics.
        self.throttled_bytes = {"leader": 0, "follower": 0}
        self.throttle_events = {"leader": 0, "follower": 0}

    def refresh(self, image: MetadataImage) -> None:
        """Take the rates and the topics' lists of `image` (once per image)."""
        if image is self._image:
            return
        self._image = image
        self.leader.bound, self.follower.bound = broker_rates(image, self.broker_id)
        self._leader_lists, self._follower_lists = {}, {}
        if self.leader.bound < LONG_MAX or self.follower.bound < LONG_MAX:
            for topic in image.topics:
                configs = image.topic_configs(topic)
                if configs.get(LEADER_REPLICAS):
                    self._leader_lists[topic] = topic_throttled(configs, LEADER_REPLICAS)
                if configs.get(FOLLOWER_REPLICAS):
                    self._follower_lists[topic] = topic_throttled(configs, FOLLOWER_REPLICAS)

    def leader_room(
        self, image: MetadataImage, topic: str, partition: int, replica_in_isr: bool, now_ms: int
    ) -> int | None:
        """How many bytes this leader may send a follower of the partition now; None when the
        partition is not throttled for it (see the module doc)."""
        self.refresh(image)
        if self.leader.bound >= LONG_MAX:
            return None
        lists = self._leader_lists.get(topic, NONE)
        if not is_throttled(lists, partition, self.broker_id, replica_in_isr):
            return None
        room = self.leader.room(now_ms)
        if room == 0:
            self.throttle_events["leader"] += 1
        return room

    def follower_throttled(
        self, image: MetadataImage, topic: str, partition: int, in_isr: bool
    ) -> bool:
        """Whether this follower's fetches of the partition are throttled."""
        self.refresh(image)
        if self.follower.bound >= LONG_MAX:
            return False
        lists = self._follower_lists.get(topic, NONE)
        return is_throttled(lists, partition, self.broker_id, in_isr)

    def follower_held(
        self, image: MetadataImage, topic: str, partition: int, in_isr: bool, now_ms: int
    ) -> bool | None:
        """Whether this follower leaves the partition out of its next fetch (True), fetches it
        throttled (False), or it is not throttled (None)."""
        if not self.follower_throttled(image, topic, partition, in_isr):
            return None
        held = self.follower.is_exceeded(now_ms)
        if held:
            self.throttle_events["follower"] += 1
        return held

    def record_leader(self, size_bytes: int, now_ms: int) -> None:
        self.leader.record(size_bytes, now_ms)
        self.throttled_bytes["leader"] += size_bytes

    def record_follower(self, size_bytes: int, now_ms: int) -> None:
        self.follower.record(size_bytes, now_ms)
        self.throttled_bytes["follower"] += size_bytes
