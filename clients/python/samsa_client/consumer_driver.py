"""The consumer driver: one event loop that alone sends fetches and ListOffsets and feeds the core.

Theory of operation. The fetch state (fetch_state.py, a pure core) decides everything about
positions, resets, buffers and which fetches to send. This module does its I/O on `grpc.aio`:

- `_send_fetches()` asks the core for `fetches_to_send` and starts each as a task. It is
  synchronous and runs only on the loop: from the task `_run`, from `wake()` (a facade took
  records, so a partition may be fetched again, or it sought), and after every fetch answer —
  so every broker leading an assigned partition without buffered records always has one Fetch
  in flight (pipelining: `poll()` normally returns records fetched while the application
  processed the last ones).
- Each broker's fetches go on one long-lived FetchStream (common/fetch_link.py): one fetch at a
  time per broker is what the core sends anyway, and a message on an open stream costs about
  half a unary call (what a record waits for between its append and its poll()). A broker
  without the stream gets unary Fetch calls. A fetch or a metadata refresh the ACLs refused is
  not retried: the next poll() raises its AuthorizationError (refusals.py), as does ListOffsets.
- A fetch's answer goes to the core under `lock` (decoding happens there, column-wise); then the
  facade's `on_progress` wakes a waiting `poll()`. An answer that brought no records is followed
  by the next fetch at once; one that did, once `poll()` took records (it calls `wake()`), as
  the consumer always did: sent earlier, a long poll for the partitions that had nothing would
  hold the broker's one fetch slot while the others' records wait to be taken.
- `_run` refreshes stale metadata (sync ClusterMetadata in `asyncio.to_thread`; while a
  partition stays leaderless, at most every retry.backoff.ms, doubling up to
  REFRESH_BACKOFF_MAX_S) and starts a lookup task for the resets the core says are due.
  `list_offsets()` is the one ListOffsets loop: grouped by leader, retried after refreshes until
  `session.timeout.ms`; `offsets_for_times`, `beginning_offsets`, `end_offsets` run it too.

`lock` guards the core, held for pure calls only, never across I/O or an await. A sync facade
calls the core from its thread under `lock` (take, seek, pause, assign) and wakes the loop with
`wake_threadsafe()`. Assignment comes through the same core calls: the facade's `assign`, or a
group member's reconciliation (rebalance.py, from `poll()`). With a `group.id`, the group driver
(group_driver.py) runs beside this one on the loop: it heartbeats, commits, and resolves the
core's COMMITTED resets with OffsetFetch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import grpc

from samsa.client.channels import AioChannels
from samsa.client.client_identity import (
    client_metadata,
    consumer_client_id,
    consumer_fetch_link,
)
from samsa.client.client_tls import ClientSecurity
from samsa.client.cluster_metadata import ClusterMetadata, TopicPartition
from samsa.client.config import ConsumerConfig
from samsa.client.errors import AuthorizationError, KafkaError
from samsa.client.fetch_state import (
    COMMITTED,
    FetchPlan,
    FetchState,
    isolation_level,
)
from samsa.client.group_driver import GroupDriver, parts_of
from samsa.client.listed_offsets import LIST_OFFSETS_RETRIABLE, list_offsets_request
from samsa.client.refusals import authorization_error, refusal_of
from samsa.common.errors import ErrorCode
from samsa.common.fetch_link import FetchFailed, FetchLink
from samsa.v1 import broker_pb2, broker_pb2_grpc

log = logging.getLogger(__name__)

# The longest the driver sleeps with nothing scheduled.
IDLE_WAIT_S = 0.5
# After a partition without a known leader: how soon to look again once metadata was refreshed.
UNKNOWN_LEADER_WAIT_S = 0.05
# Refreshes leaving a partition leaderless are spaced retry.backoff.ms apart, doubling up to this
REFRESH_BACKOFF_MAX_S = 1.0  # (KIP-580): a deleted topic under assign() stays leaderless.
# ListOffsets: each call's deadline, and the pause between rounds while leaders are unknown.
LIST_OFFSETS_TIMEOUT_S = 10.0
LIST_OFFSETS_RETRY_S = 0.1
# Closing fetch sessions at close() is best effort: a broker also evicts idle sessions.
SESSION_CLOSE_TIMEOUT_S = 0.5
# A fetch may wait fetch.max.wait.ms at the broker; beyond that, this long for the answer.
FETCH_TIMEOUT_MARGIN_S = 30.0


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ConsumerDriver:
    """Runs on one event loop; `lock`, `state` (under `lock`) and `wake_threadsafe` are for
    other threads."""

    def __init__(
        self,
        config: ConsumerConfig,
        metadata: ClusterMetadata,
        on_progress: Callable[[], None],
        security: ClientSecurity | None = None,  # TLS, SASL (client_tls.py); None: PLAINTEXT
    ) -> None:
        self.config = config
        self.metadata = metadata
        self.lock = threading.Lock()
        self.state = FetchState(config)
        self._on_progress = on_progress
        self._channels = AioChannels(security)
        # Computed once: the fetches, the session closes and the group's heartbeats all name the
        # consumer by this id, the one brokers count its quotas under (client_identity.py).
        self.client_id = consumer_client_id(config.client_id, config.group_id)
        self._identity = client_metadata(self.client_id)
        self.group = (
            GroupDriver(
                config,
                self.lock,
                self.state,
                metadata.bootstrap,
                self._channels,
                on_progress,
                client_id=self.client_id,
            )
            if config.group_id is not None
            else None
        )
        self._fetch_timeout_s = config.fetch_max_wait_ms / 1000 + FETCH_TIMEOUT_MARGIN_S
        self._tasks: set[asyncio.Task[None]] = set()  # fetches and lookups in flight
        self._links: dict[int, FetchLink] = {}  # each broker's FetchStream, by node id
        self._new_link = lambda: consumer_fetch_link(self.client_id, self._channels)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._wake_scheduled = False
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._refresh_after = 0.0  # monotonic: no refresh before (a leader stays unknown)
        self._refresh_backoff_s = config.retry_backoff_ms / 1000
        metadata.keep(self._assigned_topics)  # the metadata describes the assignment's topics

    def _assigned_topics(self) -> set[str]:
        """The metadata's refresh asks it, on a thread holding no lock of ours."""
        with self.lock:
            return {topic for topic, _ in self.state.assignment()}

    # --- any thread -------------------------------------------------------------------------------

    def wake_threadsafe(self) -> None:
        """Wake the driver from another thread; one loop hand-off however many callers ask."""
        if self._wake_scheduled or self._loop is None:
            return
        self._wake_scheduled = True
        self._loop.call_soon_threadsafe(self.wake)

    def wake_soon(self) -> None:
        """`wake()` at the loop's next turn, from the loop: poll() hands its records over first
        (the fetch it starts could not be written before the caller awaits anyway)."""
        if self._wake_scheduled or self._loop is None:
            return
        self._wake_scheduled = True
        self._loop.call_soon(self.wake)

    # --- the loop ---------------------------------------------------------------------------------

    def wake(self) -> None:
        """A facade changed the core (took records, sought, assigned, asked for positions):
        send what that allows now; the task takes a turn for lookups and refreshes."""
        self._wake_scheduled = False
        if self._wake is None or self._stopping:
            return
        self._send_fetches_and_poke()

    def _send_fetches_and_poke(self) -> None:
        """Outside the task's turn: send what the core allows, and have the task take a turn
        when that leaves it something to do (a metadata refresh, a lookup)."""
        assert self._wake is not None
        self._send_fetches()
        with self.lock:
            lookups_due = self.state.lookups_due()
        if lookups_due or self.metadata.needs_refresh():
            self._wake.set()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._task = self._loop.create_task(self._run(), name="samsa-consumer-driver")
        if self.group is not None:
            await self.group.start()

    async def stop(self) -> None:
        """End the loop and every fetch and lookup, close the fetch sessions and channels."""
        assert self._task is not None and self._wake is not None, "stop() before start()"
        self._stopping = True
        self._wake.set()
        await self._task
        if self.group is not None:
            await self.group.stop()
        tasks, self._tasks = list(self._tasks), set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        links, self._links = list(self._links.values()), {}
        for link in links:
            link.close()
        with self.lock:
            close_requests = self.state.close_requests()
        closes = [self._close_session(node, request) for node, request in close_requests.items()]
        await asyncio.gather(*closes, return_exceptions=True)
        await self._channels.close()

    async def _close_session(self, node: int, request: broker_pb2.FetchRequest) -> None:
        endpoint = self.metadata.endpoints.get(node)
        if endpoint is not None:
            with contextlib.suppress(grpc.RpcError):
                await self._stub(endpoint).Fetch(
                    request, timeout=SESSION_CLOSE_TIMEOUT_S, metadata=self._identity
                )

    async def _run(self) -> None:
        assert self._wake is not None
        while not self._stopping:
            self._wake.clear()
            try:
                wait_s = await self._turn()
            except Exception:
                log.exception("consumer driver error")
                wait_s = 0.1
            if wait_s > 0 and not self._stopping:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait_s):
                        await self._wake.wait()

    async def _turn(self) -> float:
        """Refresh stale metadata, send fetches, start due lookups; returns how long to sleep
        unless woken."""
        refresh_in_s = self._refresh_after - time.monotonic()
        if self.metadata.needs_refresh() and refresh_in_s <= 0:
            await self._refresh()
        plan = self._send_fetches()
        if plan.metadata_stale:  # still leaderless after the refresh: back off (KIP-580)
            if refresh_in_s <= 0:
                self._refresh_after = time.monotonic() + self._refresh_backoff_s
                self._refresh_backoff_s = min(2 * self._refresh_backoff_s, REFRESH_BACKOFF_MAX_S)
            refresh_in_s = self._refresh_after - time.monotonic()
        else:  # every leader known: the next refresh (a leader moved) goes at once
            self._refresh_after = 0.0
            self._refresh_backoff_s = self.config.retry_backoff_ms / 1000
        with self.lock:
            lookups = self.state.offsets_to_look_up()
        committed = {tp: token for tp, (spec, token) in lookups.items() if spec == COMMITTED}
        if committed:
            assert self.group is not None, "COMMITTED resets come only with a group.id"
            self._spawn(self._resolve_committed(committed))
            lookups = {tp: lookup for tp, lookup in lookups.items() if tp not in committed}
        if lookups:
            self._spawn(self._look_up(lookups))
        if plan.metadata_stale:
            return max(UNKNOWN_LEADER_WAIT_S, refresh_in_s)
        if plan.next_due_ms is None:
            return IDLE_WAIT_S
        return min(IDLE_WAIT_S, max(0.001, (plan.next_due_ms - now_ms()) / 1000))

    async def _refresh(self) -> None:
        """The assignment's topics (`_assigned_topics`, which the metadata keeps)."""
        try:
            await asyncio.to_thread(self.metadata.refresh)
        except KafkaError as error:
            log.warning("metadata refresh failed: %s", error)
            if isinstance(error, AuthorizationError):  # not retried: poll() raises it
                with self.lock:
                    self.state.on_refused(error)
                self._on_progress()

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None
        task = self._loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _stub(self, endpoint: str) -> broker_pb2_grpc.BrokerServiceStub:
        return broker_pb2_grpc.BrokerServiceStub(self._channels.get(endpoint))

    # --- fetches ----------------------------------------------------------------------------------

    def _send_fetches(self) -> FetchPlan:
        """Start every fetch the core allows now. Synchronous, on the loop only."""
        metadata = self.metadata
        with self.lock:
            plan = self.state.fetches_to_send(
                metadata.leaders, now_ms(), metadata.leader_epochs, metadata.topic_ids
            )
        if plan.metadata_stale:
            metadata.mark_stale()
        for node, request in plan.requests:
            endpoint = metadata.endpoints.get(node)
            if endpoint is None:
                metadata.mark_stale()
                with self.lock:
                    self.state.on_fetch_failed(node, now_ms())
                assert self._wake is not None
                self._wake.set()  # the task refreshes the metadata
                continue
            channel = self._channels.get(endpoint, traced=False)
            self._spawn(self._fetch(node, channel, request))
        return plan

    async def _fetch(
        self, node: int, channel: grpc.aio.Channel, request: broker_pb2.FetchRequest
    ) -> None:
        link = self._links.get(node)
        if link is None:
            link = self._links[node] = self._new_link()
        try:
            response = await link.fetch(channel, request, self._fetch_timeout_s)
        except FetchFailed as failed:
            log.warning("fetch from broker %d failed: %s", node, failed)
            refused = refusal_of(failed.code, failed.details, failed.trailing)  # raised by poll()
            self.metadata.mark_stale()
            with self.lock:
                self.state.on_fetch_failed(node, now_ms(), refused)
            assert self._wake is not None
            self._wake.set()  # refresh, then fetch again after the backoff
            return
        try:
            with self.lock:
                effects = self.state.on_fetch_answer(node, response)
        except Exception:  # a bug: keep consuming rather than leave the node's slot taken
            log.exception("applying a fetch answer from broker %d failed", node)
            with self.lock:
                self.state.on_fetch_failed(node, now_ms())
            assert self._wake is not None
            self._wake.set()
            return
        if effects.metadata_stale:
            for tp, leader_id, leader_epoch in effects.new_leaders:  # KIP-951: go there now
                self.metadata.update_leader(tp, leader_id, leader_epoch)
            self.metadata.mark_stale()
            assert self._wake is not None
            self._wake.set()
        self._on_progress()
        if not effects.records_ready and not self._stopping:
            self._send_fetches_and_poke()  # else: once poll() took them (it wakes the driver)

    # --- ListOffsets ------------------------------------------------------------------------------

    async def _resolve_committed(self, tokens: Mapping[TopicPartition, int]) -> None:
        """Start partitions at the group's committed offsets (else per auto.offset.reset)."""
        assert self.group is not None
        await self.group.resolve_committed(tokens)
        self._on_progress()
        if not self._stopping:
            self._send_fetches_and_poke()

    async def _look_up(self, lookups: Mapping[TopicPartition, tuple[int, int]]) -> None:
        """Resolve resets (tp -> (OFFSET_SPEC, token)) and hand the offsets to the core."""
        tokens = {tp: token for tp, (_, token) in lookups.items()}
        try:
            found = await self.list_offsets(
                {tp: (spec, 0) for tp, (spec, _) in lookups.items()},
                self.config.session_timeout_ms / 1000,
            )
        except Exception as error:  # not CancelledError, a BaseException
            with self.lock:
                self.state.on_lookup_failed(tokens, error)
        else:
            with self.lock:
                self.state.on_offsets_found(
                    {tp: (tokens[tp], offset) for tp, (offset, _) in found.items()}
                )
        self._on_progress()
        if not self._stopping:
            self._send_fetches_and_poke()

    async def list_offsets(
        self, wanted: Mapping[TopicPartition, tuple[int, int]], timeout_s: float
    ) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets for `wanted` (tp -> (OFFSET_SPEC, timestamp_ms)) from each partition's
        leader, retried after metadata refreshes until `timeout_s`: tp -> (offset, timestamp).
        The metadata describes their topics meanwhile (`transient`), assigned or not."""
        results: dict[TopicPartition, tuple[int, int]] = {}
        pending = dict(wanted)
        deadline = time.monotonic() + timeout_s
        metadata = self.metadata
        with metadata.transient({topic for topic, _ in wanted}):
            while pending:
                if metadata.needs_refresh() or any(tp not in metadata.leaders for tp in pending):
                    await asyncio.to_thread(metadata.refresh, {topic for topic, _ in pending})
                by_node: dict[int, list[TopicPartition]] = {}
                for tp in pending:
                    leader = metadata.leaders.get(tp)
                    if leader is not None:
                        by_node.setdefault(leader, []).append(tp)
                # At most request_partitions_max partitions a request: a leader refuses more.
                answers = await asyncio.gather(
                    *(
                        self._list_offsets_at(node, {tp: pending[tp] for tp in part})
                        for node, tps in by_node.items()
                        for part in parts_of(tps)
                    )
                )
                for answer in answers:
                    if answer is not None:
                        self._on_list_offsets_answer(answer, pending, results)
                if pending:
                    if time.monotonic() > deadline:
                        raise KafkaError(
                            f"no leader answered ListOffsets for {sorted(pending)}",
                            ErrorCode.LEADER_NOT_AVAILABLE,
                        )
                    await asyncio.sleep(LIST_OFFSETS_RETRY_S)
        return results

    async def _list_offsets_at(
        self, node: int, specs: Mapping[TopicPartition, tuple[int, int]]
    ) -> broker_pb2.ListOffsetsResponse | None:
        endpoint = self.metadata.endpoints.get(node)
        if endpoint is None:
            self.metadata.mark_stale()
            return None
        isolation = isolation_level(self.state.config)
        request = list_offsets_request(specs, isolation, self.metadata.topic_ids)  # KIP-516
        try:
            return await self._stub(endpoint).ListOffsets(request, timeout=LIST_OFFSETS_TIMEOUT_S)
        except grpc.RpcError as error:
            if refused := authorization_error(error):  # every broker refuses it the same
                raise refused from None
            log.warning("ListOffsets to broker %d failed: %s", node, error.code())
            self.metadata.mark_stale()
            return None

    def _on_list_offsets_answer(
        self,
        answer: broker_pb2.ListOffsetsResponse,
        pending: dict[TopicPartition, tuple[int, int]],
        results: dict[TopicPartition, tuple[int, int]],
    ) -> None:
        for topic in answer.topics:
            for result in topic.partitions:
                tp = (topic.name, result.partition)
                if result.error_code == ErrorCode.NONE:
                    results[tp] = (result.offset, result.timestamp_ms)
                    pending.pop(tp, None)
                elif result.error_code in LIST_OFFSETS_RETRIABLE:
                    self.metadata.mark_stale()
                elif result.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:  # per partition
                    message = result.error_message or "TOPIC_AUTHORIZATION_FAILED"
                    resource = f"topic:{topic.name}"
                    raise AuthorizationError(message, ErrorCode(result.error_code), resource)
                else:
                    raise KafkaError.of(result.error_code, result.error_message)
