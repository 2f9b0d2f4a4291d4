"""Goal: a TxnOffsetCommit's batch is not sent once this coordinator may have been replaced.
It is written under the producer's id and epoch, so the next owner's fence (which stops every
write of this coordinator's own writer) does not stop it: retried after a network partition (a
leader timing out, a broker unreachable) while the controller moved the partition and the new
owner loaded it, it landed past that load, unseen; the producer's COMMIT marker then committed
offsets the group's coordinator never knew, and the group resumed from older ones (duplicates
under exactly-once). Each attempt now requires the coordinator to be in touch (its lease and
image current, `Coordinator.in_touch`), and the caller answers NOT_COORDINATOR otherwise; a
batch given up after an attempt (it may have landed) ends the partition, to be loaded again.

Method: an OffsetsPartition marked loaded, over a stand-in for OffsetsLog whose produce fails
with a retriable error; the coordinator loses touch after the first attempt.
"""

from __future__ import annotations

import asyncio

import pytest

from samsa.common.errors import ErrorCode
from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC
from samsa.metadata.image import CoordinatorAssignment
from samsa.services.coordinator import group_records
from samsa.services.coordinator.coordinator_partition import PartitionUnavailableError
from samsa.services.coordinator.group_model import GroupConfig
from samsa.services.coordinator.offsets_log import ProduceResult
from samsa.services.coordinator.offsets_partition import OffsetsPartition
from samsa.services.coordinator.record_writer import RecordWriter
from samsa.v1 import group_records_pb2 as g


class Unreachable:
    def __init__(self) -> None:
        self.produced = 0

    async def produce(self, topic: str, partition: int, batch: bytes) -> ProduceResult:
        self.produced += 1
        return ProduceResult(ErrorCode.NETWORK_EXCEPTION, "broker unreachable")


def test_a_transactional_batch_is_not_retried_once_out_of_touch() -> None:
    async def scenario() -> None:
        offsets_log = Unreachable()
        in_touch = [True]
        ended: list[OffsetsPartition] = []
        partition = OffsetsPartition(
            CoordinatorAssignment(CONSUMER_OFFSETS_TOPIC, 0, 1, 10, 0, 100),
            coordinator_id=1,
            offsets_log=offsets_log,  # type: ignore[arg-type]
            config=GroupConfig(),
            on_ended=ended.append,
            in_touch=lambda: in_touch[0],
        )
        partition.writer = RecordWriter(100, 0, max_batch_records=10, max_batch_bytes=1 << 20)
        record = group_records.offset_commit("g", "t", 0, g.OffsetCommitValue(committed_offset=5))
        writing = asyncio.create_task(partition.write_transactional(7, 0, [record]))
        while offsets_log.produced == 0:
            await asyncio.sleep(0.001)
        in_touch[0] = False  # its lease ran out: the controller may have moved the partition
        with pytest.raises(PartitionUnavailableError) as refused:
            await asyncio.wait_for(writing, 2)
        assert refused.value.code == ErrorCode.NOT_COORDINATOR
        assert offsets_log.produced == 1
        # Whether that attempt landed is unknown, and with it the producer's next sequence
        # here: the partition ends, for its owner to load it again from the log.
        assert partition.ended and ended == [partition]

    asyncio.run(scenario())
