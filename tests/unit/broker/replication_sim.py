"""A seeded simulation of one partition replicated on three brokers, in one process, over the
code the services run: the controller's pure decisions and metadata replay, each broker's
`PartitionHost` over real logs in a temporary directory, the leader's `produce` and
`PartitionReader`, the follower's `apply_leader_answer`, the ISR manager's decisions, the
acks=all settling rule and the maintenance pass. Only the wiring is the simulation's: who
talks to whom and when, decided by a `random.Random(seed)`.

Each step is one thing that happens in a real cluster, in an order a real cluster allows:
a produce reaches a broker; a follower's fetch reaches its leader and is read there; its
answer reaches the follower (or is lost); a broker applies the metadata log up to its end
(brokers apply it each at its own pace); a leader proposes an ISR change; the controller
expires the session of a dead broker; a broker is killed (kill -9: what it wrote stays in
the page cache, its memory is gone), shut down cleanly, or started again (it registers,
catches up on metadata, heartbeats and is unfenced); the preferred leader is elected back;
the maintenance pass flushes and checkpoints; the clock moves. Modes add steps or settings:
flush.messages=1 with whole-cluster power losses, DeleteRecords at the leader, retention with
every closed segment expired, and a compacted topic (the maintenance step plans a compaction
pass and swaps it in then or at a later one, as the cleaner's worker thread runs beside the rest).

After every step `check` asserts the safety of replication (replication_checks.py).
`heal` then restarts every broker and runs the cluster fault-free until it settles;
simulation_run.py asserts that the replicas converged and nothing acknowledged was lost.

This module holds the model's core: its state, the controller, the schedule of steps, the
replication traffic (fetches, their answers, metadata, ISR changes, heartbeats, preferred
elections, the clock) and healing. `Simulation` inherits its other jobs, one module each:
the producers (replication_producers.py), the faults (replication_faults.py), the log upkeep
(replication_maintenance.py) and the checks (replication_checks.py); the cluster's pieces and
metadata builders are in replication_cluster.py.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from samsa.common.errors import ErrorCode
from samsa.common.fetch_session_client import FetchParts, fetch_request
from samsa.metadata.image import NO_LEADER, MetadataImage, PartitionState
from samsa.services.broker.maintenance import Pending
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.replica.follower_apply import (
    answer_is_current,
    apply_leader_answer,
    follower_position,
)
from samsa.services.broker.replica.isr_manager import (
    decide_proposals,
    proposal_requests,
    settle_proposals,
)
from samsa.services.broker.requests.partition_read import PartitionReader
from samsa.services.controller import control_plane as cp
from samsa.v1 import broker_pb2
from tests.unit.broker.replication_checks import ReplicationChecks, log_records
from tests.unit.broker.replication_cluster import (
    BROKERS,
    KEY,
    LAG_MAX_MS,
    TOPIC,
    TOPIC_CONFIGS,
    Broker,
    InFlightFetch,
    cluster_with_topic,
    commit,
    heartbeat,
    registered,
)
from tests.unit.broker.replication_faults import ReplicationFaults
from tests.unit.broker.replication_maintenance import ReplicationMaintenance
from tests.unit.broker.replication_producers import (
    IdempotentBatch,
    Produce,
    ReplicationProducers,
)

# Relative weights of the steps; the faults are rarer than the traffic.
STEP_WEIGHTS: dict[str, float] = {
    "produce": 6,
    "idempotent": 6,
    "fetch": 12,
    "answer": 12,
    "metadata": 8,
    "isr": 4,
    "heartbeat": 4,
    "expire": 2,
    "kill": 0.5,
    "shutdown": 0.5,
    "restart": 3,
    "preferred": 1,
    "maintenance": 2,
    "clock": 3,
}
# Steps only a simulation made with that option takes (so the other schedules stay as they
# were): a whole-cluster power loss, and DeleteRecords at the leader.
POWER_LOSS_WEIGHT = 0.2
BROKER_POWER_LOSS_WEIGHT = 1.0
DELETE_RECORDS_WEIGHT = 1.0
ANSWER_LOSS = 0.1  # the share of fetch answers lost on the way (the follower asks again)
RETENTION_MS = 3_000  # retention.ms in the retention mode, on the simulation's clock


class Simulation(
    ReplicationProducers, ReplicationFaults, ReplicationMaintenance, ReplicationChecks
):
    """The model: brokers, producers and the controller, stepped by `step()`; the producers,
    faults and upkeep it inherits are steps too, and the checks it inherits
    (replication_checks.py) run on its state after every step."""

    def __init__(
        self,
        root: Path,
        seed: int,
        *,
        flush_each_append: bool = False,
        power_loss: bool = False,
        broker_power_loss: bool = False,
        delete_records: bool = False,
        retention: bool = False,
        compaction: bool = False,
    ) -> None:
        """`flush_each_append`: the topic sets flush.messages=1. `power_loss`: the whole cluster
        may lose power at once (every broker loses what it had not fsynced).
        `broker_power_loss`: one broker at a time may lose power so. `delete_records`:
        the leader is asked to delete records below an offset up to its high watermark.
        `retention`: the topic keeps records RETENTION_MS (their timestamps are 0, so every
        closed segment is soon past it) and the maintenance step runs the retention pass.
        `compaction`: the topic is compacted, plain records carry one of COMPACTION_KEYS keys,
        and the maintenance step compacts the broker's log."""
        self.rng = random.Random(seed)
        self.power_loss = power_loss
        self.broker_power_loss = broker_power_loss
        self.delete_records = delete_records
        self.retention = retention
        self.compaction = compaction
        # Records below it were deleted on request or by retention: they may be gone from any
        # replica.
        self.deleted_below = 0
        self.now_ms = 1_000
        self.brokers = {b: Broker(b, root / f"broker-{b}") for b in BROKERS}
        self.image = MetadataImage.empty()
        self.produces: list[Produce] = []
        self.batches: list[IdempotentBatch] = []  # unacknowledged, in sequence order
        self.next_sequence = 0
        # KIP-360: the epoch the producer writes with, the value sequence its wire sequence 0
        # stands for in that epoch, and whether a broker lost its state (reset before sending).
        self.producer_epoch = 0
        self.epoch_first_sequence = 0
        self.sequence_reset_needed = False
        # The committed offset each idempotent record was first seen at.
        self.sequence_first_offset: dict[int, int] = {}
        # The idempotent producer's records in the committed log: checked up to this offset,
        # and the sequence the next one must carry (no gap, no duplicate, no reordering).
        self.sequence_checked = 0
        self.sequence_expected = 0
        self.sequence_skipped = False  # offsets deleted unseen: the next sequence may jump
        self.next_value = 0
        # What the first replica to show an offset below its high watermark held there.
        self.committed: dict[int, tuple[bytes, int]] = {}
        # Where each replica's log was last checked against `committed`, by broker.
        self.checked: dict[int, int] = {}
        self.acked: dict[int, bytes] = {}
        self.counts: Counter[str] = Counter()
        configs = TOPIC_CONFIGS | ({"flush.messages": "1"} if flush_each_append else {})
        if retention:
            configs |= {"retention.ms": str(RETENTION_MS)}
        if compaction:
            # A COMMIT marker may go a second after its timestamp; a tombstone a second after the
            # cleaning pass that first cleaned it (KIP-534's delete horizon,
            # services/broker/log/delete_horizon.py), whatever its own timestamp.
            configs |= {"cleanup.policy": "compact", "delete.retention.ms": "1000"}
        self.image = cluster_with_topic(configs, self.rng)
        for broker in self.brokers.values():
            broker.incarnation = 1
        for broker in self.brokers.values():
            self._start(broker)

    # --- the controller --------------------------------------------------------------------

    def _commit(self, result: cp.ControlResult) -> None:  # type: ignore[type-arg]
        self.image = commit(self.image, result)

    def state(self) -> PartitionState:
        return self.image.topics[TOPIC].partitions[0]

    def _register(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        broker.incarnation += 1
        incarnation = f"i{broker.incarnation}"
        previous, broker.clean_shutdown_epoch = broker.clean_shutdown_epoch, -1  # read, deleted
        self.image = registered(
            self.image, broker_id, incarnation, now_ms=self.now_ms, previous_broker_epoch=previous
        )

    def _heartbeat(self, broker_id: int) -> None:
        host = self.brokers[broker_id].host
        applied = self.image.end_offset if host is None else host.image.end_offset
        self.image = heartbeat(self.image, broker_id, applied)

    # --- brokers -----------------------------------------------------------------------------

    def _start(self, broker: Broker) -> None:
        if broker.fsynced_end is not None:
            self._lose_unfsynced(broker, broker.fsynced_end)
            broker.fsynced_end = None
        broker.host = PartitionHost(broker.data_dir, broker.broker_id)
        broker.pending = Pending()
        self._apply_metadata(broker)

    def _apply_metadata(self, broker: Broker) -> None:
        host = broker.host
        assert host is not None
        if host.image.end_offset == self.image.end_offset:
            return
        actions = partition_changes(host.image, self.image, broker.broker_id)
        host.apply(self.image, actions, now_ms=self.now_ms)

    # --- steps -------------------------------------------------------------------------------

    def step_weights(self) -> dict[str, float]:
        """The steps this simulation takes, by weight: `step` calls `_step_<name>`."""
        weights = STEP_WEIGHTS | ({"power_loss": POWER_LOSS_WEIGHT} if self.power_loss else {})
        if self.delete_records:
            weights["delete_records"] = DELETE_RECORDS_WEIGHT
        if self.broker_power_loss:
            weights["broker_power_loss"] = BROKER_POWER_LOSS_WEIGHT
        return weights

    def step(self) -> str:
        weights = self.step_weights()
        kind = self.rng.choices(list(weights), weights=list(weights.values()))[0]
        done = getattr(self, f"_step_{kind}")()
        self._settle()
        self._track_durability()
        self.counts[kind if done else f"{kind} (nothing to do)"] += 1
        return kind

    def _live(self) -> list[Broker]:
        return [broker for broker in self.brokers.values() if broker.alive]

    def _step_fetch(self) -> bool:
        followers = [
            b
            for b in self._live()
            if b.fetch is None and (h := b.hosted()) is not None and not h.is_leader
        ]
        if not followers:
            return False
        return self._send_fetch(self.rng.choice(followers))

    def _send_fetch(self, follower: Broker) -> bool:
        """The follower's fetch reaches its leader, which reads the answer at once."""
        hosted = follower.hosted()
        if hosted is None or hosted.is_leader:
            return False
        leader = self.brokers.get(hosted.leader_id)
        if leader is None or leader.host is None:
            return False
        sent = follower_position(hosted)
        request = fetch_request(
            FetchParts(
                session_id=0, session_epoch=-1, full=True, partitions={KEY: sent}, forgotten=()
            ),
            replica_id=follower.broker_id,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
        )
        wanted = request.topics[0].partitions[0]
        answer = broker_pb2.FetchResponse.PartitionResponse(partition=0)
        reader = PartitionReader(leader.host, request, self.now_ms)
        reader.read(TOPIC, wanted, answer)
        records = reader.records.get(KEY)
        if records:
            answer.records = records
        follower.fetch = InFlightFetch(leader.broker_id, sent, answer)
        return True

    def _step_answer(self) -> bool:
        waiting = [b for b in self._live() if b.fetch is not None]
        if not waiting:
            return False
        follower = self.rng.choice(waiting)
        lost = self.rng.random() < ANSWER_LOSS
        self._deliver(follower, lost=lost)
        return True

    def _deliver(self, follower: Broker, *, lost: bool) -> None:
        """The answer of the follower's fetch in flight reaches it (unless `lost`)."""
        fetch, follower.fetch = follower.fetch, None
        assert fetch is not None
        if lost:
            self.counts["answers lost"] += 1
            return
        hosted = follower.hosted()
        if answer_is_current(hosted, fetch.leader_id, fetch.sent):
            assert hosted is not None
            before = hosted.log.log_end_offset
            apply_leader_answer(hosted, fetch.answer, self.now_ms)
            if hosted.log.log_end_offset < before:
                self.counts["follower truncations"] += 1

    def _step_metadata(self) -> bool:
        behind = [b for b in self._live() if b.host.image.end_offset < self.image.end_offset]  # type: ignore[union-attr]
        if not behind:
            return False
        self._apply_metadata(self.rng.choice(behind))
        return True

    def _step_isr(self) -> bool:
        leaders = [b for b in self._live() if (h := b.hosted()) is not None and h.is_leader]
        if not leaders:
            return False
        leader = self.rng.choice(leaders)
        assert leader.host is not None
        decided = decide_proposals(leader.host, {KEY}, now_ms=self.now_ms, lag_max_ms=LAG_MAX_MS)
        if not decided:
            return False
        epoch = self.image.brokers[leader.broker_id].broker_epoch
        (request,) = proposal_requests(leader.host, epoch, decided)
        result = cp.alter_partition(self.image, request)
        self._commit(result)
        accepted, _ = settle_proposals(leader.host, [KEY], result.response)
        self.counts["isr changes accepted" if accepted else "isr changes refused"] += 1
        if result.response.partitions[0].error_code == ErrorCode.INELIGIBLE_REPLICA:
            self.counts["isr changes refused as ineligible"] += 1  # KIP-903 among them
        return True

    def _step_heartbeat(self) -> bool:
        fenced = [b for b in self._live() if self.image.brokers[b.broker_id].fenced]
        if not fenced:
            return False
        broker = self.rng.choice(fenced)
        self._apply_metadata(broker)
        self._heartbeat(broker.broker_id)
        return True

    def _step_preferred(self) -> bool:
        result = cp.preferred_leader_elections(self.image)
        self._commit(result)
        return bool(result.records)

    def _step_clock(self) -> bool:
        self.now_ms += self.rng.choice((1, 10, 100, LAG_MAX_MS + 1))
        return True

    # --- the end -----------------------------------------------------------------------------

    def heal(self, rounds: int = 300) -> None:
        """Start every broker and run without faults until the replicas agree."""
        for broker in self.brokers.values():
            if not broker.alive:
                self._register(broker.broker_id)
                self._start(broker)
        for _ in range(rounds):
            for broker in self._live():
                self._apply_metadata(broker)
                if self.image.brokers[broker.broker_id].fenced:
                    self._heartbeat(broker.broker_id)
            for broker in self._live():
                if broker.fetch is None:
                    self._send_fetch(broker)
            for broker in self._live():
                if broker.fetch is not None:
                    self._deliver(broker, lost=False)
            self._step_isr()
            self._settle()
            self._track_durability()
            first = self.batches[0] if self.batches else None
            if first is not None and first.sent_to is None and self._reset_sequences_if_needed():
                self._send_idempotent(first)
                self._settle()
            self.now_ms += 10
            self.check()
            if self.settled():
                return

    def settled(self) -> bool:
        state = self.state()
        busy = self.produces or self.batches
        if state.leader == NO_LEADER or set(state.isr) != set(BROKERS) or busy:
            return False
        hosts = [self.brokers[b].hosted() for b in BROKERS]
        if any(h is None for h in hosts):
            return False
        ends = {h.log.log_end_offset for h in hosts}  # type: ignore[union-attr]
        watermarks = {h.high_watermark for h in hosts}  # type: ignore[union-attr]
        return len(ends) == 1 and watermarks == ends

    def replica_logs(self) -> dict[int, list[tuple[int, bytes, int]]]:
        out = {}
        for broker_id in BROKERS:
            hosted = self.brokers[broker_id].hosted()
            assert hosted is not None
            out[broker_id] = log_records(hosted, 0, hosted.log.log_end_offset)
        return out

    def close(self) -> None:
        for broker in self.brokers.values():
            self._stop_cleaning(broker, discard=True)
            if broker.host is not None:
                broker.host.close_all()
                broker.host = None
