"""The consumer's fetch sessions (KIP-227): one per broker it fetches from.

A consumer assigned thousands of partitions would otherwise name all of them, and have the broker
read and answer all of them, in every fetch. With a session (common/fetch_session_client.py) each
fetch names only the partitions whose fetch offset moved (or that were added or dropped), and the
broker answers only partitions with news; a partition left out of an answer simply has nothing new.
A failed fetch or a session error starts the session over with a full fetch, so nothing is missed.

The broker reads, in an incremental fetch, only the partitions it names and those that changed
since it last looked at them: it takes what it answered as consumed. So a partition is named
whenever that is not so, even at the position the broker's session holds: fetched from another
broker since (a read replica and back, a leader and back), or its last answer not taken (dropped
by a seek or a reset, or an error `poll()` raised, `refetch`). Otherwise it would wait for the next
append, for ever on a partition no longer written to.

A fetch names at most `limits.request_partitions_max` partitions, the most a broker accepts
(common/fetch_session_client.py serves the rest in the next fetches, which follow at once: a fetch
that leaves partitions out does not long-poll; to a broker keeping no session, only until every
partition has been named since the last fetch that did, else an idle consumer fetched non-stop).
Meanwhile the broker's session holds a partition left out at its old offset, and answers it from
there when it changes: such an answer is not read (`answered_at`), the partition is read once
named.
"""

from __future__ import annotations

from collections.abc import Mapping

from samsa.common.errors import ErrorCode
from samsa.common.fetch_session_client import (
    FetchParts,
    FetchPosition,
    FetchSessionClient,
    fetch_request,
)
from samsa.v1 import broker_pb2

TopicPartition = tuple[str, int]

CLOSE_EPOCH = -1


class BrokerFetchSessions:
    """The session with each broker, and the requests they call for."""

    def __init__(self, *, partition_max_bytes: int) -> None:
        self.partition_max_bytes = partition_max_bytes
        self._sessions: dict[int, FetchSessionClient] = {}
        # The broker each partition was last asked of, while what it answered was taken.
        self._fetched_from: dict[TopicPartition, int] = {}

    def request(
        self,
        node: int,
        offsets: Mapping[TopicPartition, int],
        epochs: Mapping[TopicPartition, int],
        leader_epochs: Mapping[TopicPartition, int] | None = None,
        topic_ids: Mapping[str, bytes] | None = None,
        **fields: object,
    ) -> tuple[broker_pb2.FetchRequest, FetchParts]:
        """The fetch to send `node` for exactly `offsets`, with the leader epoch of each
        partition's last batch read (`epochs`) and the current leader epoch the metadata gives
        (`leader_epochs`), both per KIP-320, and each topic's id (`topic_ids`, KIP-516: a new
        one names the partition again); `fields` set max_wait_ms and the like."""
        session = self._sessions.setdefault(node, FetchSessionClient())
        for tp in [tp for tp in session.wanted if tp not in offsets]:
            session.set(tp, None)
        named = []  # named even when unchanged (module doc)
        fetched_from = self._fetched_from
        for tp, offset in offsets.items():
            current = -1 if leader_epochs is None else leader_epochs.get(tp, -1)
            topic_id = b"" if topic_ids is None else topic_ids.get(tp[0], b"")
            position = FetchPosition(
                offset, current, epochs.get(tp, -1), self.partition_max_bytes, topic_id=topic_id
            )
            session.set(tp, position)
            if fetched_from.get(tp) != node:
                fetched_from[tp] = node
                named.append(tp)
                session.name_always(tp, True)
        parts = session.build()
        for tp in named:
            session.name_always(tp, False)
            if tp not in parts.partitions:  # left for a later request (the request limit)
                del fetched_from[tp]
        if parts.more:  # the rest follow at once, not after a long poll of these
            fields = {**fields, "max_wait_ms": 0}
        return fetch_request(parts, **fields), parts

    def answered_at(
        self, node: int, offsets: Mapping[TopicPartition, int], parts: FetchParts
    ) -> dict[TopicPartition, int]:
        """Of `offsets` (what `request` was given), those an answer to `parts` reads at that
        offset: the partitions it names, and in an incremental fetch those the broker's session
        already holds there. One whose new offset the request limit left for a later fetch is
        held, and may be answered (it changed since), at its old offset: that answer is no
        answer at the new one (a seek back taking it skipped the records between). Without
        the limit at work (`more` unset) every partition is named or held where it is wanted:
        all of `offsets`, with no loop over them on every fetch."""
        if not parts.more:
            return dict(offsets)
        if parts.full:
            return {tp: offsets[tp] for tp in parts.partitions if tp in offsets}
        session = self._sessions[node]
        answered = {}
        for tp, offset in offsets.items():
            held = session.sent(tp)
            if tp in parts.partitions or (held is not None and held.fetch_offset == offset):
                answered[tp] = offset
        return answered

    def refetch(self, tp: TopicPartition) -> None:
        """What a broker last answered of `tp` was not taken: name it in its next fetch."""
        self._fetched_from.pop(tp, None)

    def on_answer(self, node: int, parts: FetchParts, response: broker_pb2.FetchResponse) -> bool:
        """Record the broker's answer; False when it refused the session (nothing to read in
        it: the next fetch starts a new session)."""
        session = self._sessions.setdefault(node, FetchSessionClient())
        if response.error_code != ErrorCode.NONE:
            session.reset()
            return False
        session.on_answer(parts, response.session_id)
        return True

    def on_failure(self, node: int) -> None:
        """The fetch failed: the broker may or may not have applied it, so start over."""
        session = self._sessions.get(node)
        if session is not None:
            session.reset()

    def close_requests(self) -> dict[int, broker_pb2.FetchRequest]:
        """Fetches that close every open session (so brokers free them at once), by node."""
        requests = {
            node: broker_pb2.FetchRequest(session_id=session.session_id, session_epoch=CLOSE_EPOCH)
            for node, session in self._sessions.items()
            if session.session_id
        }
        self._sessions.clear()
        self._fetched_from.clear()
        return requests
