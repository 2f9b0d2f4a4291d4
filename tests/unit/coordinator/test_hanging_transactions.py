"""Goal: AbortTransaction writes an ABORT marker only for a transaction that surely hangs — open
on the partition, at the epoch the operator named, and silent there for at least
transaction.max.timeout.ms — and at an epoch the broker's marker check accepts (above the
producer's); every refusal carries the documented code and says what to do.

Method: `abort_decision` fed hand-built DescribeProducers entries (producer 7 at epoch 3 with a
transaction open at offset 40 whose last write was at LAST_WRITE), with numbers for time;
the marker epoch is checked against the broker's own marker check (producer_state.py).
"""

from __future__ import annotations

import pytest

from samsa.common.errors import ErrorCode
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
    producer_id: int = 7, epoch: int = 3, txn_start: int = 40, last: int = LAST_WRITE
) -> ProducerState:
    return ProducerState(
        producer_id=producer_id,
        producer_epoch=epoch,
        last_sequence=9,
        last_timestamp_ms=last,
        current_txn_start_offset=txn_start,
    )


def decide(
    producers: list[ProducerState], *, epoch: int = 3, now_ms: int = LAST_WRITE + MAX_MS
) -> AbortRefused | AbortMarker:
    return abort_decision(
        WHERE, producers, producer_id=7, producer_epoch=epoch, now_ms=now_ms, max_timeout_ms=MAX_MS
    )


def test_a_transaction_silent_for_the_maximum_timeout_is_aborted_one_epoch_up() -> None:
    others = [producer(producer_id=5, txn_start=-1), producer(producer_id=9)]
    assert decide([*others, producer()]) == AbortMarker(7, 4, 40)


def test_the_marker_epoch_is_one_the_broker_writes_and_then_treats_a_retry_as_written() -> None:
    marker = decide([producer()])
    assert isinstance(marker, AbortMarker)
    open_at_3 = ProducerEntry(7, 3, (), LAST_WRITE, current_txn_first_offset=40)
    table = ProducerStateTable.from_entries([open_at_3])
    assert table.check_marker(7, marker.marker_epoch) is None
    assert isinstance(table.check_marker(7, 3), AppendRefused), "the producer's own epoch: late"
    aborted = ProducerEntry(7, marker.marker_epoch, (), LAST_WRITE, NO_OFFSET)
    after = ProducerStateTable.from_entries([aborted])
    assert isinstance(after.check_marker(7, marker.marker_epoch), MarkerWrittenBefore)


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


@pytest.mark.parametrize("silent_ms", [0, 1, MAX_MS - 1, -5_000])
def test_a_recent_write_is_concurrent_transactions_with_the_wait_left(silent_ms: int) -> None:
    refused = decide([producer()], now_ms=LAST_WRITE + silent_ms)
    assert isinstance(refused, AbortRefused)
    assert refused.code == ErrorCode.CONCURRENT_TRANSACTIONS
    assert f"retry in {MAX_MS - silent_ms} ms" in refused.message


def test_a_future_timestamp_is_called_so() -> None:
    refused = decide([producer()], now_ms=LAST_WRITE - 5_000)
    assert isinstance(refused, AbortRefused)
    assert "5000 ms in the future" in refused.message


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
