"""Goal: AbortTransaction writes an ABORT marker only for a transaction that surely hangs — open
on the partition, at the epoch the operator named, and silent there for at least
transaction.max.timeout.ms — and at an epoch the broker's marker check accepts (above the
producer's); every refusal carries the documented code and says what to do.

Method: `abort_decision` fed hand-built DescribeProducers entries (producer 7 at epoch 3 with a
transaction open at offset 40, whose leader last appended for it `age` ms ago by its own clock,
and whose records carry LAST_WRITE); the marker epoch is checked against the broker's own marker
check (producer_state.py).
"""

from __future__ import annotations

import pytest

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import CONTROL_TYPE_ABORT as ABORT
from samsa.common.record.codec import CONTROL_TYPE_COMMIT as COMMIT
from samsa.services.broker.log.producer_state import (
    NO_OFFSET,
    AppendRefused,
    MarkerWrittenBefore,
    ProducerEntry,
    ProducerStateTable,
)
from samsa.services.coordinator.hanging_transactions import (
    AbortMarker,
    AbortRefused,
    ProducerState,
    abort_decision,
    request_problem,
)
from samsa.services.coordinator.transaction_model import PRODUCER_EPOCH_MAX

MAX_MS = 900_000
LAST_WRITE = 1_000_000
WHERE = "payments-1"


def producer(
    producer_id: int = 7,
    epoch: int = 3,
    txn_start: int = 40,
    last: int = LAST_WRITE,
    age: int = MAX_MS,
) -> ProducerState:
    return ProducerState(
        producer_id=producer_id,
        producer_epoch=epoch,
        last_sequence=9,
        last_timestamp_ms=last,
        current_txn_start_offset=txn_start,
        last_append_age_ms=age,
    )


def decide(producers: list[ProducerState], *, epoch: int = 3) -> AbortRefused | AbortMarker:
    return abort_decision(
        WHERE, producers, producer_id=7, producer_epoch=epoch, max_timeout_ms=MAX_MS
    )


def test_a_transaction_silent_for_the_maximum_timeout_is_aborted_one_epoch_up() -> None:
    others = [producer(producer_id=5, txn_start=-1), producer(producer_id=9)]
    assert decide([*others, producer()]) == AbortMarker(7, 4, 40)


def test_the_marker_epoch_is_one_the_broker_writes_and_then_treats_a_retry_as_written() -> None:
    marker = decide([producer()])
    assert isinstance(marker, AbortMarker)
    open_at_3 = ProducerEntry(7, 3, (), LAST_WRITE, current_txn_first_offset=40)
    table = ProducerStateTable.from_entries([open_at_3])
    assert table.check_marker(7, marker.marker_epoch, ABORT) is None
    late = table.check_marker(7, 3, ABORT)
    assert isinstance(late, AppendRefused), "the producer's own epoch: late"
    aborted = ProducerEntry(7, marker.marker_epoch, (), LAST_WRITE, NO_OFFSET, 0, ABORT)
    after = ProducerStateTable.from_entries([aborted])
    assert isinstance(after.check_marker(7, marker.marker_epoch, ABORT), MarkerWrittenBefore)
    # Its coordinator's COMMIT at that epoch (it did not know): refused, not taken as written.
    conflict = after.check_marker(7, marker.marker_epoch, COMMIT)
    assert isinstance(conflict, AppendRefused) and conflict.code == ErrorCode.INVALID_PRODUCER_EPOCH


@pytest.mark.parametrize(
    ("producers", "said"),
    [
        ([], "does not know the producer"),
        ([producer(producer_id=8)], "does not know the producer"),
        ([producer(txn_start=-1)], "shows no open transaction"),
    ],
)
def test_no_open_transaction_is_invalid_txn_state(producers: list[ProducerState], said: str):
    refused = decide(producers)
    assert isinstance(refused, AbortRefused)
    assert refused.code == ErrorCode.INVALID_TXN_STATE
    assert said in refused.message and WHERE in refused.message


@pytest.mark.parametrize("epoch", [2, 4])
def test_another_epoch_is_invalid_txn_state_naming_the_one_shown(epoch: int) -> None:
    refused = decide([producer()], epoch=epoch)
    assert isinstance(refused, AbortRefused)
    assert refused.code == ErrorCode.INVALID_TXN_STATE
    assert f"at epoch 3, not {epoch}" in refused.message


@pytest.mark.parametrize("silent_ms", [0, 1, MAX_MS - 1])
def test_a_recent_write_is_concurrent_transactions_with_the_wait_left(silent_ms: int) -> None:
    refused = decide([producer(age=silent_ms)])
    assert isinstance(refused, AbortRefused)
    assert refused.code == ErrorCode.CONCURRENT_TRANSACTIONS
    assert f"retry in {MAX_MS - silent_ms} ms" in refused.message


@pytest.mark.parametrize("record_timestamp", [0, LAST_WRITE - 10 * MAX_MS, -1])
def test_the_age_is_the_leaders_not_the_record_timestamps(record_timestamp: int) -> None:
    # A live transaction stamping old times (CreateTime) looked silent for ages when the guard
    # read last_timestamp_ms: its ABORT marker landed, and its coordinator's COMMIT after it.
    refused = decide([producer(last=record_timestamp, age=1_000)])
    assert isinstance(refused, AbortRefused)
    assert refused.code == ErrorCode.CONCURRENT_TRANSACTIONS
    assert "1000 ms ago by its leader's clock" in refused.message
    assert decide([producer(last=LAST_WRITE + 10 * MAX_MS, age=MAX_MS)]) == AbortMarker(7, 4, 40)


def test_an_answer_without_the_age_is_refused() -> None:
    # A leader that predates last_append_age_ms leaves it 0: the abort waits, never slips through.
    state = producer()
    state.ClearField("last_append_age_ms")
    refused = decide([state])
    assert isinstance(refused, AbortRefused)
    assert refused.code == ErrorCode.CONCURRENT_TRANSACTIONS


def test_an_exhausted_epoch_cannot_take_a_marker() -> None:
    refused = decide([producer(epoch=PRODUCER_EPOCH_MAX)], epoch=PRODUCER_EPOCH_MAX)
    assert isinstance(refused, AbortRefused)
    assert refused.code == ErrorCode.INVALID_TXN_STATE
    assert "there is none" in refused.message


@pytest.mark.parametrize(
    ("request_fields", "said"),
    [
        (("", 0, 7, 3), "topic"),
        (("t", -1, 7, 3), "partition"),
        (("t", 0, -1, 3), "producer_id"),
        (("t", 0, 7, -1), "producer_epoch"),
        (("t", 0, 7, PRODUCER_EPOCH_MAX + 1), "producer_epoch"),
    ],
)
def test_malformed_requests_name_the_field(request_fields: tuple, said: str) -> None:
    problem = request_problem(*request_fields)
    assert problem is not None and said in problem


def test_a_well_formed_request_has_no_problem() -> None:
    assert request_problem("t", 0, 0, 0) is None
    assert request_problem("t", 3, 7, PRODUCER_EPOCH_MAX) is None
