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
"""

from __future__ import annotations

import os
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from samsa.common.errors import ErrorCode, SamsaError
from samsa.common.fetch_session_client import FetchParts, FetchPosition, fetch_request
from samsa.common.record.codec import build_batch
from samsa.metadata.image import NO_LEADER, TOPIC_RESOURCE, MetadataImage, PartitionState
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.broker.hosted_partition import HostedPartition
from samsa.services.broker.log.cleaner import NOTHING_CLEANED, Cleaned, CleaningJob
from samsa.services.broker.log.log import Log
from samsa.services.broker.maintenance import (
    PRODUCER_ID_EXPIRATION_MS,
    Pending,
    checkpoint_pending,
    flush_pending,
    retention_pass,
    take_changes,
)
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_host import PartitionHost, log_config, partition_dir_name
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
from samsa.services.broker.requests.delete_records import start_deletion
from samsa.services.broker.requests.partition_read import PartitionReader
from samsa.services.broker.requests.produce import ReplicationWait, produce
from samsa.services.broker.requests.produce_wait import settled
from samsa.services.controller import control_plane as cp
from samsa.services.controller.liveness import BrokerLiveness
from samsa.v1 import broker_pb2
from samsa.v1 import controller_pb2 as c
from tests.unit.broker.replication_checks import (
    ReplicationChecks,
    compaction_key,
    log_records,
)

TOPIC = "sim"
KEY = (TOPIC, 0)
BROKERS = (1, 2, 3)
LAG_MAX_MS = 1_000  # replica.lag.time.max.ms, on the simulation's clock
# Small segments, so truncation and reads cross segment boundaries.
TOPIC_CONFIGS = {"min.insync.replicas": "2", "segment.bytes": "2048", "max.message.bytes": "1024"}
DEFAULTS = cp.ClusterDefaults(num_partitions=1, default_replication_factor=3)

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
DELETE_RECORDS_WEIGHT = 1.0
# A second broker goes down while one is already down only this often: mostly one fault at a
# time, sometimes two (offline partitions, elections from a shrunk ISR).
SECOND_FAULT = 0.25
# The idempotent producer (KIP-98): one producer id and epoch, at most 5 batches unacknowledged.
PRODUCER_ID = 7
IN_FLIGHT_MAX = 5
# Answers to the oldest unacknowledged batch that mean the leader lost the producer's state.
STATE_LOST = (ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
ANSWER_LOSS = 0.1  # the share of fetch answers lost on the way (the follower asks again)
RETENTION_MS = 3_000  # retention.ms in the retention mode, on the simulation's clock


@dataclass
class InFlightFetch:
    leader_id: int
    sent: FetchPosition
    answer: broker_pb2.FetchResponse.PartitionResponse


@dataclass
class IdempotentBatch:
    """One batch of an idempotent (or transactional, transaction_sim.py) producer: records
    `sequence`, `sequence + 1`, ... (the idempotent producer's values are b"p<sequence>"). It is
    sent, and after a failure sent again, in sequence order."""

    sequence: int
    values: list[bytes]
    sent_to: int | None = None  # the broker it is in flight to; None: (re)send it
    acknowledged: bool = False
    attempts: int = 0


@dataclass
class Produce:
    """One acks=all produce waiting at its leader."""

    broker_id: int
    values: list[bytes]
    wait: ReplicationWait
    batch: IdempotentBatch | None = None


@dataclass
class Broker:
    broker_id: int
    data_dir: Path
    host: PartitionHost | None = None
    incarnation: int = 0
    fetch: InFlightFetch | None = None
    pending: Pending = field(default_factory=Pending)
    # How far its log is on disk (fsynced, in this incarnation or an earlier one): the
    # in-memory recovery point starts at the checkpointed one after an open, below it.
    durable_end: int = 0
    # After a power loss: the offset its log was fsynced up to; the rest is lost at restart.
    fsynced_end: int | None = None
    # A compaction pass planned and not yet swapped in (the cleaner's worker thread runs it
    # meanwhile): the job, and what it made once it ran.
    cleaning: tuple[CleaningJob, Cleaned | None] | None = None

    @property
    def alive(self) -> bool:
        return self.host is not None

    def hosted(self) -> HostedPartition | None:
        return None if self.host is None else self.host.get(*KEY)


def commit(image: MetadataImage, result: cp.ControlResult) -> MetadataImage:  # type: ignore[type-arg]
    if not result.records:
        return image
    return replay(image, make_batch(image, result.records, 0))


def registered(
    image: MetadataImage, broker_id: int, incarnation: str, *, now_ms: int
) -> MetadataImage:
    """`image` after broker `broker_id` registers (fenced) as `incarnation`."""
    request = c.RegisterBrokerRequest(
        broker_id=broker_id, incarnation_id=incarnation, endpoint=f"h:{broker_id}"
    )
    registration = cp.register_broker(
        image, request, liveness=BrokerLiveness(), now_ms=now_ms, session_timeout_ms=LAG_MAX_MS
    )
    return commit(image, registration)


def heartbeat(
    image: MetadataImage, broker_id: int, applied: int, *, want_shutdown: bool = False
) -> MetadataImage:
    """`image` after a heartbeat of broker `broker_id`, which applied the log up to `applied`
    (unfenced once that covers its registration; fenced when it asks to shut down)."""
    request = c.BrokerHeartbeatRequest(
        broker_id=broker_id,
        broker_epoch=image.brokers[broker_id].broker_epoch,
        metadata_offset=applied,
        want_shutdown=want_shutdown,
    )
    return commit(image, cp.broker_heartbeat(image, request))


def cluster_with_topic(configs: dict[str, str], rng: random.Random) -> MetadataImage:
    """BROKERS registered (incarnation "i1") and unfenced, and TOPIC with one partition on all
    three, placed by the controller with `rng`."""
    image = MetadataImage.empty()
    for broker_id in BROKERS:
        image = registered(image, broker_id, "i1", now_ms=0)
        image = heartbeat(image, broker_id, image.end_offset)
    topic = c.CreateTopicsRequest.Topic(
        name=TOPIC, num_partitions=1, replication_factor=len(BROKERS), configs=configs
    )
    created = cp.create_topics(
        image,
        c.CreateTopicsRequest(topics=[topic]),
        rng=rng,
        defaults=DEFAULTS,
        new_topic_id=lambda: b"s" * 16,
    )
    assert created.response.topics[0].error_code == 0, created.response
    return commit(image, created)


class Simulation(ReplicationChecks):
    """The model: brokers, producers and the controller, stepped by `step()`; the checks it
    inherits (replication_checks.py) run on its state after every step."""

    def __init__(
        self,
        root: Path,
        seed: int,
        *,
        flush_each_append: bool = False,
        power_loss: bool = False,
        delete_records: bool = False,
        retention: bool = False,
        compaction: bool = False,
    ) -> None:
        """`flush_each_append`: the topic sets flush.messages=1. `power_loss`: the whole cluster
        may lose power at once (every broker loses what it had not fsynced). `delete_records`:
        the leader is asked to delete records below an offset up to its high watermark.
        `retention`: the topic keeps records RETENTION_MS (their timestamps are 0, so every
        closed segment is soon past it) and the maintenance step runs the retention pass.
        `compaction`: the topic is compacted, plain records carry one of COMPACTION_KEYS keys,
        and the maintenance step compacts the broker's log."""
        self.rng = random.Random(seed)
        self.power_loss = power_loss
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
            # Markers and tombstones may go a second after they were written.
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
        self.image = registered(self.image, broker_id, incarnation, now_ms=self.now_ms)

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

    def _kill(self, broker: Broker) -> None:
        """kill -9: what the process wrote stays (the page cache), its memory is gone."""
        assert broker.host is not None
        self._stop_cleaning(broker, discard=False)
        for hosted in broker.host.partitions.values():
            # The process's descriptors close with it, and nothing else happens: no flush, no
            # index or checkpoint written (Log.close would do all three).
            for segment in hosted.log._local_log.segments:
                if segment.fd >= 0:
                    os.close(segment.fd)
                    segment.fd = -1
        broker.host = None
        broker.fetch = None
        self._forget_produces(broker.broker_id)
        self.checked.pop(broker.broker_id, None)

    def _track_durability(self) -> None:
        """After each step: what each live broker's log holds on disk. A truncation takes its
        bytes away; a flush (the recovery point moving) makes everything below it durable."""
        for broker in self._live():
            hosted = broker.hosted()
            if hosted is not None:
                log = hosted.log
                broker.durable_end = max(
                    min(broker.durable_end, log.log_end_offset), log.recovery_point
                )

    def _lose_unfsynced(self, broker: Broker, fsynced_end: int) -> None:
        """What a power loss leaves of the log: its records below `fsynced_end` (the recovery
        point when the power went). Emulated by opening the log and truncating it there."""
        directory = broker.data_dir / partition_dir_name(*KEY)
        config = log_config(self.image.configs.get((TOPIC_RESOURCE, TOPIC), {}))
        lost = Log.open(directory, config, now_ms=self.now_ms)
        if lost.log_end_offset > fsynced_end:
            self.counts["records lost to the power loss"] += lost.log_end_offset - fsynced_end
        lost.truncate_to(fsynced_end)
        lost.close()

    def _shutdown(self, broker: Broker) -> None:
        """Controlled shutdown: the controller moves its leaderships, then it closes its logs."""
        self.image = heartbeat(
            self.image, broker.broker_id, self.image.end_offset, want_shutdown=True
        )
        self._apply_metadata(broker)
        self._settle()
        assert broker.host is not None
        self._stop_cleaning(broker, discard=True)
        broker.host.close_all()
        broker.host = None
        broker.fetch = None
        self._forget_produces(broker.broker_id)
        self.checked.pop(broker.broker_id, None)

    def _forget_produces(self, broker_id: int) -> None:
        # The client's connection broke: those produces were not acknowledged (the idempotent
        # producer sends its batches again).
        for pending in self.produces:
            if pending.broker_id == broker_id and pending.batch is not None:
                pending.batch.sent_to = None
        self.produces = [p for p in self.produces if p.broker_id != broker_id]
        for batch in self.batches:
            if batch.sent_to == broker_id:
                batch.sent_to = None

    # --- steps -------------------------------------------------------------------------------

    def step_weights(self) -> dict[str, float]:
        """The steps this simulation takes, by weight: `step` calls `_step_<name>`."""
        weights = STEP_WEIGHTS | ({"power_loss": POWER_LOSS_WEIGHT} if self.power_loss else {})
        if self.delete_records:
            weights["delete_records"] = DELETE_RECORDS_WEIGHT
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

    def _step_produce(self) -> bool:
        live = self._live()
        if not live:
            return False
        # Usually the leader the controller names; sometimes a broker a stale client picked.
        leader = self.state().leader
        target = self.brokers.get(leader) if self.rng.random() < 0.9 else self.rng.choice(live)
        if target is None or target.host is None:
            return False
        numbers = range(self.next_value, self.next_value + self.rng.randint(1, 3))
        values = [b"v%d" % n for n in numbers]
        self.next_value += len(values)
        keys = [compaction_key(value) for value in values] if self.compaction else None
        request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=30_000)
        records = build_batch(values, keys=keys)
        request.topics.add(name=TOPIC).partitions.add(partition=0, records=records)
        response, waits = produce(target.host, request, self.now_ms, internal_write_refusal=None)
        result = response.topics[0].partitions[0]
        if waits:
            self.produces.append(Produce(target.broker_id, values, waits[0]))
        elif result.error_code == 0:
            self._acknowledge(values, result.base_offset)
        else:
            self.counts["produce refused"] += 1
        return True

    def _step_idempotent(self) -> bool:
        """The idempotent producer sends its first batch not in flight (a retry, in order), or
        a new batch when fewer than IN_FLIGHT_MAX are unacknowledged."""
        if not self._reset_sequences_if_needed():
            return False
        batch = next((b for b in self.batches if b.sent_to is None), None)
        if batch is None:
            if len(self.batches) >= IN_FLIGHT_MAX:
                return False
            count = self.rng.randint(1, 3)
            sequences = range(self.next_sequence, self.next_sequence + count)
            batch = IdempotentBatch(self.next_sequence, [b"p%d" % n for n in sequences])
            self.next_sequence += count
            self.batches.append(batch)
        elif batch is not self.batches[0] and self.batches[0].sent_to is None:
            return False
        return self._send_idempotent(batch)

    def _reset_sequences_if_needed(self) -> bool:
        """KIP-360, as the SDK does it (producer_sequences.py): once the oldest unacknowledged
        batch was refused because the leader lost this producer's state (its records deleted),
        and nothing is in flight, bump the epoch and number the batches left from 0 again.
        Returns whether the producer may send."""
        if not self.sequence_reset_needed:
            return True
        if any(b.sent_to is not None for b in self.batches):
            return False  # what is in flight finishes first
        self.producer_epoch += 1
        self.epoch_first_sequence = self.batches[0].sequence if self.batches else self.next_sequence
        self.sequence_reset_needed = False
        self.counts["idempotent epoch bumps (KIP-360)"] += 1
        return True

    def _send_idempotent(self, batch: IdempotentBatch) -> bool:
        leader = self.brokers.get(self.state().leader)
        if leader is None or leader.host is None:
            return False
        records = build_batch(
            batch.values,
            producer_id=PRODUCER_ID,
            producer_epoch=self.producer_epoch,
            base_sequence=batch.sequence - self.epoch_first_sequence,
        )
        request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=30_000)
        request.topics.add(name=TOPIC).partitions.add(partition=0, records=records)
        hosted = leader.hosted()
        end_before = -1 if hosted is None else hosted.log.log_end_offset
        response, waits = produce(leader.host, request, self.now_ms, internal_write_refusal=None)
        result = response.topics[0].partitions[0]
        if result.error_code == 0 and 0 <= result.base_offset < end_before:
            self.counts["idempotent retries answered from the log"] += 1
        batch.attempts += 1
        if batch.attempts > 1:
            self.counts["idempotent batches sent again"] += 1
        if waits:
            batch.sent_to = leader.broker_id
            self.produces.append(Produce(leader.broker_id, batch.values, waits[0], batch))
        elif result.error_code == 0:
            self._acknowledge_batch(batch, result.base_offset)
        elif result.error_code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
            # Written before, its offsets forgotten (the batch left the broker's dedupe window
            # with deleted records): a success without offsets, as the SDK and Kafka take it.
            self.counts["idempotent batches answered as duplicates"] += 1
            self._acknowledge_batch(batch, None)
        else:
            self.counts[f"idempotent refused: {ErrorCode(result.error_code).name}"] += 1
            if result.error_code in STATE_LOST and batch is self.batches[0]:
                self.sequence_reset_needed = True
        return True

    def _acknowledge_batch(self, batch: IdempotentBatch, base_offset: int | None) -> None:
        """`base_offset` None: acknowledged without offsets (a duplicate)."""
        batch.acknowledged = True
        batch.sent_to = None
        if base_offset is not None:
            self._acknowledge(batch.values, base_offset)
        while self.batches and self.batches[0].acknowledged:
            self.batches.pop(0)

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
        return True

    def _step_heartbeat(self) -> bool:
        fenced = [b for b in self._live() if self.image.brokers[b.broker_id].fenced]
        if not fenced:
            return False
        broker = self.rng.choice(fenced)
        self._apply_metadata(broker)
        self._heartbeat(broker.broker_id)
        return True

    def _step_expire(self) -> bool:
        dead = [
            b
            for b in self.brokers.values()
            if not b.alive and not self.image.brokers[b.broker_id].fenced
        ]
        if not dead:
            return False
        broker = self.rng.choice(dead)
        self._commit(cp.fence_brokers(self.image, [broker.broker_id]))
        return True

    def _step_kill(self) -> bool:
        live = self._live()
        if not self._may_fault(live):
            return False
        self._kill(self.rng.choice(live))
        self.counts["kills"] += 1
        return True

    def _step_shutdown(self) -> bool:
        live = [b for b in self._live() if not self.image.brokers[b.broker_id].fenced]
        if not self._may_fault(live):
            return False
        self._shutdown(self.rng.choice(live))
        return True

    def _step_power_loss(self) -> bool:
        """Every broker loses power at once: what it had not fsynced is gone. The README promises
        that acknowledged records survive this only with flush.messages=1."""
        if not self.power_loss or len(self._live()) < len(self.brokers):
            return False
        for broker in self.brokers.values():
            broker.fsynced_end = broker.durable_end
            self._kill(broker)
        self.counts["power losses"] += 1
        return True

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

    def _may_fault(self, live: list[Broker]) -> bool:
        """Whether one of `live` may go down now (one always stays up)."""
        if len(live) < 2:
            return False
        return len(live) == len(self.brokers) or self.rng.random() < SECOND_FAULT

    def _step_restart(self) -> bool:
        dead = [b for b in self.brokers.values() if not b.alive]
        if not dead:
            return False
        broker = self.rng.choice(dead)
        self._register(broker.broker_id)
        self._start(broker)
        return True

    def _step_preferred(self) -> bool:
        result = cp.preferred_leader_elections(self.image)
        self._commit(result)
        return bool(result.records)

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

    def _step_clock(self) -> bool:
        self.now_ms += self.rng.choice((1, 10, 100, LAG_MAX_MS + 1))
        return True

    # --- acknowledgements ----------------------------------------------------------------------

    def _settle(self) -> None:
        """Answer the acks=all produces whose wait is over, as await_replication does."""
        still = []
        for pending in self.produces:
            if not settled(pending.wait):
                still.append(pending)
            elif pending.wait.result.error_code == 0:
                if pending.batch is None:
                    self._acknowledge(pending.values, pending.wait.result.base_offset)
                else:
                    self._acknowledge_batch(pending.batch, pending.wait.result.base_offset)
            else:
                self.counts["produce failed after append"] += 1
                if pending.batch is not None:
                    pending.batch.sent_to = None  # sent again, in order
        self.produces = still

    def _acknowledge(self, values: list[bytes], base_offset: int) -> None:
        for index, value in enumerate(values):
            self.acked[base_offset + index] = value
        self.counts["records acknowledged"] += len(values)

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
