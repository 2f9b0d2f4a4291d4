"""The safety checks of the replication simulation (replication_sim.py), run on its state after
every step: what must hold in any cluster, whatever the faults.

`check` asserts the safety of replication (DESIGN §4):
- every replica's high watermark is within its log;
- committed records never change: each replica's log below its high watermark equals what
  every other replica ever showed below its own (the first to show an offset fixes it);
- an acknowledged record (acks=all, answered success) is committed at the offset it was
  answered with, and every live replica the controller could elect (its ISR and its eligible
  leader replicas) holds it;
- the idempotent producer's records (one producer id, up to IN_FLIGHT_MAX batches in flight,
  each failed or cut-off batch sent again in order to whoever leads then) are committed with
  sequences 0, 1, 2, ...: no retry stored twice, none skipped, none reordered (a record is
  written again only after its first copy was deleted and the producer reset, KIP-360);
- under compaction, every ISR member holds each committed record or a newer committed one of
  its key.

The checks read the simulation's state and record what they learned in it (`committed`, the
first copy of each offset any replica showed below its high watermark; how far each replica and
the idempotent sequences were checked), so that each step checks only what is new. A violation
raises `SafetyViolation`; simulation_run.py adds the seed and the step.
"""

from __future__ import annotations

from samsa.common.record.batch_decoding import decode_batches
from samsa.services.broker.hosted_partition import HostedPartition
from tests.unit.broker.replication_cluster import ClusterState

COMPACTION_KEYS = 5  # plain record b"v<n>" has key b"k<n % COMPACTION_KEYS>" when compacted


class SafetyViolation(AssertionError):
    pass


def compaction_key(value: bytes | None) -> bytes | None:
    """A record's key in the compaction mode: plain records b"v<n>" and transactional ones
    b"t<txn>.<i>" (transaction_sim.py) share COMPACTION_KEYS keys; each of the idempotent
    producer's records b"p<n>" is its own key (a compacted topic refuses a keyless record), so
    that compaction keeps every one. None: a marker, or a record the leader must refuse."""
    if not value:
        return None
    if value.startswith(b"p"):
        return value
    if value.startswith(b"v"):
        return b"k%d" % (int(value[1:]) % COMPACTION_KEYS)
    if value.startswith(b"t"):
        number, index = value[1:].split(b".")
        return b"k%d" % ((int(number) + int(index)) % COMPACTION_KEYS)
    return None


def log_records(hosted: HostedPartition, start: int, end: int) -> list[tuple[int, bytes, int]]:
    """(offset, value, leader epoch) of the records in [start, end) of a replica's log."""
    out: list[tuple[int, bytes, int]] = []
    log = hosted.log
    start = max(start, log.log_start_offset)
    while start < end:
        read = log.read(start, 1 << 20, max_offset=end)
        if not read.records:
            break
        for batch in decode_batches(read.records):
            epoch = batch.header.partition_leader_epoch
            for record in batch:
                if start <= record.offset < end:
                    out.append((record.offset, record.value or b"", epoch))
        start = read.next_offset
    return out


