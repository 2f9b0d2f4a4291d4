"""AsyncConsumer: the consumer driver on the caller's own event loop (aiokafka's habit).

    async with AsyncConsumer({"bootstrap.servers": "...", "auto.offset.reset": "earliest"}) as c:
        await c.assign([("events", 0)])              # checks the partitions exist
        records = await c.poll(timeout=1.0)            # up to max.poll.records ConsumerRecords

Theory of operation. The same `ConsumerDriver` and fetch-state core as the sync `Consumer`
(consumer_driver.py, fetch_state.py), but the driver runs on the caller's loop, so there is no
thread hand-off: `poll()` takes records from the core and, when a partition's buffer emptied,
calls the driver's `wake()`, which sends that partition's next fetch at once. With nothing
buffered, `poll()` waits on an event the driver sets when it applied an answer. Calls that only
change the core (seek, pause, resume) are plain methods; calls that need the network (assign
checks the partitions exist, position may look an offset up, offsets_for_times) are coroutines.
Only metadata reads leave the loop: they use sync gRPC in a worker thread (`asyncio.to_thread`),
which stop() cancels rather than close the channel under it (that races grpc's C core: channels.py).

Groups work as in the sync Consumer (consumer.py's docstring): `subscribe()` joins, `poll()` runs
the listener steps first (a listener's methods may be coroutines: they are awaited), `commit()`
and `committed()` are coroutines, `commit_async()` returns a task, and `stop()` (or `close()`,
as the sync Consumer names it) leaves the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import time
from collections.abc import Iterable, Mapping

from samsa.client import fork_safety
from samsa.client.async_lifecycle import check_loop, check_not_started
from samsa.client.channels import Channels
from samsa.client.client_tls import client_security
from samsa.client.cluster_metadata import ClusterMetadata, TopicPartition
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
from samsa.client.consumer_records import ConsumerRecord
from samsa.client.errors import KafkaError
from samsa.client.fetch_state import EARLIEST, LATEST, OffsetAndTimestamp
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.group_driver import GroupDriver, GroupMetadata, now_ms
from samsa.client.group_member import MemberState
from samsa.client.listed_offsets import timestamp_specs
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
from samsa.client.timeouts import checked_timeout
from samsa.common.errors import ErrorCode

log = logging.getLogger(__name__)


class AsyncConsumer:
    """Kafka's consumer with manual assignment, for asyncio callers (see the module doc)."""

    _forked = False  # set in a process forked after it was made (fork_safety.py)

    def __init__(self, config: Mapping[str, object]) -> None:
        self.config = ConsumerConfig.from_dict(config)
        self._channels = Channels(security=client_security(config))  # files read once
        self._metadata = ClusterMetadata(self.config.bootstrap_servers, self._channels)
        self._progress = asyncio.Event()  # set by the driver after it applied an answer
        self._driver: ConsumerDriver | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # start()'s (async_lifecycle.py)
        self._closed = False
        fork_safety.track(self)
        fork_safety.call_in_child(self)
        self._closing = False  # a stop() runs: another returns at once
        self._close_deadline: float | None = None  # stop(timeout)'s, once stop() began
        self._listener = ConsumerRebalanceListener()
        self._tracer = poll_tracer()  # None: no tracer provider, no per-record work

    async def start(self) -> None:
        self._check_not_forked()
        check_not_started(self._loop, "AsyncConsumer")
        self._loop = asyncio.get_running_loop()
        self._driver = ConsumerDriver(
            self.config, self._metadata, self._progress.set, self._channels.security
        )
        await self._driver.start()

    def after_fork_in_child(self) -> None:
        """A child that runs the parent's loop on gives the drivers no turn (fork_safety.py)."""
        if self._driver is not None:
            fork_safety.stop_in_child(self._driver, self._driver.group)

    def _check_not_forked(self) -> None:
        if self._forked:  # in a process forked after it was made (fork_safety.py)
            raise fork_safety.forked_error("AsyncConsumer")

    def _started(self) -> ConsumerDriver:
        self._check_not_forked()
        if self._driver is None or self._closed:
            raise KafkaError(
                "the consumer is not started (await start()) or is stopped",
                ErrorCode.INVALID_REQUEST,
            )
        check_loop(self._loop, "AsyncConsumer")
        return self._driver

    # --- assignment and positions -----------------------------------------------------------------

    def subscribe(
        self,
        topics: str | Iterable[str] = (),
        *,
        pattern: str | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Join the group for these topics or the topics matching `pattern` (see Consumer)."""
        group = group_of(self._started(), "subscribe()")
        group.join(subscription_of(topics, pattern))
        self._listener = listener or ConsumerRebalanceListener()
        group.wake()

    async def unsubscribe(self) -> None:
        """Give every partition back (on_partitions_revoked, after an auto-commit) and leave."""
        driver = self._started()
        group = driver.group
        if group is None:
            return
        with driver.lock:
            group.member.unsubscribe(now_ms())
        group.wake()
        await self._run_rebalance_steps(driver, group)
        deadline = min(time.monotonic() + LEAVE_TIMEOUT_S, self._close_deadline or math.inf)
        while group.member.state is MemberState.LEAVING:
            self._started()  # stop() in another task sets the event after _closed: it ends here
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                log.warning("group %r: the leave heartbeat was not answered", group.group_id)
                break
            self._progress.clear()
            await self._wait_for_progress(remaining)
        with driver.lock:
            driver.state.assign([])

    async def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions, starting at the group's committed offsets (with a
        group.id), else per `auto.offset.reset`."""
        driver = self._started()
        check_not_subscribed(driver.group)
        assigned = [(topic, int(partition)) for topic, partition in partitions]
        topics = {topic for topic, _ in assigned}
        with self._metadata.transient(topics):  # until they are the assignment's, kept
            await asyncio.to_thread(self._metadata.refresh, topics)
            check_partitions_exist(self._metadata, assigned)
            with driver.lock:
                self._started()  # stopped during the refresh: a stopped consumer assigns nothing
                driver.state.assign(assigned)
        driver.wake()

    def assignment(self) -> list[TopicPartition]:
        return self._started().state.assignment()

    def subscription(self) -> list[str]:
        """The topics subscribed to (see Consumer.subscription)."""
        driver = self._started()
        group = driver.group
        with driver.lock:
            subscription = None if group is None else group.member.subscription
            return subscribed_topics(subscription, driver.state.assignment())

    def seek(self, tp: TopicPartition, offset: int) -> None:
        driver = self._started()
        with driver.lock:
            driver.state.seek(tp, offset)
        driver.wake()

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        driver = self._started()
        with driver.lock:
            driver.state.seek_to(partitions, EARLIEST)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        driver = self._started()
        with driver.lock:
            driver.state.seek_to(partitions, LATEST)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching these partitions and returning their records until `resume` (see
        Consumer.pause: their brokers' other partitions are fetched at once)."""
        driver = self._started()
        with driver.lock:
            driver.state.pause(partitions)
        driver.wake()

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        driver = self._started()
        with driver.lock:
            driver.state.resume(partitions)
        driver.wake()

    def paused(self) -> list[TopicPartition]:
        return self._started().state.paused()

    def positions(self) -> dict[TopicPartition, int]:
        return self._started().state.positions()

    async def position(self, tp: TopicPartition) -> int:
        """The offset of the next record poll() returns for `tp` (looked up if need be)."""
        driver = self._started()
        state = driver.state
        loop = asyncio.get_running_loop()
        wait_s = self.config.session_timeout_ms / 1000 + POSITION_WAIT_MARGIN_S
        deadline = loop.time() + wait_s
        state.position(tp)  # not assigned: raises
        if state.request_resets():
            driver.wake()
        while True:
            self._progress.clear()
            self._started()  # stop() sets the event after _closed: it ends the wait
            error = state.pop_lookup_error()
            if error is not None:
                raise error
            position = state.position(tp)
            if position is not None:
                return position
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise KafkaError(
                    f"no position for {tp[0]}-{tp[1]}: ListOffsets did not complete",
                    ErrorCode.LEADER_NOT_AVAILABLE,
                )
            await self._wait_for_progress(remaining)

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The first offset whose timestamp is >= the given one, per partition (None: none);
        ValueError for a negative timestamp."""
        answers = await self._list_offsets(timestamp_specs(timestamps))
        return {
            tp: None if offset < 0 else OffsetAndTimestamp(offset, timestamp)
            for tp, (offset, timestamp) in answers.items()
        }

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        answers = await self._list_offsets({tp: (EARLIEST, 0) for tp in partitions})
        return {tp: offset for tp, (offset, _) in answers.items()}

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        answers = await self._list_offsets({tp: (LATEST, 0) for tp in partitions})
        return {tp: offset for tp, (offset, _) in answers.items()}

    async def _list_offsets(
        self, wanted: Mapping[TopicPartition, tuple[int, int]]
    ) -> dict[TopicPartition, tuple[int, int]]:
        driver = self._started()
        return await driver.list_offsets(wanted, self.config.default_api_timeout_ms / 1000)

    # --- committed offsets ------------------------------------------------------------------------

    async def commit(
        self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None
    ) -> None:
        """Commit these offsets, or the consumed positions of every assigned partition."""
        driver = self._started()
        await group_of(driver, "commit()").commit(offsets_to_commit(driver, offsets))

    def commit_async(
        self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None
    ) -> asyncio.Task[None]:
        """commit() without waiting: the offsets are taken now (the consumed positions by
        default), the task completes with the coordinator's answer."""
        driver = self._started()
        group = group_of(driver, "commit_async()")
        return group.spawn(group.commit(offsets_to_commit(driver, offsets)))

    async def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offset of each partition (None: nothing committed)."""
        group = group_of(self._started(), "committed()")
        return await group.fetch_committed([(topic, int(p)) for topic, p in partitions])

    def group_metadata(self) -> GroupMetadata:
        return group_of(self._started(), "group_metadata()").metadata()

    # --- fetching ---------------------------------------------------------------------------------

    async def poll(self, timeout: float = 0.0) -> list[ConsumerRecord]:
        """Up to `max.poll.records` records, waiting up to `timeout` seconds (>= 0) for some.
        With a group, listener calls run here first."""
        driver = self._started()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + checked_timeout(timeout)
        limit = self.config.max_poll_records
        state = driver.state
        group = driver.group
        while True:
            # Cleared before this turn's first await, not after: a stop() or an answer during
            # the rebalance steps leaves the event set, so the wait below returns at once.
            self._progress.clear()
            self._started()  # stop() in another task ends a poll() waiting here
            if group is not None:  # each turn: waiting in poll() is polling (as in Kafka)
                self._group_poll(group)
                await self._run_rebalance_steps(driver, group)
                raise_member_error(group.member, driver.lock)
            if state.request_resets():
                driver.wake()
            try:
                with driver.lock:  # uncontended: only this loop uses the core
                    records = take_records(state, limit)
            except Exception:
                driver.wake()  # the partition is fetched again
                raise
            if records:
                driver.wake_soon()  # fetch what is no longer buffered
                if self._tracer is not None:
                    record_spans(self._tracer, records, self.config.group_id)
                return records
            if group is not None and group.member.pending_callback() is not None:
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            await self._wait_for_progress(min(remaining, poll_timer_wait_s(self.config)))

    def _group_poll(self, group: GroupDriver) -> None:
        """As Consumer._group_poll: the poll timer, a fatal error, the auto-commit."""
        was_stale, due = group.on_poll()
        if was_stale:
            group.wake()
        if due:
            group.spawn(group.commit_in_background(due))

    async def _run_rebalance_steps(self, driver: ConsumerDriver, group: GroupDriver) -> None:
        """Run every pending listener call (rebalance.py); coroutine methods are awaited."""
        while True:
            with driver.lock:
                step = begin_step(group.member, driver.state, self.config.enable_auto_commit)
            if step is None:
                return
            try:
                failure = await self._run_step(group, step)
            except BaseException:  # cancelled: the step runs again at the next poll
                with driver.lock:
                    abandon_step(group.member, driver.state, step, now_ms())
                group.wake()
                driver.wake()
                raise
            with driver.lock:
                end_step(group.member, driver.state, step, now_ms())
            group.wake()
            driver.wake()
            if failure is not None:
                raise failure

    async def _run_step(self, group: GroupDriver, step: RebalanceStep) -> Exception | None:
        """The commit before revocation, then the listener (what it raised: poll() raises it)."""
        if step.commit_first:
            commit, what = group.commit(step.commit_first), "the commit before revocation"
            try:
                await within(commit, self._close_deadline, group, what)
            except KafkaError as error:
                log.warning("group %r: commit before revocation failed: %s", group.group_id, error)
        try:
            result = step.listener_method(self._listener)(step.partitions)
            if inspect.isawaitable(result):
                await result
        except Exception as error:
            return error
        return None

    async def _wait_for_progress(self, timeout_s: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._progress.wait()

    async def stop(self, timeout: float | None = None) -> None:
        """Leave the group (or with assign() and a group.id auto-commit the positions), stop
        the driver: fetches in flight end, fetch sessions are closed. `timeout` (seconds,
        default 30) bounds the waits on the cluster, as Consumer.close(timeout) does. A stop()
        while another runs (another task's, or a listener's inside it) returns at once."""
        if self._driver is None or self._closed or self._closing:
            return
        check_loop(self._loop, "AsyncConsumer")
        deadline = self._close_deadline = close_deadline(timeout)
        self._closing = True
        try:
            await self._leave_at_stop(deadline)
        except BaseException:  # not stopped: a later stop() tries again
            self._closing = False
            raise
        self._closed = True
        self._progress.set()  # a poll() waiting in another task ends now
        self._metadata.stop_waiting()  # a refresh retrying an unreachable cluster ends now
        # and its call under way to a silent one (up to 5 s) too: cancelled, not closed under
        # (channels.py); the channels close once that call has left.
        self._channels.close()
        await self._driver.stop()

    async def _leave_at_stop(self, deadline: float) -> None:
        """stop()'s work with the group, apart so that a failure of it leaves stop() undone."""
        assert self._driver is not None
        group = self._driver.group
        if group is not None and group.member.state is not MemberState.UNSUBSCRIBED:
            try:
                await self.unsubscribe()
            except Exception:  # stopping goes on: the session timeout removes the member
                log.exception("group %r: leaving at stop failed", group.group_id)
        if group is not None:
            await within(group.commit_at_close(), deadline, group, "the commit at close")

    async def close(self, timeout: float | None = None) -> None:
        """The sync Consumer's name for stop(): leave the group, stop fetching. `timeout`
        (seconds, default 30 as Kafka's close(Duration)) is one budget for the waits on the
        cluster: the commit before revocation, the leave and the commit at close. What is not
        done by then is given up (logged; the group then drops the member at its session
        timeout) and close() returns."""
        await self.stop(timeout)

    async def __aenter__(self) -> AsyncConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
