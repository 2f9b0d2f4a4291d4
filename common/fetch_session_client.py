"""The fetcher's side of a fetch session (KIP-227): which partitions the next fetch must name.

Theory of operation. The fetcher says what it wants of each partition with `set(key, position)`
(None: stop fetching it) whenever that changes: after it appends what it fetched, truncates, or
learns a new leader epoch. `build()` turns that into the next request's parts:

- with no session (`next_epoch` 0) a full fetch naming every wanted partition, which opens one
  (and closes the fetcher's previous session on that broker, if it had one);
- within a session, an incremental fetch naming only the partitions whose position differs from
  what the broker's session holds (`_sent`), those named always (`name_always`), and those to
  forget.

A request names at most `limits.request_partitions_max` partitions (forgotten ones count), the
most a broker accepts. When more are due, `build()` names the ones waiting longest and says so
(`FetchParts.more`); the rest follow in the next incremental fetches. A full fetch of more than
that opens the session with the first of them, and the others are added incrementally; to a
broker that keeps no session, each full fetch names first those the previous ones left out, and
says `more` only until every wanted partition has been named since the last one that did not:
each round of full fetches covering them all ends with one that long-polls, instead of fetches
without a wait for ever (a busy loop while nothing is written; DESIGN.md section 4). Within a
session the same holds for partitions named always (a follower outside their ISR): past the
limit they take turns, and once each has been named since the last long-poll, the next fetch
long-polls even though some are left out; only a position that changed, or a partition to
forget, left out makes a fetch say `more` at once.

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
from itertools import chain

from samsa.common import limits
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
    # The topic's id in the fetcher's metadata (KIP-516), sent as its TopicData.topic_id: a
    # broker hosting another topic of the same name answers UNKNOWN_TOPIC_ID rather than its
    # records. A new id is a new position, so a session names the partition again. Empty: none.
    topic_id: bytes = b""


@dataclass(frozen=True)
class FetchParts:
    """One request's session fields and partitions, from `FetchSessionClient.build`."""

    session_id: int
    session_epoch: int
    full: bool
    partitions: Mapping[PartitionKey, FetchPosition]
    forgotten: tuple[PartitionKey, ...]
    # Partitions were left for later requests (the request limit): do not long-poll this one.
    # Without a session, only until every partition has been named since the last long-poll.
    more: bool = False


