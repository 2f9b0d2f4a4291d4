"""What the two consumer facades (consumer.py's Consumer, async_consumer.py's AsyncConsumer)
share: their waits and the small calls over the consumer driver that neither owns. No I/O here:
the facades call the driver and the network.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from samsa.client.cluster_metadata import ClusterMetadata
from samsa.client.config import ConsumerConfig
from samsa.client.consumer_records import ConsumerRecord
from samsa.client.errors import AuthorizationError, KafkaError
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.timeouts import checked_timeout
from samsa.common.errors import ErrorCode

if TYPE_CHECKING:
    from samsa.client.consumer_driver import ConsumerDriver
    from samsa.client.fetch_state import FetchState
    from samsa.client.group_driver import GroupDriver

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

# position() waits for its lookup at most session.timeout.ms (the lookup's own limit) plus this.
POSITION_WAIT_MARGIN_S = 5.0
# unsubscribe() and close() wait this long at most for the leave heartbeat's answer.
LEAVE_TIMEOUT_S = 5.0
# close()'s budget when no timeout is given: Kafka's close() waits up to 30 s.
CLOSE_TIMEOUT_S = 30.0


def poll_timer_wait_s(config: ConsumerConfig) -> float:
    """poll()'s longest wait between poll-timer restarts: well within max.poll.interval.ms."""
    return config.max_poll_interval_ms / 2000


def group_of(driver: ConsumerDriver, call: str) -> GroupDriver:
    """The consumer's group driver; a clear error when no group.id was configured."""
    if driver.group is None:
        raise KafkaError(
            f"{call} needs a group.id in the consumer's configuration", ErrorCode.INVALID_GROUP_ID
        )
    return driver.group


def offsets_to_commit(
    driver: ConsumerDriver, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None
) -> dict[TopicPartition, OffsetAndMetadata]:
    """Under no lock: the given offsets, or the consumed positions of every assigned partition."""
    if offsets is not None:
        return {
            (topic, int(partition)): OffsetAndMetadata.of(at)
            for (topic, partition), at in offsets.items()
        }
    with driver.lock:
        consumed = driver.state.consumed()
    return {tp: OffsetAndMetadata(offset, epoch) for tp, (offset, epoch) in consumed.items()}


def check_open(closed: bool) -> None:
    """Every call of a closed consumer is refused, as Kafka's (IllegalStateException)."""
    if closed:
        raise KafkaError("the consumer is closed", ErrorCode.INVALID_REQUEST)


def close_deadline(timeout: float | None) -> float:
    """The time.monotonic() by which close(timeout) gives up waiting for the cluster: its commit,
    the revocation's commit and the group leave share the one budget (Kafka's close(Duration))."""
    budget = CLOSE_TIMEOUT_S if timeout is None else checked_timeout(timeout)
    return time.monotonic() + min(float(budget), 1e9)  # inf: a deadline asyncio can hold


async def within(
    coroutine: Coroutine[Any, Any, None], deadline: float | None, group: GroupDriver, what: str
) -> None:
    """Await `coroutine`, but only until `deadline` (None: no limit): past it, it is cancelled
    and a warning says `what` was not done. Used on close() for calls a cluster may not answer."""
    if deadline is None:
        await coroutine
        return
    try:
        # Not wait_for: past the deadline it would not start the coroutine at all, and one with
        # nothing to send (no offset moved) should not be reported as given up.
        async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
            await coroutine
    except TimeoutError:
        log.warning("group %r: %s not done within close()'s timeout", group.group_id, what)


async def cancel_other_tasks(timeout_s: float = 1.0) -> None:
    """Cancel every task of the running loop but this one, as asyncio.run() does before it
    closes its loop, and wait up to `timeout_s` for them to end. The sync Consumer's close()
    does this: a call another thread was waiting for (poll()'s commit before revocation, which
    has no deadline) would otherwise never end once the loop stopped, nor its caller."""
    others = asyncio.all_tasks() - {asyncio.current_task()}
    for task in others:
        task.cancel()
    if others:
        await asyncio.wait(others, timeout=timeout_s)


def check_partitions_exist(metadata: ClusterMetadata, assigned: Iterable[TopicPartition]) -> None:
    """assign()'s check: every partition named exists, else UNKNOWN_TOPIC_OR_PARTITION."""
    for topic, partition in assigned:
        count = metadata.partition_counts.get(topic)
        if count is None or not 0 <= partition < count:
            raise KafkaError(
                f"{topic}-{partition} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )


def take_records(state: FetchState, limit: int) -> list[ConsumerRecord]:
    """Under the lock: raise the next pending error, else take up to `limit` records. A
    partition's topic the ACLs refuse (AuthorizationError) is raised only when there is no
    record to take, or at the next poll: as Kafka's consumer returns the records fetched before
    a partition's error and raises it next, a consumer assigned a refused topic (whose error
    comes back with every fetch) still reads its other partitions. The caller wakes the driver
    when it raised or took records: fetches may be sent now."""
    deferred = state.deferred_error
    if deferred is not None:
        state.deferred_error = None
        raise deferred
    error = state.pop_error()
    if error is None:
        return state.take(limit)
    if isinstance(error, AuthorizationError):
        taken = state.take(limit)
        if taken:
            state.deferred_error = error
            return taken
    raise error
