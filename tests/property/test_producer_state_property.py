"""Goal: under any sequence of produces — new batches, retries of recent and old batches, gaps,
fenced and bumped epochs, unknown producers, followers' replicated batches near the sequence wrap,
multi-batch appends and expiry — the producer state table answers exactly what a dumb model says,
keeps what the model keeps, and a snapshot taken at any point plus the replay of what came after
rebuilds the same table. Any bytes handed to decode_snapshot give a table and a list of unsettled
transactions (whose encoding is those same bytes) or CorruptSnapshotError, nothing else.

Method: hypothesis draws a list of operations, each turned into an append against the current state
(offsets from a log end offset, timestamps from a clock that only moves forward). The model keeps,
per producer, its epoch, every batch it accepted in that epoch, its largest timestamp and the clock
at its last batch, and judges each batch by the rules written out over the full history (the window
is the last five of the list). Both answers must be equal; accepted appends are applied to both, and
their entries compared after every operation. Retries of a batch among the last five also check the
answer against the operation's intent: the original offsets. A snapshot is encoded at a drawn step,
then decoded and fed every later mutation; at the end it must equal the table.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from itertools import pairwise

import crc32c
from hypothesis import event, given, settings
from hypothesis import strategies as st

from samsa.common.errors import ErrorCode
from samsa.services.broker.log.append_info import PlannedBatch
from samsa.services.broker.log.producer_snapshot_codec import (
    SNAPSHOT_VERSION,
    decode_snapshot,
    encode_snapshot,
)
from samsa.services.broker.log.producer_state import (
    BATCHES_KEPT,
    NO_PRODUCER_ID,
    SEQUENCE_MAX,
    AppendRefused,
    BatchMetadata,
    CorruptSnapshotError,
    DuplicateAppend,
    ProducerEntry,
    ProducerStateTable,
)

EXPIRATION_MS = 1_000
MODULUS = SEQUENCE_MAX + 1

PRODUCER = st.sampled_from([0, 0, 0, 1, 2])  # one busy producer fills its window
# (kind, producer id, amount): records for "new" and "plain", how far back for "retry", the gap
# for "gap", the records before the next sequence for "overlap" (a batch straddling the last
# sequence), the first sequence for "bump" (mostly 0, the legal start).
KIND = st.sampled_from(
    ["new"] * 3 + ["retry"] * 3 + ["gap", "overlap", "old_epoch", "bump", "plain"]
)
SINGLE = st.tuples(KIND, PRODUCER, st.integers(1, BATCHES_KEPT + 3))
SINGLE_APPEND = st.tuples(st.just("append"), st.lists(SINGLE, min_size=1, max_size=1))
OPERATION = st.one_of(
    SINGLE_APPEND,
    SINGLE_APPEND,
    SINGLE_APPEND,
    st.tuples(st.just("append"), st.lists(SINGLE, min_size=2, max_size=3)),
    st.tuples(st.just("replicate"), PRODUCER, st.integers(SEQUENCE_MAX - 6, SEQUENCE_MAX)),
    st.tuples(st.just("expire"), st.integers(0, 800) | st.none()),  # None: to the first deadline
)


@dataclass
class ModelProducer:
    producer_epoch: int
    batches: list[BatchMetadata] = field(default_factory=list)  # all of this epoch, oldest first
    last_timestamp: int = 0
    last_append_ms: int = 0  # the clock at its last applied batch


Producers = dict[int, ModelProducer]


def metadata(batch: PlannedBatch) -> BatchMetadata:
    records = batch.last_offset - batch.base_offset + 1
    last_sequence = (batch.base_sequence + records - 1) % MODULUS
    return BatchMetadata(
        batch.base_sequence,
        last_sequence,
        batch.base_offset,
        batch.last_offset,
        batch.max_timestamp,
    )


def accept(producers: Producers, batch: PlannedBatch, now_ms: int) -> None:
    """The model's apply at `now_ms`: a different epoch starts a new list; every batch is
    remembered."""
    if batch.producer_id < 0:
        return
    producer = producers.get(batch.producer_id)
    if producer is None:
        producer = ModelProducer(batch.producer_epoch, last_timestamp=batch.max_timestamp)
        producers[batch.producer_id] = producer
    if producer.producer_epoch != batch.producer_epoch:
        producer.producer_epoch, producer.batches = batch.producer_epoch, []
    producer.batches.append(metadata(batch))
    producer.last_timestamp = max(producer.last_timestamp, batch.max_timestamp)
    producer.last_append_ms = now_ms


def judge(producers: Producers, batch: PlannedBatch) -> BatchMetadata | ErrorCode | None:
    """One idempotent batch: None (new), the batch it repeats, or the error code."""
    if batch.producer_epoch < 0 or batch.base_sequence < 0:
        return ErrorCode.INVALID_RECORD
    producer = producers.get(batch.producer_id)
    sequence = batch.base_sequence
    if producer is None:
        return None if sequence == 0 else ErrorCode.UNKNOWN_PRODUCER_ID
    if batch.producer_epoch < producer.producer_epoch:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if batch.producer_epoch > producer.producer_epoch:
        return None if sequence == 0 else ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    mine = metadata(batch)
    window = producer.batches[-BATCHES_KEPT:]
    for kept in window:
        if kept[:2] == mine[:2]:
            return kept
    if not producer.batches:
        return None if sequence == 0 else ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    latest = producer.batches[-1].last_sequence
    if sequence == (latest + 1) % MODULUS:
        return None
    if (latest - mine.last_sequence) % MODULUS < MODULUS // 2:  # behind, across the wrap too
        return ErrorCode.DUPLICATE_SEQUENCE_NUMBER
    return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def model_answer(producers: Producers, batches: list[PlannedBatch]) -> object:
    """The expected answer to an append: None, DuplicateAppend, or an ErrorCode."""
    scratch = copy_producers(producers)
    duplicates: list[BatchMetadata] = []
    for batch in batches:
        if batch.producer_id == NO_PRODUCER_ID:
            continue
        verdict = judge(scratch, batch)
        if isinstance(verdict, ErrorCode):
            return verdict
        if verdict is None:
            accept(scratch, batch, 0)  # a scratch state: its times are never looked at
        else:
            duplicates.append(verdict)
    if not duplicates:
        return None
    consecutive = all(
        later.base_offset == earlier.last_offset + 1 for earlier, later in pairwise(duplicates)
    )
    if len(duplicates) != len(batches) or not consecutive:
        return ErrorCode.INVALID_REQUEST
    return DuplicateAppend(duplicates[0].base_offset, duplicates[-1].last_offset)


def copy_producers(producers: Producers) -> Producers:
    return {
        producer_id: ModelProducer(
            p.producer_epoch, list(p.batches), p.last_timestamp, p.last_append_ms
        )
        for producer_id, p in producers.items()
    }


def model_entries(producers: Producers) -> list[ProducerEntry]:
    return [
        ProducerEntry(
            producer_id,
            producers[producer_id].producer_epoch,
            tuple(producers[producer_id].batches[-BATCHES_KEPT:]),
            producers[producer_id].last_timestamp,
            last_append_ms=producers[producer_id].last_append_ms,
        )
        for producer_id in sorted(producers)
    ]


@dataclass
class Run:
    """The driver: a table, the model, the log end offset and the clock."""

    table: ProducerStateTable = field(default_factory=ProducerStateTable)
    producers: Producers = field(default_factory=dict)
    log_end_offset: int = 0
    now_ms: int = 0
    mutations: list[tuple[str, object]] = field(default_factory=list)

    def planned(self, producer_id: int, epoch: int, sequence: int, records: int) -> PlannedBatch:
        """A batch at the next free offsets of the append being built."""
        base_offset = self.log_end_offset
        self.log_end_offset += records
        timestamp = self.now_ms - records * 7  # not monotonic: the entry keeps the largest
        return PlannedBatch(
            0, base_offset, base_offset + records - 1, timestamp, 100, 0, producer_id, epoch,
            sequence % MODULUS, False,
        )  # fmt: skip

    def build(self, single: tuple, scratch: Producers) -> PlannedBatch:
        """The batch an operation asks for, against `scratch` (the state after the earlier
        batches of the same append)."""
        kind, producer_id, amount = single
        producer = scratch.get(producer_id)
        epoch = producer.producer_epoch if producer else producer_id  # so that some can be older
        last = producer.batches[-1].last_sequence if producer and producer.batches else -1
        records = (amount - 1) % 4 + 1
        if kind == "plain":
            return self.planned(NO_PRODUCER_ID, -1, -1, records)
        if kind == "retry" and producer and producer.batches:
            kept = producer.batches[-min(amount, len(producer.batches))]
            records = kept.last_offset - kept.base_offset + 1
            batch = self.planned(producer_id, epoch, kept.first_sequence, records)
        elif kind == "gap":
            batch = self.planned(producer_id, epoch, last + 1 + amount, 1)
        elif kind == "overlap":
            batch = self.planned(producer_id, epoch, last + 1 - records, records + 1)
        elif kind == "old_epoch":
            batch = self.planned(producer_id, epoch - 1, last + 1, records)
        elif kind == "bump":
            batch = self.planned(producer_id, epoch + 1, 0 if amount <= 6 else amount, 1)
        else:
            batch = self.planned(producer_id, epoch, last + 1, records)
        if judge(scratch, batch) is None:
            if producer and producer.batches and batch.base_sequence < last:
                event("sequence wrapped")
            accept(scratch, batch, self.now_ms)
        return batch

    def append(self, singles: list[tuple]) -> None:
        log_end_offset = self.log_end_offset
        scratch = copy_producers(self.producers)
        batches = [self.build(single, scratch) for single in singles]
        expected = model_answer(self.producers, batches)
        answer = self.table.check_leader_append(batches)
        if isinstance(answer, AppendRefused):
            event(f"refused {answer.code.name}")
            assert answer.code == expected, (answer, expected)
            assert answer.message
        else:
            event(f"answered {type(answer).__name__}")
            assert answer == expected, (answer, expected)
        self.check_retry_intent(singles, batches, answer)
        if answer is None:
            self.table.apply(batches, self.now_ms)
            for batch in batches:
                accept(self.producers, batch, self.now_ms)
            self.mutations.append(("apply", (batches, self.now_ms)))
        else:
            self.log_end_offset = log_end_offset  # nothing was written

    def check_retry_intent(
        self, singles: list[tuple], batches: list[PlannedBatch], answer: object
    ) -> None:
        """A lone retry of one of the last five batches of its producer's epoch answers that
        batch's offsets: the reason the window exists, checked without the model's rules."""
        if len(singles) != 1 or singles[0][0] != "retry":
            return
        producer = self.producers.get(batches[0].producer_id)
        if producer is None or not producer.batches:
            return
        back = singles[0][2]
        if back <= min(BATCHES_KEPT, len(producer.batches)):
            kept = producer.batches[-back]
            assert answer == DuplicateAppend(kept.base_offset, kept.last_offset), answer

    def replicate(self, producer_id: int, sequence: int) -> None:
        """A follower applies a batch its leader wrote, unchecked: it continues the producer's
        sequence, or for a producer the table does not know it starts near the wrap (the leader
        knew the producer; this replica's state expired)."""
        producer = self.producers.get(producer_id)
        if producer and producer.batches:
            sequence = producer.batches[-1].last_sequence + 1
        epoch = producer.producer_epoch if producer else producer_id
        batch = self.planned(producer_id, epoch, sequence, 3)
        self.table.apply([batch], self.now_ms)
        accept(self.producers, batch, self.now_ms)
        self.mutations.append(("apply", ([batch], self.now_ms)))

    def expire(self, advance_ms: int | None) -> None:
        if advance_ms is None and self.producers:  # exactly the first deadline: `<=`, not `<`
            deadline_ms = min(p.last_timestamp for p in self.producers.values()) + EXPIRATION_MS
            self.now_ms = max(self.now_ms, deadline_ms)
        else:
            self.now_ms += advance_ms or 0
        expected = sorted(
            producer_id
            for producer_id, producer in self.producers.items()
            if producer.last_timestamp + EXPIRATION_MS <= self.now_ms
        )
        assert self.table.expire(self.now_ms, EXPIRATION_MS) == expected
        for producer_id in expected:
            del self.producers[producer_id]
        self.mutations.append(("expire", self.now_ms))


def replay(table: ProducerStateTable, mutations: list[tuple[str, object]]) -> None:
    for kind, argument in mutations:
        if kind == "apply":
            table.apply(*argument)  # type: ignore[arg-type]
        else:
            table.expire(argument, EXPIRATION_MS)  # type: ignore[arg-type]


@settings(max_examples=400, deadline=None)
@given(operations=st.lists(OPERATION, min_size=5, max_size=40), snapshot_at=st.integers(0, 40))
def test_the_table_answers_as_the_model_and_snapshots_replay(
    operations: list[tuple], snapshot_at: int
) -> None:
    run = Run(now_ms=10_000)
    snapshot, mutations_before = encode_snapshot(ProducerStateTable()), 0
    for step, operation in enumerate(operations):
        if step == snapshot_at:
            snapshot, mutations_before = encode_snapshot(run.table), len(run.mutations)
        kind = operation[0]
        if kind == "append":
            run.append(operation[1])
        elif kind == "replicate":
            run.replicate(operation[1], operation[2])
        else:
            run.expire(operation[1])
        run.now_ms += 5
        assert run.table.entries() == model_entries(run.producers)
        assert len(run.table) == len(run.producers)
    rebuilt = decode_snapshot(snapshot, loaded_ms=0).producers
    replay(rebuilt, run.mutations[mutations_before:])
    assert rebuilt == run.table
    assert decode_snapshot(encode_snapshot(run.table), loaded_ms=0).producers == run.table


def decoded_or_refused(data: bytes) -> ProducerStateTable | None:
    """decode_snapshot's answer: a table and unsettled transactions whose encoding is `data`
    exactly (for the current version; an older snapshot is re-encoded as the current version,
    which decodes to the same), or None when it raised CorruptSnapshotError (any other exception
    fails the test)."""
    try:
        decoded = decode_snapshot(data, loaded_ms=0)
    except CorruptSnapshotError:
        return None
    if data[4:6] == struct.pack(">h", SNAPSHOT_VERSION):
        assert encode_snapshot(*decoded) == data
    else:
        assert decode_snapshot(encode_snapshot(*decoded), loaded_ms=0) == decoded
    return decoded.producers


def signed(body: bytes) -> bytes:
    return struct.pack(">I", crc32c.crc32c(body)) + body


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300), entry_count=st.integers(-1, 4))
def test_decode_gives_a_canonical_table_or_a_corrupt_snapshot_error(
    data: bytes, entry_count: int
) -> None:
    """Random bytes, and random entries behind a valid CRC and header (to reach the parser)."""
    decoded_or_refused(data)
    for version in (1, 2, SNAPSHOT_VERSION):
        decoded_or_refused(signed(struct.pack(">hi", version, entry_count) + data))


@settings(max_examples=200, deadline=None)
@given(
    operations=st.lists(OPERATION, max_size=15), cut=st.integers(0, 400), byte=st.integers(1, 255)
)
def test_damaged_snapshots_are_refused(operations: list[tuple], cut: int, byte: int) -> None:
    """Any single damaged byte (CRC-32C catches every burst of 32 bits or fewer) or any cut is
    refused; behind a recomputed CRC, the parser still answers a canonical table or refuses."""
    run = Run(now_ms=10_000)
    for operation in operations:
        if operation[0] == "append":
            run.append(operation[1])
    data = encode_snapshot(run.table)
    position = cut % len(data)
    damaged = data[:position] + bytes([data[position] ^ byte]) + data[position + 1 :]
    assert decoded_or_refused(damaged) is None
    assert decoded_or_refused(data[:position]) is None
    if position >= 4:
        decoded_or_refused(signed(damaged[4:]))
        assert decoded_or_refused(signed(data[4:position])) is None
