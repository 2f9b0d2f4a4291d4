"""Goal: the producer state judges a batch the same wherever the sequence wrap (SEQUENCE_MAX to
0) falls: a gap that crosses the wrap is OUT_OF_ORDER_SEQUENCE_NUMBER, never
DUPLICATE_SEQUENCE_NUMBER (which the producer takes as "written": answering it for a batch that
was never written loses the batch), and a stale retry from before the wrap is
DUPLICATE_SEQUENCE_NUMBER as it is away from the wrap.

Method: pure calls on a ProducerStateTable. A producer's history is a run of consecutive batches
applied (as a follower would, so it may start anywhere on the ring); a probe batch is placed
relative to the latest sequence. The examples put the wrap between the history and the probe;
the property draws a history and a probe, judges them far from the wrap, then with every
sequence shifted so that the wrap falls anywhere in or around them, and requires one answer.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.common.errors import ErrorCode
from samsa.services.broker.log.append_info import PlannedBatch
from samsa.services.broker.log.producer_state import (
    BATCHES_KEPT,
    SEQUENCE_MAX,
    AppendRefused,
    DuplicateAppend,
    ProducerStateTable,
)

MODULUS = SEQUENCE_MAX + 1


def planned(sequence: int, base_offset: int, records: int) -> PlannedBatch:
    return PlannedBatch(
        position=0,
        base_offset=base_offset,
        last_offset=base_offset + records - 1,
        max_timestamp=0,
        size_bytes=100,
        partition_leader_epoch=0,
        producer_id=7,
        producer_epoch=0,
        base_sequence=sequence % MODULUS,
        is_transactional=False,
    )


def history(first_sequence: int, sizes: list[int]) -> ProducerStateTable:
    """A table that saw consecutive batches of `sizes` records from `first_sequence` on."""
    table = ProducerStateTable()
    sequence, offset = first_sequence, 0
    for records in sizes:
        table.apply([planned(sequence, offset, records)], 0)
        sequence, offset = sequence + records, offset + records
    return table


def verdict(answer: object) -> object:
    return answer.code if isinstance(answer, AppendRefused) else answer


def test_a_gap_across_the_wrap_is_out_of_order_not_a_duplicate() -> None:
    table = history(SEQUENCE_MAX - 12, [3])  # sequences MAX-12..MAX-10
    # MAX-9..MAX were never written: the batch 0..2 after the wrap is a gap.
    answer = table.check_leader_append([planned(0, 100, 3)])
    assert verdict(answer) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, answer


def test_a_stale_retry_from_before_the_wrap_is_a_duplicate_sequence() -> None:
    # Seven batches of 2 from MAX-9: the last five kept are MAX-5..MAX-4, ..., 2..3.
    table = history(SEQUENCE_MAX - 9, [2] * 7)
    entry = table.entry(7)
    assert entry is not None and entry.batches[-1].last_sequence == 3
    assert table.check_leader_append([planned(SEQUENCE_MAX - 5, 100, 2)]) == DuplicateAppend(4, 5)
    answer = table.check_leader_append([planned(SEQUENCE_MAX - 9, 100, 2)])  # left the window
    assert verdict(answer) == ErrorCode.DUPLICATE_SEQUENCE_NUMBER, answer


def test_without_a_kept_batch_nothing_is_a_duplicate_sequence() -> None:
    table = history(0, [1])
    table.apply([planned(0, 1, 1)._replace(producer_epoch=1, is_control=True)], 0)  # a marker
    answer = table.check_leader_append(
        [planned(SEQUENCE_MAX - 3, 100, 2)._replace(producer_epoch=1)]
    )
    assert verdict(answer) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, answer


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 4), min_size=1, max_size=BATCHES_KEPT + 3),
    probe_from_end=st.integers(-30, 30),
    probe_records=st.integers(1, 4),
    wrap_at=st.integers(-40, 40),
)
def test_the_verdict_does_not_depend_on_where_the_wrap_falls(
    sizes: list[int], probe_from_end: int, probe_records: int, wrap_at: int
) -> None:
    """The history starts at `start`; the probe starts `probe_from_end` after its last sequence
    (0: the next expected one). Judged far from the wrap, then shifted so that the wrap lies
    `wrap_at` sequences after the history's start."""
    total = sum(sizes)

    def judge(start: int) -> object:
        table = history(start, sizes)
        probe = planned(start + total + probe_from_end, total, probe_records)
        return verdict(table.check_leader_append([probe]))

    far = judge(1_000_000)
    near = judge(MODULUS - wrap_at if wrap_at > 0 else -wrap_at)
    assert near == far
