"""Fetch sessions on the serving broker (KIP-227): remember what a fetcher reads, so that each
fetch costs what changed, not what the fetcher holds.

Theory of operation. A follower fetches every partition it follows from their leader, over and
over; with thousands of idle partitions a full fetch walks, reads and answers all of them on
every round trip. A session turns that around:

- The opening fetch (session_id 0, session_epoch 0) names every partition; the broker answers
  them all and keeps, per partition, what was asked (`wanted`: fetch offset, epochs, byte
  limit) and what the fetcher was last told (high watermark, last stable and log start offset).
- Each later fetch carries the session id and the epoch the session expects next, and names only
  the partitions whose position changed (a follower that appended records) plus those to forget.
- Between fetches the session collects `dirty` partitions: the partition host calls `wake` for
  each change of a partition the session holds (an append, a high watermark move, a leadership
  change). A fetch examines the partitions it names and the dirty ones, nothing else, and when
  nothing is new parks until the next wake (`on_wake`).
- An answer carries only partitions with news (`has_news`), and `remember` records what was
  told. A dirty partition stays dirty until a pass examined it; one skipped because the answer
  was full (`left_out`) is looked at first next time, so that busy partitions ahead of it
  cannot keep it out of every answer.

Epochs make a lost or repeated request visible (INVALID_FETCH_SESSION_EPOCH): the fetcher then
opens a new session with a full fetch, so nothing is ever missed, only re-sent. This module is
pure: the cache takes the time as `now_ms`, and the fetch adapter (fetch.py) does the reading
and the watching.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.services.runtime.session_access import NO_GRANT, SessionGrant
from samsa.v1 import broker_pb2

PartitionKey = tuple[str, int]
WantedPartition = broker_pb2.FetchRequest.PartitionData
PartitionResult = broker_pb2.FetchResponse.PartitionResponse

EPOCH_MAX = 2**31 - 1  # epochs wrap to 1 after this (0 opens a session, -1 closes one)
CLOSE_EPOCH = -1  # a session_epoch that closes the session named


@dataclass
class SessionPartition:
    """One partition of a session: what the fetcher asks, and what it was last told."""

    wanted: WantedPartition
    # The topic id of the last request that named the partition (KIP-516; empty: not checked).
    topic_id: bytes = b""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1

    def has_news(self, result: PartitionResult, has_records: bool) -> bool:
        """Whether an incremental answer must carry `result` (and, with `has_records`, the
        records read for it): anything the fetcher does not already know."""
        return bool(
            has_records
            or result.high_watermark != self.high_watermark
            or result.error_code
            or result.last_stable_offset != self.last_stable_offset
            or result.log_start_offset != self.log_start_offset
            or result.HasField("diverging_epoch")
            or result.HasField("preferred_read_replica")
            or result.decoded_records
        )

    def remember(self, result: PartitionResult) -> None:
        self.high_watermark = result.high_watermark
        self.last_stable_offset = result.last_stable_offset
        self.log_start_offset = result.log_start_offset


@dataclass(eq=False)
class FetchSession:
    """One fetcher's session. `wake` is what the partition host calls on a change."""

    session_id: int
    replica_id: int
    last_used_ms: int
    next_epoch: int = 1
    partitions: dict[PartitionKey, SessionPartition] = field(default_factory=dict)
    dirty: set[PartitionKey] = field(default_factory=set)
    # The partitions the last answer had no room for, read first by the next fetch: without
    # that, one behind partitions that always have data was left out for as long as they did.
    left_out: list[PartitionKey] = field(default_factory=list)
    # Called on every wake: set by a fetch parked on this session, to end its wait.
    on_wake: Callable[[], None] | None = None
    # A fetch of this session is being answered; a second one at once is refused.
    busy: bool = False
    # The ACLs and caller under which all its topics were last allowed (session_access.py).
    grant: SessionGrant = NO_GRANT

    def wake(self, key: PartitionKey) -> None:
        self.dirty.add(key)
        if self.on_wake is not None:
            self.on_wake()

    def update(self, key: PartitionKey, wanted: WantedPartition, topic_id: bytes = b"") -> bool:
        """Add the partition or take its new position (and the topic id the request names for
        it); True when it is new to the session."""
        known = self.partitions.get(key)
        if known is not None:
            known.wanted = wanted
            known.topic_id = topic_id
            return False
        self.partitions[key] = SessionPartition(wanted, topic_id)
        return True

    def forget(self, key: PartitionKey) -> bool:
        """Drop the partition; True when the session held it."""
        self.dirty.discard(key)
        return self.partitions.pop(key, None) is not None

    def answered(self, now_ms: int, *, opening: bool) -> None:
        """The answer is final: the next fetch must carry the next epoch (1 after the opening
        fetch, whose epoch is 0)."""
        if not opening:
            self.next_epoch = 1 if self.next_epoch >= EPOCH_MAX else self.next_epoch + 1
        self.last_used_ms = now_ms


