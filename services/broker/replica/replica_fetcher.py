"""Followers: fetch from each leader with the same Fetch RPC consumers use, and append.

One loop per leader broker this broker follows partitions of. Each request names, per partition,
the follower's log end offset (which is how the leader learns its progress), the leader epoch it
believes current, and the epoch of its last batch (KIP-320): when the leader's log disagrees with
that epoch, the answer carries `diverging_epoch` and the follower truncates to its end offset —
never blindly to its high watermark (KIP-101) — before fetching again. What comes back is appended
as the leader assigned it (`append_as_follower`: offsets and epochs kept), and the follower's high
watermark becomes min(leader's, own log end). Those rules live in follower_apply.py, without
I/O of their own; this module runs them.

Each loop fetches in a fetch session (KIP-227, common/fetch_session_client.py): after the opening
full fetch, a request names only the partitions whose position moved (those it appended to,
truncated, or got a new leader epoch for) and the leader answers only partitions with news, so an
idle partition costs neither side anything per fetch. `reconcile` (on each metadata change) tells
the sessions what to follow; a partition that answers an error stays in the session and the loop
backs off until the metadata log moves it. A partition whose ISR this broker is not in is named in
every request: that is how the leader, which forgets a follower's progress when it leaves the ISR,
learns that it may rejoin (and a corrupt replica, left out of its session, never is; once
repaired, `repaired` names its new log end at once, before the leader reads its old one again).

Leadership changes. Leader and followers learn a new leadership from the metadata log each on
its own, so for a moment they may disagree, and an acks=all write at the new leader waits for
the followers' first fetches of the partition. Two things keep that moment short:
- a loop whose fetch is parked at the leader (the long-poll, up to FETCH_MAX_WAIT_MS) when its
  session gains a partition has that fetch cut short: the fetch is dropped with its stream and
  the session starts over at once, naming the new partition, instead of after the long-poll (a
  rolling restart measured 380–520 ms stalls from this);
- a partition the leader refuses because it has not applied that change yet (it names an older
  epoch than this broker knows, or answers UNKNOWN_LEADER_EPOCH) is fetched again after
  LEADER_BEHIND_BACKOFF_S, not ERROR_BACKOFF_S.

Replication throttles (KIP-73, replication_throttle.py): while this broker's follower quota is
used up, the throttled partitions it is not in the ISR of leave their session (`_throttle`, before
each fetch), and the bytes fetched for them are counted per answered partition.

A fetch with a replica_id moves the leader's high watermark, so each one carries a fresh
membership proof signed as this broker (`MemberSigner`); a leader refuses it otherwise
(PERMISSION_DENIED), and this loop logs that and backs off like any other failed fetch.

Transport (`leader_link`, over common/fetch_link.py). Each loop sends its fetches on one long-lived
ReplicaFetchStream to its leader (services/broker/replica/replica_stream.py), one at a time, the
next as soon as the previous answer is applied: an acks=all write waits for two fetch round trips
per follower (the one that brings the records, the one that reports them), and a message on an open
stream costs about half a unary call. The stream proves membership when it opens; it is opened
again, with a fresh proof, after any failure (the session starts over with a full fetch, as after a
failed unary call). A leader that answers UNIMPLEMENTED (a broker from before the stream, during a
rolling upgrade) is fetched from with unary Fetch calls from then on. The channels follow TLS
rotations (service_channels.ChannelCache): after one, the next fetch goes on a new channel
(the link opens its stream there), and a fetch cut by the old channel's close fails as CANCELLED.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Iterable

import grpc

from samsa.common.errors import ErrorCode
from samsa.common.fetch_link import FetchFailed, FetchLink
from samsa.common.fetch_session_client import (
    FetchParts,
    FetchSessionClient,
    PartitionKey,
    fetch_request,
)
from samsa.services.broker.hosted_partition import HostedPartition
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.replica.follower_apply import (
    FetchPartitionResult,
    answer_is_current,
    apply_leader_answer,
    follower_position,
)
from samsa.services.broker.replica.replica_stream import STREAM_METHOD
from samsa.services.broker.replica.replication_throttle import LONG_MAX
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.membership import method_path
from samsa.services.runtime.service_channels import ChannelCache, cancelled_by_close
from samsa.services.runtime.supervisor import supervise
from samsa.v1 import broker_pb2, broker_pb2_grpc

log = logging.getLogger(__name__)

FETCH_MAX_WAIT_MS = 500  # Kafka's replica.fetch.wait.max.ms
FETCH_RESPONSE_BYTES = 16 * 1024 * 1024  # Kafka's replica.fetch.response.max.bytes (10 MiB)
ERROR_BACKOFF_S = 0.1  # Kafka's replica.fetch.backoff.ms is 1 s; a local cluster wants speed
# The leader is about to apply the metadata change that made it leader (see the module doc).
LEADER_BEHIND_BACKOFF_S = 0.005
# A refused membership proof is a configuration error (another secret, a clock far off): log it
# once a second rather than ten times.
REFUSED_BACKOFF_S = 1.0
FETCH_METHOD = method_path(
    broker_pb2.DESCRIPTOR.services_by_name["BrokerService"].full_name, "Fetch"
)
# An answer comes within the request's max_wait_ms; one this late means the leader or the path
# is stuck: the fetch fails (and a stream is dropped, to be opened again).
ANSWER_WAIT_S = FETCH_MAX_WAIT_MS / 1000 + 10


class ReplicaFetchers:
    """The fetch loops of one broker, one per leader it follows partitions of, each with its
    fetch session (common/fetch_session_client.py)."""

    def __init__(self, host: PartitionHost, broker_id: int, signer: MemberSigner) -> None:
        assert signer.member_id == broker_id, "replica fetches are signed as this broker"
        self.host = host
        self.broker_id = broker_id
        self.signer = signer
        self._loops: dict[int, asyncio.Task[None]] = {}
        self._sessions: dict[int, FetchSessionClient] = {}
        # Partitions left out of their session because their log here is corrupt.
        self._corrupt_excluded: set[PartitionKey] = set()
        # Partitions left out of their session while the follower throttle's quota is used up
        # (KIP-73, replication_throttle.py).
        self._held: set[PartitionKey] = set()
        # The leader each followed partition is fetched from, and how many per leader.
        self._leader_of: dict[PartitionKey, int] = {}
        self._follow_counts: Counter[int] = Counter()
        self._channels = ChannelCache(traced=False)
        # Each loop while it waits for an answer (to cut a long-poll short), the loops whose
        # session gained a partition in this reconcile, and the loops whose wait is being cut
        # (the flag says which cancellation is a cut: grpc.aio drops a cancellation's message).
        self._parked: dict[int, asyncio.Task[None]] = {}
        self._grown: set[int] = set()
        self._cutting: set[int] = set()

    def reconcile(self, keys: Iterable[PartitionKey] | None = None) -> None:
        """Follow what the host now follows, for `keys` (the partitions whose hosting,
        leadership or ISR may have changed; None: all): each fetched from its leader, named in
        every request while this broker is outside its ISR. Loops start for new leaders and stop
        for those no longer followed. Called on every metadata change."""
        if keys is None:
            keys = set(self.host.partitions) | set(self._leader_of)
        for key in keys:
            self._follow(key)
        for leader_id in self._grown:
            parked = self._parked.pop(leader_id, None)  # cut once, however many reconciles
            if parked is not None:
                self._cutting.add(leader_id)
                parked.cancel()
        self._grown.clear()
        leaders = {leader for leader, count in self._follow_counts.items() if count > 0}
        for leader_id in leaders:
            loop = self._loops.get(leader_id)
            if loop is None or loop.done():  # a loop that ended is started again
                self._loops[leader_id] = self._start(leader_id)
        for leader_id in self._loops.keys() - leaders:
            self._cutting.discard(leader_id)  # this cancellation ends the loop
            self._loops.pop(leader_id).cancel()
            self._sessions.pop(leader_id, None)
            self._follow_counts.pop(leader_id, None)

    def repaired(self, keys: list[PartitionKey]) -> None:
        """`PartitionHost.repair_corrupt` truncated these partitions: their logs end lower
        than their sessions say. Each is fetched from its new log end, and a fetch of its
        leader parked meanwhile is cut short, so the leader's session, which would read the
        partition at the old position (counting it as this replica's progress, enough to
        bring it back into the ISR without the records it cut), starts over from the new one."""
        self._grown.update(self._leader_of[key] for key in keys if key in self._leader_of)
        self.reconcile(keys)

    def _start(self, leader_id: int) -> asyncio.Task[None]:
        """The fetch loop for `leader_id`, supervised (services/runtime/supervisor.py): an
        unexpected error is logged at ERROR with its traceback and the loop runs again after a
        backoff, rather than ending until the next metadata change touching its partitions.
        Each run starts a new fetch session (a failure may have left the old one mid-answer)."""
        name = f"replica-fetcher-{leader_id}"

        async def run() -> None:
            session = self._sessions.get(leader_id)
            if session is not None:
                session.reset()
            await self._run(leader_id)

        return asyncio.get_running_loop().create_task(supervise(name, run), name=name)

    def _follow(self, key: PartitionKey) -> None:
        hosted = self.host.get(*key)
        leader: int | None = None
        if (
            hosted is not None
            and not hosted.is_leader
            and hosted.leader_id >= 0
            and hosted.leader_id != self.broker_id
        ):
            leader = hosted.leader_id
        previous = self._leader_of.get(key)
        if previous is not None and previous != leader:
            self._follow_counts[previous] -= 1
            del self._leader_of[key]
            session = self._sessions.get(previous)
            if session is not None:
                session.set(key, None)
                session.name_always(key, False)
        if hosted is None or leader is None:
            self._corrupt_excluded.discard(key)
            self._held.discard(key)
            return
        if previous != leader:
            self._follow_counts[leader] += 1
            self._leader_of[key] = leader
            self._grown.add(leader)
        session = self._sessions.setdefault(leader, FetchSessionClient())
        if key in self._held:  # throttled (KIP-73): `_throttle` brings it back
            session.set(key, None)
        elif hosted.corrupt_from is None:
            session.set(key, follower_position(hosted))
        else:  # no progress reports until truncated (the scrubber)
            session.set(key, None)
            self._corrupt_excluded.add(key)
        session.name_always(key, self.broker_id not in hosted.isr)

    async def close(self) -> None:
        self._cutting.clear()  # every cancellation now ends its loop
        for task in self._loops.values():
            task.cancel()
        await asyncio.gather(*self._loops.values(), return_exceptions=True)
        self._loops.clear()
        await self._channels.close()

    def _channel(self, leader_id: int) -> grpc.aio.Channel | None:
        broker = self.host.image.brokers.get(leader_id)
        if broker is None:
            return None
        # Its internal listener when it has one (runtime/listeners.py): strangers filling the
        # public one's max.connections must not cut replication.
        return self._channels.get(broker.member_endpoint)

    async def _run(self, leader_id: int) -> None:
        link = leader_link(self.signer)
        try:
            while True:
                await self._fetch_once(leader_id, link)
        finally:
            link.close()

    async def _fetch_once(self, leader_id: int, link: FetchLink) -> None:
        """One fetch from the leader and what follows it: apply, or back off."""
        session = self._sessions.get(leader_id)
        channel = self._channel(leader_id)
        if session is not None:
            # Before the check for an empty session: a session whose every partition was left
            # out as corrupt is empty, and only this brings them back once repaired.
            self._follow_corruption(leader_id, session)
            self._throttle(leader_id, session)
        if session is None or not session.wanted or channel is None:
            await asyncio.sleep(ERROR_BACKOFF_S)
            return
        parts = session.build()
        try:
            response = await self._fetch_unless_cut(leader_id, link, channel, parts)
        except FetchFailed as failed:
            session.reset()
            if failed.code == grpc.StatusCode.PERMISSION_DENIED:
                log.error("replica fetch from %d refused: %s", leader_id, failed.details)
                await asyncio.sleep(REFUSED_BACKOFF_S)
                return
            log.debug("replica fetch from %d failed: %s", leader_id, failed.code)
            await asyncio.sleep(ERROR_BACKOFF_S)
            return
        if response is None:
            # Cut short: the session gained a partition (the link dropped the stream, whose
            # next message would have been this fetch's answer). Start over, naming it.
            session.reset()
            return
        if response.error_code != ErrorCode.NONE:
            log.info("fetch session with %d: %s", leader_id, response.error_message or "error")
            session.reset()
            return
        session.on_answer(parts, response.session_id)
        backoff_s = self._apply(leader_id, session, response)
        if backoff_s:
            await asyncio.sleep(backoff_s)

    async def _fetch_unless_cut(
        self, leader_id: int, link: FetchLink, channel: grpc.aio.Channel, parts: FetchParts
    ) -> broker_pb2.FetchResponse | None:
        """The leader's answer, or None when `reconcile` cut the wait short (FetchFailed when
        none came)."""
        task = asyncio.current_task()
        assert task is not None
        self._parked[leader_id] = task
        try:
            return await link.fetch(channel, _request(self.broker_id, parts), ANSWER_WAIT_S)
        except asyncio.CancelledError:
            if leader_id not in self._cutting:
                if cancelled_by_close():  # the channel was dropped at a TLS rotation
                    raise FetchFailed(grpc.StatusCode.CANCELLED, "the channel closed") from None
                raise  # the loop is stopping
            self._cutting.discard(leader_id)
            if task.uncancel() > 0:
                raise  # cancelled again since the cut: the loop is stopping after all
            return None
        finally:
            self._parked.pop(leader_id, None)

    def _throttle(self, leader_id: int, session: FetchSessionClient) -> None:
        """KIP-73's follower side: a throttled partition outside the ISR leaves the session while
        the follower quota is used up (the leader's session forgets it, so sends it nothing),
        and comes back once it is not. Costs nothing while no follower rate is set here."""
        throttles, image = self.host.throttles, self.host.image
        throttles.refresh(image)
        if throttles.follower.bound >= LONG_MAX and not self._held:
            return
        now_ms = int(time.time() * 1000)
        for key in [key for key, leader in self._leader_of.items() if leader == leader_id]:
            hosted = self.host.get(*key)
            if hosted is None or hosted.corrupt_from is not None:
                continue
            in_isr = self.broker_id in hosted.isr
            if throttles.follower_held(image, key[0], key[1], in_isr, now_ms):
                if key not in self._held:
                    self._held.add(key)
                    session.set(key, None)
                    self.host.metrics.replication_throttled("follower", 0, 1)
            elif key in self._held:
                self._held.discard(key)
                session.set(key, follower_position(hosted))

    def _follow_corruption(self, leader_id: int, session: FetchSessionClient) -> None:
        """Stop fetching partitions the scrubber found corrupt here (no progress reports until
        truncated), and fetch them again once repaired. Costs what is corrupt, which is rare."""
        for key in self.host.corrupt_partitions:
            if key in session.wanted:
                self._follow(key)
        for key in [key for key in self._corrupt_excluded if self._leader_of.get(key) == leader_id]:
            hosted = self.host.get(*key)
            if hosted is None or hosted.corrupt_from is None:
                self._corrupt_excluded.discard(key)
                self._follow(key)

    def _apply(
        self, leader_id: int, session: FetchSessionClient, response: broker_pb2.FetchResponse
    ) -> float:
        """Store what the leader sent; how long to back off before the next fetch: 0 when every
        partition took its answer, else ERROR_BACKOFF_S (the metadata log will say where to go,
        and the leader answers errors without waiting), or LEADER_BEHIND_BACKOFF_S when only
        the leader's metadata is behind."""
        now_ms = int(time.time() * 1000)
        backoff_s = 0.0
        for topic in response.topics:
            for result in topic.partitions:
                key = (topic.name, result.partition)
                hosted = self.host.get(*key)
                sent = session.sent(key)
                if not answer_is_current(hosted, leader_id, sent):
                    continue  # the partition moved on while the fetch was out
                assert hosted is not None  # answer_is_current said so
                if result.records and self.host.throttles.follower_throttled(
                    self.host.image, key[0], key[1], self.broker_id in hosted.isr
                ):
                    self.host.throttles.record_follower(len(result.records), now_ms)
                    self.host.metrics.replication_throttled("follower", len(result.records), 0)
                if not apply_leader_answer(hosted, result, now_ms):
                    behind = _leader_behind(hosted, result)
                    backoff_s = max(
                        backoff_s, LEADER_BEHIND_BACKOFF_S if behind else ERROR_BACKOFF_S
                    )
                session.set(key, follower_position(hosted))
        return backoff_s


def leader_link(signer: MemberSigner) -> FetchLink:
    """How one fetch loop reaches its leader (common/fetch_link.py): a ReplicaFetchStream
    opened with a fresh membership proof each time, or unary Fetch calls with one each."""

    def open_stream(channel: grpc.aio.Channel) -> grpc.aio.StreamStreamCall:
        stub = broker_pb2_grpc.BrokerServiceStub(channel)
        return stub.ReplicaFetchStream(metadata=signer.metadata(STREAM_METHOD))

    async def unary(
        channel: grpc.aio.Channel, request: broker_pb2.FetchRequest, timeout_s: float
    ) -> broker_pb2.FetchResponse:
        stub = broker_pb2_grpc.BrokerServiceStub(channel)
        return await stub.Fetch(request, timeout=timeout_s, metadata=signer.metadata(FETCH_METHOD))

    return FetchLink(
        open_stream=open_stream,
        wrap=lambda request: broker_pb2.ReplicaFetchStreamRequest(request=request),
        unary=unary,
        rpc="ReplicaFetchStream",
    )


def _leader_behind(hosted: HostedPartition, result: FetchPartitionResult) -> bool:
    """Whether a partition's refusal only says the leader has not yet applied the metadata change
    this broker already follows: it knows an older leader epoch than ours (UNKNOWN_LEADER_EPOCH,
    or NOT_LEADER_OR_FOLLOWER naming the leader before it)."""
    if result.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH:
        return True
    return (
        result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        and result.HasField("current_leader")
        and result.current_leader.leader_epoch < hosted.leader_epoch
    )


def _request(broker_id: int, parts: FetchParts) -> broker_pb2.FetchRequest:
    """The fetch for `parts`; one that leaves partitions out for the request limit (`more`) does
    not long-poll, so the rest are named at once rather than one wait later each."""
    return fetch_request(
        parts,
        replica_id=broker_id,
        max_wait_ms=0 if parts.more else FETCH_MAX_WAIT_MS,
        min_bytes=1,
        max_bytes=FETCH_RESPONSE_BYTES,
    )
