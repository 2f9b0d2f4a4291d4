"""The Consumer: manual assignment over the consumer driver, which runs on one background loop.

Theory of operation. Everything about positions, resets, buffers and which fetches to send is
decided by the fetch state (fetch_state.py, a pure core); everything about the network by the
driver (consumer_driver.py): one event loop on `grpc.aio` that alone sends Fetch and ListOffsets
and feeds their answers to the core. Fetches are pipelined: every broker leading an assigned
partition without buffered data always has one Fetch in flight, each in that broker's fetch
session (fetch_sessions.py), so `poll()` normally returns records fetched while the application
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

`AsyncConsumer` (async_consumer.py) runs the same driver on the caller's own loop. Consumer
groups (subscribe, committed offsets) come with the coordinator; `subscribe()` says so. The
seam for them: assignment comes from outside the driver, through the core's `assign`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable, Mapping

from samsa.client.channels import Channels
from samsa.client.cluster_metadata import ClusterMetadata, TopicPartition
from samsa.client.config import ConsumerConfig
from samsa.client.consumer_driver import ConsumerDriver, check_partitions_exist, take_records
from samsa.client.errors import KafkaError
from samsa.client.fetch_state import (
    EARLIEST,
    LATEST,
    ConsumerRecord,
    OffsetAndTimestamp,
)
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2

__all__ = ["EARLIEST", "LATEST", "Consumer", "ConsumerRecord", "OffsetAndTimestamp"]

# How long close() waits for the driver to stop and the loop thread to end.
STOP_TIMEOUT_S = 5.0
# position() waits for its lookup at most session.timeout.ms (the lookup's own limit) plus this.
POSITION_WAIT_MARGIN_S = 5.0

SUBSCRIBE_NOT_YET = (
    "consumer groups (subscribe, committed offsets) come with the group coordinator; "
    "use assign([(topic, partition), ...]) for now"
)


class Consumer:
    """Kafka's consumer with manual assignment (see the module docstring)."""

    def __init__(self, config: Mapping[str, object]) -> None:
        self.config = ConsumerConfig.from_dict(config)
        self._channels = Channels()
        self._metadata = ClusterMetadata(self.config.bootstrap_servers, self._channels)
        self._driver = ConsumerDriver(self.config, self._metadata, self._notify_progress)
        self._state = self._driver.state  # touched only under self._progress (the driver's lock)
        self._progress = threading.Condition(self._driver.lock)
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(
            target=self._loop.run_forever, name="samsa-consumer", daemon=True
        )
        self._loop_thread.start()
        asyncio.run_coroutine_threadsafe(self._driver.start(), self._loop).result()

    # --- assignment and positions -----------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        raise NotImplementedError(SUBSCRIBE_NOT_YET)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions, starting per `auto.offset.reset`."""
        assigned = [(topic, int(partition)) for topic, partition in partitions]
        self._metadata.refresh({topic for topic, _ in assigned})
        check_partitions_exist(self._metadata, assigned)
        with self._progress:
            self._state.assign(assigned)
        self._driver.wake_threadsafe()

    def assignment(self) -> list[TopicPartition]:
        with self._progress:
            return self._state.assignment()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        with self._progress:
            self._state.seek(tp, offset)
        self._driver.wake_threadsafe()

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        with self._progress:
            self._state.seek_to(partitions, EARLIEST)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        with self._progress:
            self._state.seek_to(partitions, LATEST)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching these partitions and returning their records until `resume`."""
        with self._progress:
            self._state.pause(partitions)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        with self._progress:
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
            self._state.position(tp)  # not assigned: raises
            if self._state.request_resets():
                self._driver.wake_threadsafe()
            while True:
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

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The first offset whose timestamp is >= the given one, per partition (None: none)."""
        answers = self._list_offsets(
            {tp: (broker_pb2.OFFSET_SPEC_TIMESTAMP, ts) for tp, ts in timestamps.items()}
        )
        return {
            tp: None if offset < 0 else OffsetAndTimestamp(offset, timestamp)
            for tp, (offset, timestamp) in answers.items()
        }

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        answers = self._list_offsets({tp: (EARLIEST, 0) for tp in partitions})
        return {tp: offset for tp, (offset, _) in answers.items()}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        answers = self._list_offsets({tp: (LATEST, 0) for tp in partitions})
        return {tp: offset for tp, (offset, _) in answers.items()}

    def _list_offsets(
        self, wanted: Mapping[TopicPartition, tuple[int, int]]
    ) -> dict[TopicPartition, tuple[int, int]]:
        self._check_open()
        timeout_s = self.config.session_timeout_ms / 1000
        lookup = self._driver.list_offsets(wanted, timeout_s)
        return asyncio.run_coroutine_threadsafe(lookup, self._loop).result()

    # --- fetching ---------------------------------------------------------------------------------

    def poll(self, timeout: float = 0.0) -> list[ConsumerRecord]:
        """Up to `max.poll.records` records, waiting up to `timeout` seconds for some."""
        self._check_open()
        deadline = time.monotonic() + timeout
        limit = self.config.max_poll_records
        state = self._state
        with self._progress:
            if state.request_resets():
                self._driver.wake_threadsafe()
            while True:
                try:
                    records = take_records(state, limit)
                except Exception:
                    self._driver.wake_threadsafe()  # the partition is fetched again
                    raise
                if records:
                    self._driver.wake_threadsafe()  # fetch what is no longer buffered
                    return records
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                self._progress.wait(remaining)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        stopped = asyncio.run_coroutine_threadsafe(self._stop_on_loop(), self._loop)
        try:
            stopped.result(STOP_TIMEOUT_S)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop_thread.join(STOP_TIMEOUT_S)
            if not self._loop.is_running():
                self._loop.close()
            self._channels.close()

    async def _stop_on_loop(self) -> None:
        """Stop the driver, then finish what asyncio.run() finishes before its loop closes."""
        await self._driver.stop()
        await self._loop.shutdown_asyncgens()
        await self._loop.shutdown_default_executor()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _read_replicas(self) -> dict[TopicPartition, int]:
        """The replicas leaders told this consumer to read from (KIP-392); for tests."""
        with self._progress:
            return self._state.read_replicas()

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaError("the consumer is closed", ErrorCode.INVALID_REQUEST)

    def _notify_progress(self) -> None:
        """On the loop: an answer was applied, so records, positions or errors may be ready."""
        with self._progress:
            self._progress.notify_all()
