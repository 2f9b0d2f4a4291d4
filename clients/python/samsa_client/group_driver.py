"""The group driver: a consumer's membership and offsets, on the consumer driver's loop.

Theory of operation. The group member (group_member.py, a pure core written as one transition
table) decides everything about membership: when to heartbeat, what to report as owned, which
listener call comes next. The fetch state (fetch_state.py) holds positions. This module does the
group's I/O on `grpc.aio`, on the same loop as the fetches, under the consumer driver's `lock`
(held for pure calls only):

- `_run` is one task: it checks `max.poll.interval.ms`, finds the group's coordinator when it is
  not known, and sends the heartbeat the member asks for. The answer goes to the member; then
  `on_progress` wakes a waiting `poll()`, since a listener call may now be pending. Heartbeats
  never wait for the application: `poll()` only runs listener calls (`_run_rebalance_steps` of
  the facades, consumer.py and async_consumer.py). A heartbeat that fails is retried, except one
  the coordinator refuses as sent (INVALID_ARGUMENT, RESOURCE_EXHAUSTED): sent again it would be
  refused again, so the member fails (FATAL) with the coordinator's reason and `poll()` raises it.
- `commit()` and `fetch_committed()` are the OffsetCommit and OffsetFetch loops: sent to the
  coordinator (in parts it takes: offset_commit_parts.py), found again after NOT_COORDINATOR and the
  like, retried until `default.api.timeout.ms`. A commit refused with STALE_MEMBER_EPOCH is sent
  again with the epoch the next heartbeat brings, only while its offsets are still the member's own
  (group_commit.py: still in the group, never out of it since the commit was handed over, still
  owning the partitions it owned then; else CommitFailedError); UNKNOWN_MEMBER_ID or
  FENCED_MEMBER_EPOCH mean its partitions may already be someone else's: CommitFailedError.
- Finding the coordinator (FindCoordinator on the bootstrap servers: every service answers it),
  forgetting it after a coordinator error and asking it until answered: group_coordinator_calls.py.
- The consumer driver resolves the COMMITTED resets of the fetch state through
  `fetch_committed()` (a partition newly assigned starts at the group's committed offset).

Listener calls run from the application's `poll()`, never here: see rebalance.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from samsa.client import offset_commit_parts
from samsa.client.channels import AioChannels
from samsa.client.client_identity import consumer_client_id
from samsa.client.config import ConsumerConfig
from samsa.client.errors import KafkaError
from samsa.client.fetch_state import FetchState
from samsa.client.group_admin import (
    COORDINATOR_ERRORS,
    OffsetAndMetadata,
    commit_error_of,
    first_commit_error_of,
    offset_fetch_request,
    offsets_of,
)
from samsa.client.group_commit import IN_GROUP, CommitStart, commit_refused, commit_request
from samsa.client.group_commit import CommitFailedError as CommitFailedError  # the public name
from samsa.client.group_coordinator_calls import GroupCoordinatorCalls, heartbeat_refusal, status
from samsa.client.group_member import GroupMember, MemberSettings, MemberState, Subscription
from samsa.client.rebalance import member_error
from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as c

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

# The most partitions one OffsetCommit or OffsetFetch may name (the coordinator refuses more).
REQUEST_PARTITIONS_MAX = limits.request_partitions_max
# One heartbeat's deadline: well inside any session, so a hung coordinator is left in time.
HEARTBEAT_TIMEOUT_S = 5.0
# The longest the group task sleeps with nothing scheduled.
IDLE_WAIT_S = 0.5


@dataclass(frozen=True)
class GroupMetadata:
    """Who this consumer is in its group (for transactions' send_offsets_to_transaction)."""

    group_id: str
    member_id: str
    member_epoch: int
    group_instance_id: str | None


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class GroupDriver:
    """See the module docstring. Runs on the consumer driver's loop; `member` and `state` are
    touched only under `lock`."""

    def __init__(
        self,
        config: ConsumerConfig,
        lock: threading.Lock,
        state: FetchState,
        bootstrap: Sequence[str],
        channels: AioChannels,
        on_progress: Callable[[], None],
        client_id: str | None = None,  # the consumer's effective one, as its fetches send
    ) -> None:
        assert config.group_id is not None, "a group driver needs a group.id"
        self.config = config
        self.group_id = config.group_id
        self.lock = lock
        self.state = state
        self.member = GroupMember(
            MemberSettings(
                group_id=config.group_id,
                member_id=str(uuid.uuid4()),
                instance_id=config.group_instance_id or "",
                client_id=client_id or consumer_client_id(config.client_id, config.group_id),
                rebalance_timeout_ms=config.max_poll_interval_ms,
                max_poll_interval_ms=config.max_poll_interval_ms,
                server_assignor=config.group_remote_assignor,
                retry_backoff_ms=config.retry_backoff_ms,
            )
        )
        self._coordinator = GroupCoordinatorCalls(config, bootstrap, channels)
        self._on_progress = on_progress
        self._auto_commit_due_ms = now_ms() + config.auto_commit_interval_ms
        self._commit_order = asyncio.Lock()  # commits go one after the other (commit())
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._wake_scheduled = False
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- any thread -------------------------------------------------------------------------------

    def wake_threadsafe(self) -> None:
        if self._wake_scheduled or self._loop is None:
            return
        self._wake_scheduled = True
        self._loop.call_soon_threadsafe(self.wake)

    def metadata(self) -> GroupMetadata:
        with self.lock:
            return GroupMetadata(
                self.group_id,
                self.member.settings.member_id,
                self.member.member_epoch,
                self.config.group_instance_id,
            )

    def join(self, subscription: Subscription) -> None:
        """subscribe(): refused after assign() and once the member failed for good."""
        with self.lock:
            member = self.member
            if self.state.assignment() and member.state is MemberState.UNSUBSCRIBED:
                raise KafkaError(
                    "subscribe() cannot be used after assign(): assign([]) first",
                    ErrorCode.INVALID_REQUEST,
                )
            error = member_error(member)
            if error is not None:
                raise error
            member.subscribe(subscription, now_ms())

    def on_poll(self) -> tuple[bool, dict[TopicPartition, OffsetAndMetadata] | None]:
        """At each poll: the poll timer restarts, a fatal error is raised, and the offsets to
        auto-commit are returned when due (positions returned by earlier polls, so processed).
        Also whether the group task must be woken (a stale member rejoins)."""
        now = now_ms()
        with self.lock:
            was_stale = self.member.state is MemberState.STALE
            self.member.on_poll(now)
            error = member_error(self.member)
            if error is not None:
                raise error
            return was_stale, self.auto_commit_due(now)

    # --- the loop ---------------------------------------------------------------------------------

    def wake(self) -> None:
        self._wake_scheduled = False
        if self._wake is not None:
            self._wake.set()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._task = self._loop.create_task(self._run(), name="samsa-group-driver")

    async def stop(self) -> None:
        assert self._task is not None and self._wake is not None, "stop() before start()"
        self._stopping = True
        # The loop too is cancelled, not awaited: its FindCoordinator to a silent cluster (5 s per
        # bootstrap server) held close() past its timeout.
        tasks, self._tasks = [self._task, *self._tasks], set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        assert self._loop is not None
        task = self._loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _run(self) -> None:
        assert self._wake is not None
        while not self._stopping:
            self._wake.clear()
            try:
                wait_s = await self._turn()
            except Exception:
                log.exception("group driver error")
                wait_s = self.config.retry_backoff_ms / 1000
            if wait_s > 0 and not self._stopping:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait_s):
                        await self._wake.wait()

    async def _turn(self) -> float:
        """Send the heartbeat that is due; returns how long to sleep unless woken."""
        with self.lock:
            self.member.check_poll_interval(now_ms())
            due = self.member.heartbeat_due_ms()
        if due is None:
            return IDLE_WAIT_S
        wait_ms = due - now_ms()
        if wait_ms > 0:
            return min(IDLE_WAIT_S, wait_ms / 1000)
        try:
            endpoint = await self._coordinator.find()
        except KafkaError as error:  # the cluster refuses this group id: nothing will change it
            with self.lock:
                if self.member.state in IN_GROUP or self.member.state is MemberState.JOINING:
                    self.member.on_heartbeat_failed(error.code, str(error), now_ms())
            self._on_progress()
            return IDLE_WAIT_S
        if endpoint is None:
            return self.config.retry_backoff_ms / 1000
        with self.lock:
            request = self.member.heartbeat_request(now_ms())
        if request is not None:
            self.spawn(self._heartbeat(endpoint, request))
        return IDLE_WAIT_S

    async def _heartbeat(self, endpoint: str, request: c.ConsumerGroupHeartbeatRequest) -> None:
        stub = self._coordinator.stub(endpoint)
        try:
            answer = await stub.ConsumerGroupHeartbeat(request, timeout=HEARTBEAT_TIMEOUT_S)
        except grpc.RpcError as error:
            code, refusal = heartbeat_refusal(error)
            if refusal is not None:  # sent again, it is refused again: the member fails
                log.warning("group %r: %s", self.group_id, refusal)
                with self.lock:
                    self.member.on_heartbeat_failed(code, refusal, now_ms())
            else:
                log.info("heartbeat to the coordinator at %s failed: %s", endpoint, status(error))
                self._coordinator.forget(endpoint)
                with self.lock:
                    self.member.on_heartbeat_failed(
                        ErrorCode.NETWORK_EXCEPTION, status(error), now_ms()
                    )
        else:
            if answer.error_code in COORDINATOR_ERRORS:
                self._coordinator.forget(endpoint)
            with self.lock:
                self.member.on_heartbeat_answer(answer, now_ms())
        self._on_progress()
        assert self._wake is not None
        self._wake.set()

    # --- offsets ----------------------------------------------------------------------------------

    def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> Coroutine[Any, Any, None]:
        """Commit these offsets: with this member's id and epoch while it is in the group, from
        outside the group protocol while it is not subscribed (assign() with a group.id); in the
        requests the coordinator takes (offset_commit_parts.py), one commit after the other (as
        Kafka's commitSync waits for those before it). What the member owns is taken now, as the
        offsets were, not when the coroutine first runs: a commit_async() task could start after
        a revocation, and then commit (and retry at the new epoch) a partition it gave away.
        Auto-commit remembers the offsets as the group's until the commit fails
        (auto_commit_memory.py)."""
        with self.lock:
            start = CommitStart.of(self.member)
            committing = {tp: at.offset for tp, at in offsets.items()}
            self.state.auto_committed.remember(committing, set(self.state.assignment()))
        return self._commit_in_order(offsets, start)

    async def _commit_in_order(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], start: CommitStart
    ) -> None:
        parts = offset_commit_parts.commit_parts_of(self.group_id, offsets, REQUEST_PARTITIONS_MAX)
        try:
            async with self._commit_order:  # in order: an older retry never lands after a newer
                for part in parts:
                    await self._commit({tp: offsets[tp] for tp in part}, start)
        except BaseException:  # failed or cancelled: the group's offset may be what it was
            with self.lock:
                self.state.auto_committed.forget(offsets)
            raise

    async def _commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], start: CommitStart
    ) -> None:
        if not offsets:
            return
        deadline = time.monotonic() + self.config.default_api_timeout_ms / 1000
        while True:
            with self.lock:
                request = commit_request(self.member, self.group_id, offsets, start)
            answer = await self._coordinator.ask(
                "OffsetCommit", request, lambda x: first_commit_error_of(x)[0]
            )
            code, message = first_commit_error_of(answer)
            if code == ErrorCode.NONE:
                return
            if code == ErrorCode.STALE_MEMBER_EPOCH and time.monotonic() < deadline:
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)  # a heartbeat's epoch
                continue
            refused = commit_error_of(self.group_id, answer)  # per topic: the others stored
            if code == ErrorCode.TOPIC_AUTHORIZATION_FAILED and refused is not None:
                raise refused
            raise commit_refused(code, message, subscribed=bool(request.member_id))

    async def fetch_committed(
        self, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offset of each partition (None: none committed). Under
        read_committed (KIP-447) offsets an open transaction is committing are waited for: the
        coordinator answers UNSTABLE_OFFSET_COMMIT until that transaction ends."""
        found: dict[TopicPartition, OffsetAndMetadata | None] = {}
        for part in parts_of(partitions):
            found.update(await self._fetch_committed(part))
        return found

    async def _fetch_committed(
        self, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        request = offset_fetch_request(self.group_id, partitions)
        request.require_stable = self.config.isolation_level == "read_committed"
        deadline = time.monotonic() + self.config.default_api_timeout_ms / 1000
        while True:
            answer = await self._coordinator.ask("OffsetFetch", request, _offset_fetch_error)
            if _offset_fetch_error(answer) != ErrorCode.UNSTABLE_OFFSET_COMMIT:
                break
            if time.monotonic() >= deadline:
                raise KafkaError(
                    f"group {self.group_id!r}: an open transaction kept committing offsets "
                    f"for longer than default.api.timeout.ms "
                    f"({self.config.default_api_timeout_ms})",
                    ErrorCode.UNSTABLE_OFFSET_COMMIT,
                )
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
        found = offsets_of(answer)
        return {tp: found.get(tp) for tp in partitions}

    async def resolve_committed(self, tokens: Mapping[TopicPartition, int]) -> None:
        """Resolve the fetch state's COMMITTED resets (tp -> token)."""
        try:
            found = await self.fetch_committed(list(tokens))
        except asyncio.CancelledError:
            raise
        except Exception as error:
            with self.lock:
                self.state.on_lookup_failed(tokens, error)
            return
        with self.lock:
            committed = {tp: at for tp, at in found.items() if at is not None}
            self.state.on_offsets_found(
                {tp: (tokens[tp], at.offset) for tp, at in committed.items()},
                {tp: at.leader_epoch for tp, at in committed.items()},
            )
            self.state.on_committed_missing(
                {tp: tokens[tp] for tp, at in found.items() if at is None}
            )

    def auto_commit_due(self, now: int) -> dict[TopicPartition, OffsetAndMetadata] | None:
        """Under the lock, from poll(): the consumed positions to auto-commit now (those that
        moved since the last auto-commit), or None when it is not time yet."""
        if not self.config.enable_auto_commit or now < self._auto_commit_due_ms:
            return None
        self._auto_commit_due_ms = now + self.config.auto_commit_interval_ms
        return self._moved_since_auto_commit()

    async def commit_at_close(self) -> None:
        """At close() of a consumer that assign()ed partitions with a group.id: the last
        auto-commit, awaited (Kafka's close commits synchronously; a subscribed member commits
        before on_partitions_revoked as it leaves instead). A failure is logged."""
        with self.lock:
            if self.member.state is not MemberState.UNSUBSCRIBED:
                return
            offsets = self._moved_since_auto_commit() if self.config.enable_auto_commit else None
        if offsets:
            await self.commit_in_background(offsets)

    def _moved_since_auto_commit(self) -> dict[TopicPartition, OffsetAndMetadata] | None:
        """The consumed positions that moved since the last auto-commit: of the partitions owned
        in the group, or with assign() (no subscription) of every assigned partition, committed
        from outside the group protocol as Kafka's consumer does. A partition that left the
        consumer since is committed whatever its position (auto_commit_memory.py)."""
        if self.member.state is MemberState.UNSUBSCRIBED:
            consumed = self.state.consumed()
        elif self.member.state in IN_GROUP:
            consumed = self.state.consumed(self.member.owned)
        else:
            return None
        moved = self.state.auto_committed.moved(consumed)
        return {tp: OffsetAndMetadata(at, epoch) for tp, (at, epoch) in moved.items()} or None

    async def commit_in_background(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """An auto-commit: failures are logged (the next one, or a revocation's, covers them)."""
        try:
            await self.commit(offsets)
        except KafkaError as error:  # commit() forgot the offsets: the next one sends them
            log.warning("auto-commit of group %r failed: %s", self.group_id, error)


def parts_of(partitions: list[TopicPartition]) -> list[list[TopicPartition]]:
    """`partitions` in runs of at most REQUEST_PARTITIONS_MAX, the most one request may name."""
    return offset_commit_parts.parts_of(partitions, REQUEST_PARTITIONS_MAX)


def _offset_fetch_error(answer: c.OffsetFetchResponse) -> int:
    if answer.error_code != ErrorCode.NONE:
        return answer.error_code
    for topic in answer.topics:
        for partition in topic.partitions:
            if partition.error_code != ErrorCode.NONE:
                return partition.error_code
    return ErrorCode.NONE
