"""The fetcher's side of a fetch session (KIP-227): which partitions the next fetch must name.

Theory of operation. The fetcher says what it wants of each partition with `set(key, position)`
(None: stop fetching it) whenever that changes: after it appends what it fetched, truncates, or
learns a new leader epoch. `build()` turns that into the next request's parts:

- with no session (`next_epoch` 0) a full fetch naming every wanted partition, which opens one
  (and closes the fetcher's previous session on that broker, if it had one);
- within a session, an incremental fetch naming only the partitions whose position differs from
  what the broker's session holds (`_sent`), those named always (`name_always`), and those to
  forget.

`on_answer` records what the broker now holds and moves to the next epoch. A failed request, or a
session error from the broker, sends the fetcher back to a full fetch (`reset`): the broker may or
may not have applied the request, and a full fetch makes both sides agree again. A broker that
keeps no session (session_id 0 in its answer) gets full fetches from then on.

Pure and shared: followers use it (services/broker/replica/replica_fetcher.py), and any client
fetching many partitions can.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from samsa.v1 import broker_pb2

PartitionKey = tuple[str, int]

EPOCH_MAX = 2**31 - 1


@dataclass(frozen=True)
class FetchPosition:
    """What a fetch asks of one partition. Epochs are -1 when not checked."""

    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    partition_max_bytes: int
    # A follower's own log start offset (the leader's low watermark counts it); -1 otherwise.
    log_start_offset: int = -1


@dataclass(frozen=True)
class FetchParts:
    """One request's session fields and partitions, from `FetchSessionClient.build`."""

    session_id: int
    session_epoch: int
    full: bool
    partitions: Mapping[PartitionKey, FetchPosition]
    forgotten: tuple[PartitionKey, ...]


class FetchSessionClient:
    """One fetcher's session with one broker."""

    def __init__(self) -> None:
        self.session_id = 0
        self.next_epoch = 0  # 0: the next fetch is full and opens a session
        self._wanted: dict[PartitionKey, FetchPosition] = {}
        self._sent: dict[PartitionKey, FetchPosition] = {}
        # Keys whose wanted position may differ from what the broker's session holds.
        self._pending: set[PartitionKey] = set()
        # Keys named in every request even when unchanged (see `name_always`).
        self._always: set[PartitionKey] = set()

    @property
    def wanted(self) -> Mapping[PartitionKey, FetchPosition]:
        return self._wanted

    def sent(self, key: PartitionKey) -> FetchPosition | None:
        """The position the broker's session holds for `key` (what it last read from)."""
        return self._sent.get(key)

    def set(self, key: PartitionKey, position: FetchPosition | None) -> None:
        """Fetch `key` at `position` from now on; None stops fetching it."""
        if position is None:
            if self._wanted.pop(key, None) is not None or key in self._sent:
                self._pending.add(key)
        elif self._wanted.get(key) != position:
            self._wanted[key] = position
            self._pending.add(key)

    def name_always(self, key: PartitionKey, always: bool) -> None:
        """Name `key` in every request, changed or not (or stop doing so). A follower outside a
        partition's ISR does this: the leader forgets the progress of a follower that leaves
        the ISR, and only a position named after that brings it back."""
        if always:
            self._always.add(key)
        else:
            self._always.discard(key)

    def build(self) -> FetchParts:
        """The next request's parts (see the module doc)."""
        if self.next_epoch == 0:
            return FetchParts(self.session_id, 0, True, dict(self._wanted), ())
        changed = {
            key: self._wanted[key]
            for key in self._pending
            if key in self._wanted and self._sent.get(key) != self._wanted[key]
        }
        changed.update((key, self._wanted[key]) for key in self._always if key in self._wanted)
        forgotten = tuple(
            key for key in self._pending if key not in self._wanted and key in self._sent
        )
        return FetchParts(self.session_id, self.next_epoch, False, changed, forgotten)

    def on_answer(self, parts: FetchParts, session_id: int) -> None:
        """The broker answered `parts` (no session error); it keeps session `session_id`."""
        if parts.full:
            self._sent = dict(parts.partitions)
            self.session_id = session_id
            self.next_epoch = 1 if session_id else 0
        else:
            self._sent.update(parts.partitions)
            for key in parts.forgotten:
                self._sent.pop(key, None)
            self.next_epoch = 1 if self.next_epoch >= EPOCH_MAX else self.next_epoch + 1
        # Settled: what the broker holds is what is wanted (set() may have moved since build).
        self._pending = {
            key
            for key in self._pending | set(parts.partitions) | set(parts.forgotten)
            if self._wanted.get(key) != self._sent.get(key)
        }

    def reset(self) -> None:
        """The request failed or the session is gone: the next fetch is full and opens a new
        session (closing this one on the broker, which may still hold it)."""
        self.next_epoch = 0
        self._sent.clear()
        self._pending = set(self._wanted)


def fetch_request(parts: FetchParts, **fields: object) -> broker_pb2.FetchRequest:
    """The FetchRequest carrying `parts`; `fields` set the rest (replica_id, max_wait_ms, ...)."""
    by_topic: dict[str, list[broker_pb2.FetchRequest.PartitionData]] = {}
    for (topic, partition), position in parts.partitions.items():
        wanted = broker_pb2.FetchRequest.PartitionData(
            partition=partition,
            fetch_offset=position.fetch_offset,
            partition_max_bytes=position.partition_max_bytes,
        )
        if position.current_leader_epoch >= 0:
            wanted.current_leader_epoch = position.current_leader_epoch
        if position.last_fetched_epoch >= 0:
            wanted.last_fetched_epoch = position.last_fetched_epoch
        if position.log_start_offset >= 0:
            wanted.log_start_offset = position.log_start_offset
        by_topic.setdefault(topic, []).append(wanted)
    forgotten: dict[str, list[int]] = {}
    for topic, partition in parts.forgotten:
        forgotten.setdefault(topic, []).append(partition)
    return broker_pb2.FetchRequest(
        topics=[
            broker_pb2.FetchRequest.TopicData(name=topic, partitions=wanted)
            for topic, wanted in by_topic.items()
        ],
        session_id=parts.session_id,
        session_epoch=parts.session_epoch,
        forgotten_topics=[
            broker_pb2.FetchRequest.ForgottenTopic(name=topic, partitions=partitions)
            for topic, partitions in forgotten.items()
        ],
        **fields,  # type: ignore[arg-type]
    )