class SessionError(Exception):
    """A fetch names a session it cannot use; the fetcher opens a new one."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class FetchSessionCache:
    """The sessions one broker keeps, bounded in count and in partitions held."""

    def __init__(
        self,
        *,
        sessions_max: int = limits.fetch_sessions_max,
        partitions_max: int = limits.fetch_session_partitions_total_max,
        idle_ms: int = limits.fetch_session_idle_ms,
        new_id: Callable[[], int] | None = None,
    ) -> None:
        """`new_id` draws session ids in [1, EPOCH_MAX] (the servicer draws them at random, so
        that one fetcher cannot guess another's session); by default they count up from 1."""
        assert sessions_max > 0 and partitions_max > 0 and idle_ms > 0
        self.sessions_max = sessions_max
        self.partitions_max = partitions_max
        self.idle_ms = idle_ms
        counter = itertools.count(1)
        self._new_id = new_id or (lambda: next(counter) % EPOCH_MAX + 1)
        self._sessions: dict[int, FetchSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def partitions_held(self) -> int:
        return sum(len(session.partitions) for session in self._sessions.values())

    def open(
        self, replica_id: int, now_ms: int, partitions: int = 0
    ) -> tuple[FetchSession | None, list[FetchSession]]:
        """A new session for `partitions` partitions, or None when no room can be made (see
        `make_room`); also the sessions evicted to make room (their watches must be removed)."""
        evicted = self.make_room(replica_id, partitions, now_ms, new_session=True)
        if evicted is None:
            return None, []
        session_id = self._new_id()
        while session_id in self._sessions:
            session_id = self._new_id()
        session = FetchSession(session_id=session_id, replica_id=replica_id, last_used_ms=now_ms)
        self._sessions[session_id] = session
        return session, evicted

    def make_room(
        self,
        replica_id: int,
        partitions: int,
        now_ms: int,
        *,
        new_session: bool,
        keep: FetchSession | None = None,
    ) -> list[FetchSession] | None:
        """Room for `partitions` more partitions (and a session more with `new_session`) for
        `replica_id`'s fetcher: the sessions evicted for it, or None (and none evicted) when
        there is no room to make. Evicted first: sessions idle for `idle_ms`, oldest first;
        then, for a follower (replica_id >= 0: it proved membership), consumers' sessions,
        largest first (Kafka's privileged eviction). Any client may open sessions, so without
        the second a stranger's few fetches kept every follower from one for good. `keep`: the
        session growing, never evicted for itself."""
        held = self.partitions_held()

        def fits(sessions_freed: int, partitions_freed: int) -> bool:
            count = len(self._sessions) - sessions_freed + new_session
            return (
                count <= self.sessions_max
                and held - partitions_freed + partitions <= self.partitions_max
            )

        if fits(0, 0):
            return []
        others = [session for session in self._sessions.values() if session is not keep]
        idle = [s for s in others if now_ms - s.last_used_ms >= self.idle_ms]
        candidates = sorted(idle, key=lambda session: session.last_used_ms)
        if replica_id >= 0:
            consumers = [
                s for s in others if s.replica_id < 0 and now_ms - s.last_used_ms < self.idle_ms
            ]
            candidates += sorted(consumers, key=lambda session: -len(session.partitions))
        chosen: list[FetchSession] = []
        freed = 0
        for candidate in candidates:
            if fits(len(chosen), freed):
                break
            chosen.append(candidate)
            freed += len(candidate.partitions)
        if not fits(len(chosen), freed):
            return None
        for session in chosen:
            del self._sessions[session.session_id]
        return chosen

    def get(self, session_id: int, epoch: int, replica_id: int) -> FetchSession:
        """The session an incremental fetch names, checked; SessionError otherwise."""
        session = self._sessions.get(session_id)
        if session is None or session.replica_id != replica_id:
            raise SessionError(
                ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                f"no fetch session {session_id} for this fetcher: open a new one "
                "(session_id 0, session_epoch 0)",
            )
        if epoch != session.next_epoch or session.busy:
            raise SessionError(
                ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                f"fetch session {session_id} expects epoch {session.next_epoch}, got {epoch}"
                + (" while a fetch of it is in progress" if session.busy else "")
                + ": open a new one (session_id 0, session_epoch 0)",
            )
        return session

    def consumer_session(self, session_id: int) -> FetchSession | None:
        """A consumer's session (not a follower's), for the authorizer (session_access.py)."""
        session = self._sessions.get(session_id)
        return session if session is not None and session.replica_id < 0 else None

    def close(self, session_id: int) -> FetchSession | None:
        """Remove the session (its watches must be removed); None when it is unknown."""
        return self._sessions.pop(session_id, None)

    def close_if_owned(self, session_id: int, replica_id: int) -> FetchSession | None:
        """Close the session if `replica_id` fetches in it (a fetcher starting over)."""
        session = self._sessions.get(session_id)
        if session is None or session.replica_id != replica_id:
            return None
        return self._sessions.pop(session_id)

    def sessions(self) -> list[FetchSession]:
        return list(self._sessions.values())
