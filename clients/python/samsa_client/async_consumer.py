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
Only metadata reads leave the loop: they use sync gRPC in a worker thread (`asyncio.to_thread`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping

from samsa.client.channels import Channels
from samsa.client.cluster_metadata import ClusterMetadata, TopicPartition
from samsa.client.config import ConsumerConfig
from samsa.client.consumer import POSITION_WAIT_MARGIN_S, SUBSCRIBE_NOT_YET
from samsa.client.consumer_driver import ConsumerDriver, check_partitions_exist, take_records
from samsa.client.errors import KafkaError
from samsa.client.fetch_state import EARLIEST, LATEST, ConsumerRecord, OffsetAndTimestamp
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2


class AsyncConsumer:
    """Kafka's consumer with manual assignment, for asyncio callers (see the module doc)."""

    def __init__(self, config: Mapping[str, object]) -> None:
        self.config = ConsumerConfig.from_dict(config)
        self._channels = Channels()
        self._metadata = ClusterMetadata(self.config.bootstrap_servers, self._channels)
        self._progress = asyncio.Event()  # set by the driver after it applied an answer
        self._driver: ConsumerDriver | None = None
        self._closed = False

    async def start(self) -> None:
        self._driver = ConsumerDriver(self.config, self._metadata, self._progress.set)
        await self._driver.start()

    def _started(self) -> ConsumerDriver:
        if self._driver is None or self._closed:
            raise KafkaError(
                "the consumer is not started (await start()) or is stopped",
                ErrorCode.INVALID_REQUEST,
            )
        return self._driver

    # --- assignment and positions -----------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        raise NotImplementedError(SUBSCRIBE_NOT_YET)

    async def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions, starting per `auto.offset.reset`."""
        driver = self._started()
        assigned = [(topic, int(partition)) for topic, partition in partitions]
        await asyncio.to_thread(self._metadata.refresh, {topic for topic, _ in assigned})
        check_partitions_exist(self._metadata, assigned)
        with driver.lock:
            driver.state.assign(assigned)
        driver.wake()

    def assignment(self) -> list[TopicPartition]:
        return self._started().state.assignment()

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
        driver = self._started()
        with driver.lock:
            driver.state.pause(partitions)

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
        """The first offset whose timestamp is >= the given one, per partition (None: none)."""
        answers = await self._list_offsets(
            {tp: (broker_pb2.OFFSET_SPEC_TIMESTAMP, ts) for tp, ts in timestamps.items()}
        )
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
        return await driver.list_offsets(wanted, self.config.session_timeout_ms / 1000)

    # --- fetching ---------------------------------------------------------------------------------

    async def poll(self, timeout: float = 0.0) -> list[ConsumerRecord]:
        """Up to `max.poll.records` records, waiting up to `timeout` seconds for some."""
        driver = self._started()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        limit = self.config.max_poll_records
        state = driver.state
        if state.request_resets():
            driver.wake()
        while True:
            self._progress.clear()  # no await until the wait: no answer is missed
            try:
                with driver.lock:  # uncontended: only this loop uses the core
                    records = take_records(state, limit)
            except Exception:
                driver.wake()  # the partition is fetched again
                raise
            if records:
                driver.wake()  # fetch what is no longer buffered
                return records
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            await self._wait_for_progress(remaining)

    async def _wait_for_progress(self, timeout_s: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._progress.wait()

    async def stop(self) -> None:
        """Stop the driver: fetches in flight end, fetch sessions are closed."""
        if self._driver is None or self._closed:
            return
        self._closed = True
        await self._driver.stop()
        self._channels.close()

    async def __aenter__(self) -> AsyncConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
