"""One owned partition of `__consumer_offsets` at run time: the groups' shard on the shared
partition runtime (coordinator_partition.py: load, fence, write, keepalive).

Serving (DESIGN §6): a handler runs on the shard (which applies its records at once), then
`write` queues the records in the partition's writer *before any await*, so the log order is the
order in which the shard applied them; the handler answers once they are durable. The timer task
expires sessions and offsets (`shard.expire`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC
from samsa.metadata.image import CoordinatorAssignment
from samsa.services.coordinator import group_records
from samsa.services.coordinator.coordinator_partition import (
    CoordinatorPartition,
    KeyValue,
    PartitionUnavailableError,
    now_ms,
)
from samsa.services.coordinator.group_model import GroupConfig
from samsa.services.coordinator.group_records import GroupRecord
from samsa.services.coordinator.group_shard import GroupCoordinatorShard
from samsa.services.coordinator.offsets_log import OffsetsLog

log = logging.getLogger(__name__)

TIMER_TICK_MAX_S = 1.0  # the longest sleep between expiry checks (offset retention has no deadline)


class OffsetsPartition(CoordinatorPartition):
    """The groups of one partition of `__consumer_offsets`."""

    topic = CONSUMER_OFFSETS_TOPIC

    def __init__(
        self,
        assignment: CoordinatorAssignment,
        *,
        coordinator_id: int,
        offsets_log: OffsetsLog,
        config: GroupConfig,
        on_ended: Callable[[CoordinatorPartition], None],
    ) -> None:
        super().__init__(
            assignment, coordinator_id=coordinator_id, offsets_log=offsets_log, on_ended=on_ended
        )
        self.shard = GroupCoordinatorShard(config)

    async def write(self, records: list[GroupRecord]) -> None:
        """Queue `records` (already applied to the shard) and return once they, and everything
        queued before them, are durable. Must be called right after the handler, with no await
        in between. Raises PartitionUnavailableError when the partition failed or was dropped."""
        await self.write_encoded([group_records.encode(r) for r in records])

    # --- the runtime's hooks ----------------------------------------------------------------

    def replay_record(self, key: bytes, value: bytes | None) -> None:
        self.shard.replay(group_records.decode(key, value))

    def writer_epoch_record(self) -> KeyValue:
        epoch = self.assignment.assignment_epoch
        return group_records.encode(group_records.writer_epoch(self.coordinator_id, epoch))

    def on_loaded(self) -> None:
        self.shard.start_timers(now_ms())

    def describe_loaded(self) -> dict[str, object]:
        return {"groups": len(self.shard.state.groups)}

    async def timer_loop(self) -> None:
        while True:
            deadline = self.shard.next_deadline_ms()
            wait_s = TIMER_TICK_MAX_S
            if deadline is not None:
                wait_s = min(wait_s, max(0.0, (deadline - now_ms()) / 1000))
            await asyncio.sleep(wait_s)
            now = now_ms()
            records = [group_records.encode(r) for r in self.shard.expire(now).records]
            records += self.keepalive_records(now)
            if records:
                try:
                    await self.write_encoded(records)
                except PartitionUnavailableError:
                    return
