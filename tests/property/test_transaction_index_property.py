"""Goal: the last stable offset and the aborted-transaction index (transaction_index.py, fed by
producer_state.py) agree with a model that recomputes both from the whole history, after every
append, marker, high-watermark move and truncation; and the index bytes survive a round trip and
a torn tail.

Method: hypothesis drives a partition's history — transactional and plain batches of a few
producers, COMMIT and ABORT markers at the bumped epoch (KIP-890), the high watermark moving up,
truncations above it (with the producer table rebuilt by replaying what is left, as the log does)
— and checks, at each step, the LSO and `collect_aborted` for every fetch window against the
model. Index entries are spread over "segments" of SEGMENT_SPAN offsets by marker offset, as the
log stores them with their markers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.common.record.codec import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT
from samsa.services.broker.log.append_info import NO_CONTROL_TYPE, PlannedBatch
from samsa.services.broker.log.producer_state import ProducerStateTable
from samsa.services.broker.log.transaction_index import (
    ENTRY_BYTES,
    AbortedTransaction,
    UnstableTransactions,
    aborted_entry,
    collect_aborted,
    decode_entries,
    encode_entry,
)

SEGMENT_SPAN = 5
PRODUCERS = 2

MARKER_TYPES = {"commit": CONTROL_TYPE_COMMIT, "abort": CONTROL_TYPE_ABORT}


@dataclass(frozen=True)
class Batch:
    producer_id: int
    epoch: int
    sequence: int
    base_offset: int
    records: int
    transactional: bool
    marker: str | None = None  # "commit" / "abort" for a control batch

    def planned(self) -> PlannedBatch:
        return PlannedBatch(
            position=0,
            base_offset=self.base_offset,
            last_offset=self.base_offset + self.records - 1,
            max_timestamp=0,
            size_bytes=100,
            partition_leader_epoch=0,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=self.sequence,
            is_transactional=self.transactional,
            is_control=self.marker is not None,
            control_type=MARKER_TYPES.get(self.marker, NO_CONTROL_TYPE),
        )


@dataclass
class Partition:
    """The system under test, driven as the log will drive it."""

    history: list[Batch] = field(default_factory=list)
    table: ProducerStateTable = field(default_factory=ProducerStateTable)
    unstable: UnstableTransactions = field(default_factory=UnstableTransactions)
    index: list[AbortedTransaction] = field(default_factory=list)
    high_watermark: int = 0

    @property
    def log_end(self) -> int:
        return self.history[-1].base_offset + self.history[-1].records if self.history else 0

    def append(self, batch: Batch) -> None:
        self.history.append(batch)
        planned = batch.planned()
        for ended in self.table.apply([planned], 0, planned.control_type):
            self.unstable.on_completed([ended])
            if batch.marker == "abort":
                self.index.append(aborted_entry(ended, self.table.open_transactions().values()))

    def truncate(self, offset: int) -> None:
        self.history = [b for b in self.history if b.base_offset < offset]
        self.table = ProducerStateTable()  # rebuilt by replay, as after a truncation
        for planned in (b.planned() for b in self.history):
            self.table.apply([planned], 0, planned.control_type)
        self.unstable.on_truncate(offset)
        self.index = [e for e in self.index if e.last_offset < offset]

    def lso(self) -> int:
        return self.unstable.last_stable_offset(
            self.table.open_transactions().values(), self.high_watermark
        )

    def collect(self, fetch_offset: int, upper_bound: int) -> list[AbortedTransaction]:
        segments: dict[int, list[AbortedTransaction]] = {}
        for entry in self.index:
            segments.setdefault(entry.last_offset // SEGMENT_SPAN, []).append(entry)
        first = fetch_offset // SEGMENT_SPAN
        last = self.log_end // SEGMENT_SPAN
        return collect_aborted(
            (segments.get(number, []) for number in range(first, last + 1)),
            fetch_offset,
            upper_bound,
        )


def model_transactions(history: list[Batch]) -> list[tuple[int, int, int | None, str | None]]:
    """(producer_id, first_offset, marker offset or None, marker kind) of every transaction."""
    found: list[tuple[int, int, int | None, str | None]] = []
    open_at: dict[int, int] = {}
    for batch in history:
        if batch.marker is not None:
            if batch.producer_id in open_at:
                found.append(
                    (
                        batch.producer_id,
                        open_at.pop(batch.producer_id),
                        batch.base_offset,
                        batch.marker,
                    )
                )
        elif batch.transactional and batch.producer_id not in open_at:
            open_at[batch.producer_id] = batch.base_offset
    found.extend((producer, first, None, None) for producer, first in open_at.items())
    return found


def model_lso(partition: Partition) -> int:
    unstable = [
        first
        for _, first, marker_at, _ in model_transactions(partition.history)
        if marker_at is None or marker_at >= partition.high_watermark
    ]
    return min([partition.high_watermark, *unstable])


def model_aborted(
    history: list[Batch], fetch_offset: int, upper_bound: int
) -> list[tuple[int, int]]:
    return sorted(
        (
            (first, producer)
            for producer, first, marker_at, kind in model_transactions(history)
            if kind == "abort"
            and marker_at is not None
            and marker_at >= fetch_offset
            and first < upper_bound
        ),
    )


operation = st.one_of(
    st.tuples(st.just("data"), st.integers(0, PRODUCERS - 1), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("end"), st.integers(0, PRODUCERS - 1), st.sampled_from(["commit", "abort"])),
    st.tuples(st.just("hw"), st.integers(0, 6)),
    st.tuples(st.just("truncate"), st.integers(0, 4)),
)


@settings(max_examples=500, deadline=None, database=None)
@given(st.lists(operation, max_size=40))
def test_lso_and_aborted_index_match_the_model(operations: list[tuple]) -> None:  # type: ignore[type-arg]
    partition = Partition()
    epochs = [0] * PRODUCERS
    sequences = [0] * PRODUCERS
    for op in operations:
        if op[0] == "data":
            _, producer, records, transactional = op
            partition.append(
                Batch(
                    producer,
                    epochs[producer],
                    sequences[producer],
                    partition.log_end,
                    records,
                    transactional,
                )
            )
            sequences[producer] += records
        elif op[0] == "end":
            _, producer, kind = op
            epochs[producer] += 1  # the coordinator bumps the epoch at every end (KIP-890)
            sequences[producer] = 0
            kind_type = MARKER_TYPES[kind]
            assert partition.table.check_marker(producer, epochs[producer], kind_type) is None
            partition.append(
                Batch(producer, epochs[producer], -1, partition.log_end, 1, True, kind)
            )
        elif op[0] == "hw":
            partition.high_watermark = min(partition.log_end, partition.high_watermark + op[1])
            partition.unstable.on_high_watermark(partition.high_watermark)
        else:  # truncate the unreplicated tail (never below the high watermark), whole batches
            starts = [
                b.base_offset
                for b in partition.history
                if b.base_offset >= partition.high_watermark
            ]
            if starts:
                partition.truncate(starts[max(0, len(starts) - 1 - op[1])])
                # The producers' epochs and sequences continue from what the log still holds.
                for producer in range(PRODUCERS):
                    entry = partition.table.entry(producer)
                    epochs[producer] = max(epochs[producer], entry.producer_epoch if entry else 0)
                    epochs[producer] += 1  # a truncated producer restarts at a new epoch
                    sequences[producer] = 0
                    if entry is not None and entry.current_txn_first_offset >= 0:
                        # its open transaction is ended by the coordinator's abort marker
                        partition.append(
                            Batch(
                                producer, epochs[producer], -1, partition.log_end, 1, True, "abort"
                            )
                        )
                        epochs[producer] += 1

        assert partition.lso() == model_lso(partition), (op, partition.history)
        end = partition.log_end
        for fetch_offset in range(end + 1):
            for upper_bound in (fetch_offset + 1, partition.lso(), end):
                if upper_bound <= fetch_offset:
                    continue
                got = [
                    (e.first_offset, e.producer_id)
                    for e in partition.collect(fetch_offset, upper_bound)
                ]
                assert got == model_aborted(partition.history, fetch_offset, upper_bound), (
                    fetch_offset,
                    upper_bound,
                    partition.history,
                )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2**40), st.integers(1, 50), st.integers(0, 60)),
        max_size=8,
    ),
    st.integers(0, 40),
)
def test_index_bytes_round_trip_and_a_torn_tail_is_dropped(
    spans: list[tuple[int, int, int]], cut: int
) -> None:
    entries = []
    offset = 0
    for producer, length, lso_delta in spans:
        first, last = offset, offset + length
        entries.append(AbortedTransaction(producer, first, last, first + lso_delta))
        offset = last + 1
    data = b"".join(encode_entry(entry) for entry in entries)
    assert decode_entries(data) == (entries, len(data))
    torn = data[: max(0, len(data) - cut)]
    kept = len(torn) // ENTRY_BYTES
    assert decode_entries(torn) == (entries[:kept], kept * ENTRY_BYTES)
    if entries:
        flipped = bytearray(data)
        flipped[-ENTRY_BYTES] ^= 1  # the last entry's first byte
        assert decode_entries(bytes(flipped)) == (entries[:-1], len(data) - ENTRY_BYTES)
