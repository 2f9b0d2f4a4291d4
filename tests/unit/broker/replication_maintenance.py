"""The log upkeep of the replication simulation (replication_sim.py): every step that flushes a
broker's log or removes records from it. The maintenance pass flushes and checkpoints, and in
the retention mode deletes the closed segments past retention.ms; in the compaction mode it
plans a compaction pass and swaps it in then or at a later step (the cleaner's worker thread
runs beside the rest); in the DeleteRecords mode the leader is asked to delete records below an
offset up to its high watermark. What was deleted moves `deleted_below`, which the checks read.
"""

from __future__ import annotations

from samsa.common.errors import SamsaError
from samsa.services.broker.hosted_partition import HostedPartition
from samsa.services.broker.log.cleaner import NOTHING_CLEANED
from samsa.services.broker.maintenance import (
    PRODUCER_ID_EXPIRATION_MS,
    checkpoint_pending,
    flush_pending,
    retention_pass,
    take_changes,
)
from samsa.services.broker.requests.delete_records import start_deletion
from samsa.v1 import broker_pb2
from tests.unit.broker.replication_cluster import TOPIC, Broker, ClusterState


class ReplicationMaintenance(ClusterState):
    """The upkeep, as methods of the simulation (which inherits them): the steps
    "delete_records" and "maintenance"."""

    retention: bool

    def _step_delete_records(self) -> bool:
        """DeleteRecords at the controller's leader, below an offset up to its high watermark."""
        leader = self.brokers.get(self.state().leader)
        hosted = None if leader is None else leader.hosted()
        if leader is None or leader.host is None or hosted is None:
            return False
        start, high_watermark = hosted.log.log_start_offset, hosted.high_watermark
        if high_watermark <= start:
            return False
        offset = self.rng.randint(start + 1, high_watermark)
        wanted = broker_pb2.DeleteRecordsRequest.PartitionData(partition=0, offset=offset)
        result = broker_pb2.DeleteRecordsResponse.PartitionResponse(partition=0)
        start_deletion(leader.host, TOPIC, wanted, result)
        if result.error_code == 0:
            self.deleted_below = max(self.deleted_below, offset)
            self.counts["records deleted on request"] += offset - start
        return True

    def _step_maintenance(self) -> bool:
        live = self._live()
        if not live:
            return False
        broker = self.rng.choice(live)
        assert broker.host is not None
        take_changes(broker.host, broker.pending)
        flush_pending(broker.host, broker.pending, now_ms=self.now_ms)
        checkpoint_pending(broker.host, broker.pending)
        hosted = broker.hosted()
        if self.retention and hosted is not None:
            start = hosted.log.log_start_offset
            retention_pass(
                broker.host, now_ms=self.now_ms, producer_id_expiration_ms=PRODUCER_ID_EXPIRATION_MS
            )
            if hosted.log.log_start_offset > start:
                self.counts["records deleted by retention"] += hosted.log.log_start_offset - start
                self.deleted_below = max(self.deleted_below, hosted.log.log_start_offset)
        if self.compaction and hosted is not None:
            self._clean(broker, hosted)
        return True

    def _clean(self, broker: Broker, hosted: HostedPartition) -> None:
        """A step of the log cleaner (log_cleaner.py): when a pass is due, plan it, and run it
        and swap it in now or at a later step (its worker thread runs beside everything else, so
        the steps between may truncate, delete or close what it planned on)."""
        if broker.cleaning is None:
            if not hosted.log.compaction_due(
                now_ms=self.now_ms, high_watermark=hosted.high_watermark
            ):
                self.counts["compaction passes not due"] += 1
                return
            job = hosted.log.plan_compaction(
                now_ms=self.now_ms, high_watermark=hosted.high_watermark
            )
            if job is None:
                return
            ran = job.run() if self.rng.random() < 0.5 else None
            broker.cleaning = job, ran
            if self.rng.random() < 0.5:
                return  # swapped in at a later step
        job, ran = broker.cleaning
        broker.cleaning = None
        try:
            cleaned = job.run() if ran is None else ran
        except SamsaError:  # a planned segment was cut under the pass
            job.discard()
            self.counts["compaction passes discarded"] += 1
            return
        compacted = hosted.log.finish_compaction(job, cleaned)
        if compacted == NOTHING_CLEANED and any(c.indexes is not None for c in cleaned.segments):
            self.counts["compaction passes discarded"] += 1
        self.counts["records removed by compaction"] += compacted.records_removed
        self.counts["markers removed by compaction"] += compacted.markers_removed

    def _stop_cleaning(self, broker: Broker, *, discard: bool) -> None:
        """The broker stops: a kill takes the cleaner's thread with it (its files stay for the
        next open to remove), a shutdown cancels the pass and discards them."""
        if broker.cleaning is not None:
            job, _ = broker.cleaning
            broker.cleaning = None
            job.close()
            if discard:
                job.discard()
