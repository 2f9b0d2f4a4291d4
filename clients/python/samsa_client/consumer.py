"""The Consumer: manual assignment over the consumer driver, which runs on one background loop.

Theory of operation. Everything about positions, resets, buffers and which fetches to send is
decided by the fetch state (fetch_state.py, a pure core); everything about the network by the
driver (consumer_driver.py): one event loop on `grpc.aio` that alone sends Fetch and ListOffsets
and feeds their answers to the core. Fetches are pipelined, each in its broker's fetch session
(fetch_sessions.py), so `poll()` normally returns records fetched while the application
processed the last ones. This facade adds a loop thread and no rule:

- `poll()` runs on the caller's thread: under the driver's lock it raises the next pending error
  or takes up to `max.poll.records` decoded records (moving positions), and wakes the driver when
  a partition's buffer emptied (it is fetched again). With nothing buffered it waits on a
  condition the driver notifies when an answer was applied.
- A position that is unknown (just assigned, `seek_to_beginning/end`, or out of range with
  `auto.offset.reset`) is resolved with ListOffsets on the loop; resets set by the application
  are resolved when `poll()` or `position()` asks (Kafka evaluates them lazily), and
  `position()` waits for the answer. A `seek()` drops what is buffered for the partition and any
  answer still in flight for the old offset. Leader changes (NOT_LEADER_OR_FOLLOWER, an
  unreachable broker) mark the metadata stale and the partition is fetched from its new leader.
- Errors found by the driver (an offset out of range with auto.offset.reset=none, a corrupt
  batch, a failed lookup) are raised by the next `poll()` (lookup errors also by `position()`).
- One thread at a time is inside the consumer's calls, as in Kafka (thread_owner.py): a call
  while another thread is inside one raises ConcurrentAccessError; `close()` may come from any
  thread and ends a `poll()` waiting on another, and a metadata call under way on another thread
  (cancelled: closing its channel under it races grpc's C core, channels.py).
- Work for the loop (commits, lookups, the drivers' wakes: every call that changes what the
  drivers do) is handed over under the driver's lock and only while open (consumer_loop.py): a
  call that a close() on another thread overtakes raises the closed consumer's error, as one
  made after it does.

Consumer groups (`group.id`). `subscribe()` joins the group; the group driver (group_driver.py)
heartbeats on the loop, so a slow application never misses a heartbeat (only `max.poll.interval.ms`
without a poll makes it leave; waiting inside poll() counts as polling). What the coordinator
assigns reaches the fetch state through listener steps (rebalance.py) that `poll()` runs on the
caller's thread before taking records: revoked partitions are auto-committed (with
`enable.auto.commit`), the listener is told, and only then are they given back. New partitions
start at the group's committed offsets. `commit()` commits the consumed positions (or given
offsets) with the member's epoch; auto-commit runs from `poll()`, so it commits what was
returned by an earlier poll. `commit_async()`'s callbacks run on the caller's thread, inside a
later `poll()`, `commit()` or `close()` (commit_callbacks.py). A fatal group error is raised once
on_partitions_lost ran.

`AsyncConsumer` (async_consumer.py) runs the same drivers on the caller's own loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from samsa.client.channels import Channels
from samsa.client.client_tls import client_security
from samsa.client.cluster_metadata import ClusterMetadata, TopicPartition
from samsa.client.commit_callbacks import CommitCallbacks
from samsa.client.config import ConsumerConfig
from samsa.client.consumer_calls import (
    LEAVE_TIMEOUT_S,
    POSITION_WAIT_MARGIN_S,
    check_partitions_exist,
    close_deadline,
    group_of,
    offsets_to_commit,
    poll_timer_wait_s,
    take_records,
    within,
)
from samsa.client.consumer_driver import ConsumerDriver
from samsa.client.consumer_offsets import OffsetLookups
from samsa.client.consumer_records import ConsumerRecord
from samsa.client.errors import KafkaError
from samsa.client.fetch_state import EARLIEST, LATEST, OffsetAndTimestamp
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.group_driver import GroupDriver, GroupMetadata, now_ms
from samsa.client.group_member import MemberState
from samsa.client.rebalance import (
    ConsumerRebalanceListener,
    RebalanceStep,
    abandon_step,
    begin_step,
    check_not_subscribed,
    end_step,
    raise_member_error,
    subscribed_topics,
    subscription_of,
)
from samsa.client.record_tracing import poll_tracer, record_spans
from samsa.client.thread_owner import one_thread_at_a_time
from samsa.client.timeouts import checked_timeout
from samsa.common.errors import ErrorCode

__all__ = ["EARLIEST", "LATEST", "Consumer", "ConsumerRecord", "OffsetAndTimestamp"]

log = logging.getLogger(__name__)


@one_thread_at_a_time(exempt={"close"})  # thread_owner.py
class Consumer(OffsetLookups):
    """Kafka's consumer with manual assignment (see the module docstring)."""

    def __init__(self, config: Mapping[str, object]) -> None:
        self.config = ConsumerConfig.from_dict(config)
        self._channels = Channels(security=client_security(config))  # files read once
        self._metadata = ClusterMetadata(self.config.bootstrap_servers, self._channels)
        self._driver = ConsumerDriver(
            self.config, self._metadata, self._notify_progress, self._channels.security
        )
        self._state = self._driver.state  # touched only under self._progress (the driver's lock)
        self._progress = threading.Condition(self._driver.lock)
        self._closed = False
        self._owner = threading.RLock()  # the thread inside a call, if any (thread_owner.py)
        self._closing = False  # a close() runs: another returns at once (set under the lock)
        self._handed_over: set[concurrent.futures.Future[Any]] = set()  # consumer_loop.py
        self._close_deadline: float | None = None  # close(timeout)'s, once close() began
        self._listener = ConsumerRebalanceListener()
        self._commit_callbacks = CommitCallbacks(self._notify_progress)  # commit_callbacks.py
        self._tracer = poll_tracer()  # None: no tracer provider, no per-record work
        self._start_loop()  # and its thread (consumer_loop.py)
        asyncio.run_coroutine_threadsafe(self._driver.start(), self._loop).result()

    # --- assignment and positions -----------------------------------------------------------------

    def subscribe(
        self,
        topics: str | Iterable[str] = (),
        *,
        pattern: str | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Join the group (`group.id`) for these topics, or the topics whose whole name matches
        `pattern`; the coordinator assigns partitions, `listener` is told from `poll()`."""
        self._check_open()
        group = group_of(self._driver, "subscribe()")
        group.join(subscription_of(topics, pattern))
        with self._progress:  # a hand-off to the loop only while open (consumer_loop.py)
            self._check_open()
            self._listener = listener or ConsumerRebalanceListener()
            group.wake_threadsafe()

    def unsubscribe(self) -> None:
        """Give every partition back (on_partitions_revoked, after an auto-commit) and leave."""
        self._unsubscribe()

    def _unsubscribe(self) -> None:  # close() calls it from any thread: not owned by one
        self._check_open()
        group = self._driver.group
        if group is None:
            return
        with self._progress:
            self._check_open()
            group.member.unsubscribe(now_ms())
            group.wake_threadsafe()
        self._run_rebalance_steps(group)
        deadline = min(time.monotonic() + LEAVE_TIMEOUT_S, self._close_deadline or math.inf)
        with self._progress:
            while group.member.state is MemberState.LEAVING:
                self._check_open()  # a close() on another thread notifies: it ends the wait
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    log.warning("group %r: the leave heartbeat was not answered", group.group_id)
                    break
                self._progress.wait(remaining)
            self._state.assign([])

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions, starting at the group's committed offsets (with a
        group.id), else per `auto.offset.reset`."""
        self._check_open()
        assigned = [(topic, int(partition)) for topic, partition in partitions]
        with self._progress:
            check_not_subscribed(self._driver.group)
        topics = {topic for topic, _ in assigned}
        with self._metadata.transient(topics):  # until they are the assignment's, kept
            self._metadata.refresh(topics)
            check_partitions_exist(self._metadata, assigned)
            with self._progress:
                self._check_open()  # closed during the metadata refresh: nothing is handed over
                self._state.assign(assigned)
                self._driver.wake_threadsafe()

    def assignment(self) -> list[TopicPartition]:
        with self._progress:
            return self._state.assignment()

    def subscription(self) -> list[str]:
        """The topics subscribed to, sorted: those given to subscribe(), or for a pattern the
        topics of the current assignment; [] when not subscribed (assign() is not a
        subscription)."""
        group = self._driver.group
        with self._progress:
            subscription = None if group is None else group.member.subscription
            return subscribed_topics(subscription, self._state.assignment())

    def seek(self, tp: TopicPartition, offset: int) -> None:
        with self._progress:  # the wake only while open (consumer_loop.py)
            self._check_open()
            self._state.seek(tp, offset)
            self._driver.wake_threadsafe()

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        with self._progress:
            self._check_open()
            self._state.seek_to(partitions, EARLIEST)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        with self._progress:
            self._check_open()
            self._state.seek_to(partitions, LATEST)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching these partitions and returning their records until `resume`. The
        driver is woken: records of theirs waiting for poll() held back their brokers' next
        fetch, which poll() no longer sends by taking them (the driver's idle turn did, 0.5 s
        later)."""
        with self._progress:
            self._check_open()
            self._state.pause(partitions)
            self._driver.wake_threadsafe()

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        with self._progress:
            self._check_open()
            self._state.resume(partitions)
            self._driver.wake_threadsafe()

    def paused(self) -> list[TopicPartition]:
        with self._progress:
            return self._state.paused()

    def position(self, tp: TopicPartition) -> int:
        """The offset of the next record poll() returns for `tp` (looked up if need be)."""
        deadline = time.monotonic() + self.config.session_timeout_ms / 1000
        deadline += POSITION_WAIT_MARGIN_S
        with self._progress:
            self._check_open()  # before the wake below (consumer_loop.py)
            self._state.position(tp)  # not assigned: raises
            if self._state.request_resets():
                self._driver.wake_threadsafe()
            while True:
                self._check_open()  # close() notifies under this lock: it ends the wait
                error = self._state.pop_lookup_error()
                if error is not None:
                    raise error
                position = self._state.position(tp)
                if position is not None:
                    return position
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KafkaError(
                        f"no position for {tp[0]}-{tp[1]}: ListOffsets did not complete",
                        ErrorCode.LEADER_NOT_AVAILABLE,
                    )
                self._progress.wait(remaining)

    def positions(self) -> dict[TopicPartition, int]:
        """The known position of every assigned partition (none while a reset is pending)."""
        with self._progress:
            return self._state.positions()

    def commit(
        self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None
    ) -> None:
        """Commit these offsets (the next offsets to read), or the consumed positions of every
        assigned partition; waits for the coordinator's answer. CommitFailedError when this
        member is no longer in the group. The callbacks of the commit_async() calls before it
        have run when it returns (as Kafka's commitSync guarantees)."""
        self._check_open()
        group = group_of(self._driver, "commit()")
        self._commit_callbacks.run_completed()
        try:
            self._on_loop(group.commit(offsets_to_commit(self._driver, offsets)))
        finally:  # the commits before it ended before it (they are sent in order)
            self._commit_callbacks.run_completed()

    def commit_async(
        self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None
    ) -> concurrent.futures.Future[None]:
        """commit() without waiting: the future completes with the coordinator's answer, and
        its `add_done_callback` callbacks run on this consumer's thread, inside the next poll(),
        commit() or close() after that (Kafka's OffsetCommitCallback), in the order of the
        commit_async() calls, so they may call the consumer (commit_callbacks.py)."""
        group = group_of(self._driver, "commit_async()")
        self._check_open()
        self._commit_callbacks.run_completed()
        commit = self._submit(group.commit(offsets_to_commit(self._driver, offsets)))
        return self._commit_callbacks.track(commit)

    def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offset of each partition (None: nothing committed)."""
        self._check_open()
        group = group_of(self._driver, "committed()")
        wanted = [(topic, int(partition)) for topic, partition in partitions]
        return self._on_loop(group.fetch_committed(wanted))

    def group_metadata(self) -> GroupMetadata:
        """This consumer's group id, member id and epoch."""
        self._check_open()
        return group_of(self._driver, "group_metadata()").metadata()

    def poll(self, timeout: float = 0.0) -> list[ConsumerRecord]:
        """Up to `max.poll.records` records, waiting up to `timeout` seconds (>= 0) for some.
        With a group, listener calls run here first (see the module docstring)."""
        deadline = time.monotonic() + checked_timeout(timeout)
        limit = self.config.max_poll_records
        state = self._state
        group = self._driver.group
        while True:
            self._check_open()  # close() on another thread ends a poll() waiting here
            self._commit_callbacks.run_completed()  # commit_async()'s, ended since
            if group is not None:  # each turn: waiting in poll() is polling (as in Kafka)
                self._group_poll(group)
                self._run_rebalance_steps(group)
                raise_member_error(group.member, self._progress)
            with self._progress:
                # Again, under the lock that close() sets _closed under and that is held until
                # the wait: a close() since the check above is seen here, or its notify ends it.
                self._check_open()
                if state.request_resets():
                    self._driver.wake_threadsafe()
                try:
                    records = take_records(state, limit)
                except Exception:
                    self._driver.wake_threadsafe()  # the partition is fetched again
                    raise
                if records:
                    self._driver.wake_threadsafe()  # fetch what is no longer buffered
                    if self._tracer is not None:
                        record_spans(self._tracer, records, self.config.group_id)
                    return records
                if group is not None and group.member.pending_callback() is not None:
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                self._progress.wait(min(remaining, poll_timer_wait_s(self.config)))

    def _group_poll(self, group: GroupDriver) -> None:
        """At each poll: the poll timer restarts, a fatal group error is raised, and the
        auto-commit runs when due (positions returned by earlier polls, so processed)."""
        was_stale, due = group.on_poll()
        with self._progress:  # a hand-off to the loop only while open (consumer_loop.py)
            self._check_open()
            if was_stale:
                group.wake_threadsafe()
            if due:
                self._loop.call_soon_threadsafe(group.spawn, group.commit_in_background(due))

    def _run_rebalance_steps(self, group: GroupDriver) -> None:
        """Run every pending listener call, on this thread (rebalance.py)."""
        while True:
            with self._progress:
                self._check_open()  # no listener call begins once closed
                step = begin_step(group.member, self._state, self.config.enable_auto_commit)
            if step is None:
                return
            try:
                failure = self._run_step(group, step)
            except BaseException:  # KeyboardInterrupt: the step runs again at the next poll
                with self._progress:
                    abandon_step(group.member, self._state, step, now_ms())
                    self._wake_drivers(group)
                raise
            with self._progress:
                end_step(group.member, self._state, step, now_ms())
                self._wake_drivers(group)
            if failure is not None:
                raise failure

    def _run_step(self, group: GroupDriver, step: RebalanceStep) -> Exception | None:
        """The commit before revocation, then the listener (what it raised: poll() raises it)."""
        if step.commit_first:
            try:
                self._on_loop(self._commit_first(group, step.commit_first))
            except KafkaError as error:
                self._check_open()  # closed meanwhile: the step is abandoned, poll() raises
                log.warning("group %r: commit before revocation failed: %s", group.group_id, error)
        try:
            step.listener_method(self._listener)(step.partitions)
        except Exception as error:
            return error
        return None

    async def _commit_first(
        self, group: GroupDriver, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """On the loop, so that a refused hand-off leaves no inner coroutine never awaited."""
        commit, what = group.commit(offsets), "the commit before revocation"
        await within(commit, self._close_deadline, group, what)

    def close(self, timeout: float | None = None) -> None:
        """Leave the group (after on_partitions_revoked and an auto-commit), or with assign()
        and a group.id auto-commit the positions; stop fetching (a poll() waiting on another
        thread raises). `timeout` (seconds, default 30, as Kafka's close(Duration)) bounds the
        revocation's commit, the leave and the commit at close together; what is not done by then
        is given up (logged; the group drops the member at its session timeout). A close() while
        another runs (another thread's, or a listener's inside it) returns at once."""
        if self._closed:
            return
        deadline = close_deadline(timeout)
        with self._progress:  # one close(): another thread's, or a listener's inside this one,
            if self._closing:  # would stop the loop under it (or it under them)
                return
            self._closing = True
        self._close_deadline = deadline
        try:
            self._leave_at_close(deadline)
        except BaseException:  # not closed: a later close() tries again
            with self._progress:
                self._closing = False
            raise
        with self._progress:  # poll() checks _closed under the lock and keeps it till it waits
            self._closed = True
            self._progress.notify_all()  # a poll() waiting on another thread ends now
        self._metadata.stop_waiting()  # a refresh retrying an unreachable cluster ends now
        # and its call under way to a silent one (up to 5 s) too: cancelled, not closed under
        # (channels.py); the channels close once that call has left.
        self._channels.close()
        self._stop_loop()
        self._commit_callbacks.run_completed()  # every commit ended (or was cancelled) by now

    def _leave_at_close(self, deadline: float) -> None:
        """close()'s work with the group, apart so that a failure of it leaves close() undone."""
        group = self._driver.group
        if group is not None and group.member.state is not MemberState.UNSUBSCRIBED:
            try:
                self._unsubscribe()
            except Exception:  # closing goes on: the session timeout removes the member
                log.exception("group %r: leaving at close failed", group.group_id)
        if group is not None:
            self._on_loop(within(group.commit_at_close(), deadline, group, "the commit at close"))

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _read_replicas(self) -> dict[TopicPartition, int]:
        """The replicas leaders told this consumer to read from (KIP-392); for tests."""
        with self._progress:
            return self._state.read_replicas()