class FetchSessionClient:
    """One fetcher's session with one broker."""

    def __init__(self) -> None:
        self.session_id = 0
        self.next_epoch = 0  # 0: the next fetch is full and opens a session
        self._wanted: dict[PartitionKey, FetchPosition] = {}
        self._sent: dict[PartitionKey, FetchPosition] = {}
        # Keys whose wanted position may differ from what the broker's session holds, those
        # waiting longest first (a dict for its order: the request limit serves them in turn).
        self._pending: dict[PartitionKey, None] = {}
        # Keys named in every request even when unchanged (see `name_always`); a dict for its
        # order: past the request limit they take turns, those named longest ago first.
        self._always: dict[PartitionKey, None] = {}
        # Keys named by the fetches answered since the last one that said no `more` (it
        # long-polled): an unchanged key still out of it is why the next says `more`.
        self._named_in_round: set[PartitionKey] = set()

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
                self._pending.setdefault(key)
        elif self._wanted.get(key) != position:
            self._wanted[key] = position
            self._pending.setdefault(key)

    def name_always(self, key: PartitionKey, always: bool) -> None:
        """Name `key` in every request, changed or not (or stop doing so). A follower outside a
        partition's ISR does this: the leader forgets the progress of a follower that leaves
        the ISR, and only a position named after that brings it back."""
        if always:
            self._always.setdefault(key)
        else:
            self._always.pop(key, None)

    def build(self) -> FetchParts:
        """The next request's parts (see the module doc)."""
        limit = limits.request_partitions_max
        wanted = self._wanted
        if self.next_epoch == 0:
            if len(wanted) <= limit:
                return FetchParts(self.session_id, 0, True, dict(wanted), ())
            chosen: dict[PartitionKey, FetchPosition] = {}
            for key in chain(self._pending, wanted):
                if key in wanted and key not in chosen:
                    chosen[key] = wanted[key]
                    if len(chosen) == limit:
                        break
            named = self._named_in_round
            more = any(key not in chosen and key not in named for key in wanted)
            return FetchParts(self.session_id, 0, True, chosen, (), more=more)
        sent = self._sent
        always = [key for key in self._always if key in wanted]
        # Past the limit those named always take turns in half of each request, so partitions
        # that moved are named too (else they waited for ever behind them).
        first = always if len(always) <= limit else always[: limit // 2]
        changed = {key: wanted[key] for key in first}
        forgotten: list[PartitionKey] = []
        more = False
        for key in chain(self._pending, always[len(first) :]):
            if key in changed:
                continue
            position = wanted.get(key)
            if position is None and key not in sent:
                continue
            unchanged = position is not None and sent.get(key) == position
            if unchanged and key not in self._always:
                continue
            if len(changed) + len(forgotten) >= limit:
                if not unchanged or key not in self._named_in_round:
                    more = True
                    break
                continue  # named always, unchanged, and named since the last long-poll
            if position is None:
                forgotten.append(key)
            else:
                changed[key] = position
        return FetchParts(
            self.session_id, self.next_epoch, False, changed, tuple(forgotten), more=more
        )

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
        # Those left out of this request stay ahead of those it named (the request limit).
        named = parts.partitions.keys() | set(parts.forgotten)
        left_out = (key for key in self._pending if key not in named)
        if parts.more:
            self._named_in_round.update(parts.partitions)
        else:
            self._named_in_round.clear()
        if parts.full and not session_id:
            # No session: the broker holds nothing for the next full fetch, so every wanted
            # partition is due again, those this one left out first (else those left out while
            # idle were never named again once the others had moved).
            unnamed = (key for key in self._wanted if key not in named)
            self._pending = dict.fromkeys(
                key for key in chain(left_out, unnamed, parts.partitions) if key in self._wanted
            )
        else:
            self._pending = {
                key: None
                for key in chain(left_out, parts.partitions, parts.forgotten)
                if self._wanted.get(key) != self._sent.get(key)
            }
        if len(self._always) > limits.request_partitions_max:
            # Those named go last: the next request names the others first.
            # Both in their order there, so that they keep taking turns in one fixed rotation.
            always = self._always
            self._always = dict.fromkeys(
                chain(
                    (key for key in always if key not in named),
                    (key for key in always if key in named),
                )
            )

    def reset(self) -> None:
        """The request failed or the session is gone: the next fetch is full and opens a new
        session (closing this one on the broker, which may still hold it)."""
        self.next_epoch = 0
        self._sent.clear()
        self._pending = dict.fromkeys(chain(self._pending, self._wanted))
        # A new round: the old session's namings put nothing in the new one, whose first fetch
        # must say `more` when it leaves partitions out (else it long-polls without them).
        self._named_in_round.clear()


def fetch_request(parts: FetchParts, **fields: object) -> broker_pb2.FetchRequest:
    """The FetchRequest carrying `parts`; `fields` set the rest (replica_id, max_wait_ms, ...).
    One TopicData per topic and topic id (partitions of one name whose positions carry two ids,
    while metadata changes, go in two entries: each partition is still named once)."""
    by_topic: dict[tuple[str, bytes], list[broker_pb2.FetchRequest.PartitionData]] = {}
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
        by_topic.setdefault((topic, position.topic_id), []).append(wanted)
    forgotten: dict[str, list[int]] = {}
    for topic, partition in parts.forgotten:
        forgotten.setdefault(topic, []).append(partition)
    return broker_pb2.FetchRequest(
        topics=[
            broker_pb2.FetchRequest.TopicData(name=topic, topic_id=topic_id, partitions=wanted)
            for (topic, topic_id), wanted in by_topic.items()
        ],
        session_id=parts.session_id,
        session_epoch=parts.session_epoch,
        forgotten_topics=[
            broker_pb2.FetchRequest.ForgottenTopic(name=topic, partitions=partitions)
            for topic, partitions in forgotten.items()
        ],
        **fields,  # type: ignore[arg-type]
    )