class ReplicationChecks(ClusterState):
    """The invariants, as methods of the simulation (which inherits them): `check()` after every
    step. `cleanable` is the hook the transaction simulation overrides (aborted records). What
    they read is declared in `ClusterState` (replication_cluster.py)."""

    # What the checks learned so far, kept on the simulation between steps (and `checked`).
    committed: dict[int, tuple[bytes, int]]
    sequence_first_offset: dict[int, int]
    sequence_checked: int
    sequence_expected: int
    sequence_skipped: bool

    def check(self) -> None:
        for broker in self._live():
            hosted = broker.hosted()
            if hosted is None:
                continue
            log_end = hosted.log.log_end_offset
            if not hosted.log.log_start_offset <= hosted.high_watermark <= log_end:
                raise SafetyViolation(
                    f"broker {broker.broker_id}: high watermark {hosted.high_watermark} "
                    f"outside its log [{hosted.log.log_start_offset}, {log_end}]"
                )
            self._check_committed(broker.broker_id, hosted)
        for offset, value in self.acked.items():
            if self.committed.get(offset, (value,))[0] != value:
                raise SafetyViolation(
                    f"acknowledged {value!r} at {offset}, but {self.committed[offset][0]!r} "
                    "was committed there"
                )
        self._check_electable_replicas()
        self._check_sequences()
        if self.compaction:
            self._check_compacted_replicas()

    def cleanable(self, value: bytes) -> bool:
        """Whether compaction may remove this record whatever newer records there are (the
        transaction simulation's aborted records); none here."""
        return False

    def _check_compacted_replicas(self) -> None:
        """A committed record is gone from a replica the controller could elect only when a
        newer committed record of its key is there (Kafka's cleaner stops at the last stable
        offset): otherwise a leader change truncating that newer record leaves the replica with
        neither. (A follower out of the ISR copying a compacted log from its start may hold the
        gap before the newer record's segment reaches it, as in Kafka: it cannot be elected.)"""
        for broker_id in self.state().isr:
            hosted = self.brokers[broker_id].hosted()
            if hosted is None:
                continue
            log_end = hosted.log.log_end_offset
            newest: dict[bytes, int] = {}
            present = set()
            for offset, value, _ in log_records(hosted, 0, log_end):
                present.add(offset)
                key = compaction_key(value)
                if key is not None and offset in self.committed and not self.cleanable(value):
                    newest[key] = offset
            start = hosted.log.log_start_offset
            for offset, (value, _) in self.committed.items():
                if not start <= offset < log_end or offset in present or self.cleanable(value):
                    continue
                key = compaction_key(value)
                newer = -1 if key is None else newest.get(key, -1)
                if newer > offset:
                    continue
                raise SafetyViolation(
                    f"broker {broker_id} dropped committed {value!r} at {offset} with no newer "
                    f"committed record of its key (its newest committed: {newer})"
                )

    def _check_sequences(self) -> None:
        """The idempotent producer's records in the committed log carry sequences 0, 1, 2, ...
        in offset order: none twice (a retry deduplicated), none skipped, none reordered."""
        offset = self.sequence_checked
        while offset in self.committed or offset < self.deleted_below:
            if offset not in self.committed:  # deleted before any replica showed it committed
                self.sequence_skipped = True
                offset += 1
                continue
            value = self.committed[offset][0]
            if value.startswith(b"p"):
                sequence = int(value[1:])
                first = self.sequence_first_offset.setdefault(sequence, offset)
                if first != offset and first < self.deleted_below:
                    # Its first copy was deleted, and with it the producer's state: sent again
                    # after a KIP-360 reset, as Kafka's producer does too.
                    self.counts["idempotent records written again after deletion"] += 1
                    offset += 1
                    continue
                if self.sequence_skipped and sequence >= self.sequence_expected:
                    self.sequence_expected, self.sequence_skipped = sequence, False
                if sequence != self.sequence_expected:
                    kind = "duplicated" if sequence < self.sequence_expected else "out of order"
                    raise SafetyViolation(
                        f"idempotent record {sequence} {kind} at committed offset {offset} "
                        f"(expected sequence {self.sequence_expected})"
                    )
                self.sequence_expected += 1
            offset += 1
        self.sequence_checked = offset

    def _check_committed(self, broker_id: int, hosted: HostedPartition) -> None:
        """This replica's log below its high watermark matches what was committed."""
        start = min(self.checked.get(broker_id, 0), hosted.high_watermark)
        for offset, value, epoch in log_records(hosted, start, hosted.high_watermark):
            first = self.committed.setdefault(offset, (value, epoch))
            if first != (value, epoch):
                raise SafetyViolation(
                    f"broker {broker_id} holds {value!r} (epoch {epoch}) at committed offset "
                    f"{offset}, where {first[0]!r} (epoch {first[1]}) was committed"
                )
        self.checked[broker_id] = hosted.high_watermark

    def _check_electable_replicas(self) -> None:
        """Every live replica the controller could elect (its ISR and its eligible leader
        replicas, KIP-966) holds every acknowledged record."""
        if not self.acked:
            return
        needed = max(self.acked) + 1
        state = self.state()
        where = f"the ISR {list(state.isr)} or ELR {list(state.elr)}"
        for replica in (*state.isr, *state.elr):
            hosted = self.brokers[replica].hosted()
            if hosted is None:
                continue
            if hosted.log.log_end_offset < needed:
                raise SafetyViolation(
                    f"broker {replica} is in {where} (leader {state.leader}, epoch "
                    f"{state.leader_epoch}) but its log ends at {hosted.log.log_end_offset}, "
                    f"below acknowledged offset {needed - 1}"
                )
            for offset, value, _ in log_records(hosted, needed - 1, needed):
                if offset >= self.deleted_below and self.acked.get(offset) != value:
                    raise SafetyViolation(
                        f"broker {replica} in {where} holds {value!r} at acknowledged offset "
                        f"{offset}, not {self.acked[offset]!r}"
                    )
