"""Goal: ListTransactions and DescribeTransactions answers become Kafka-named dataclasses: ids
listed by two coordinators (a partition moving) appear once, sorted; state names round-trip
(case-insensitively) and unknown ones are refused; a described error raises TransactionError
with its code. find-hanging's rules: only open transactions silent for the longest timeout are
candidates, and a candidate hangs unless its producer's transactional id is ending a transaction
that holds its partition.

Method: protobuf answers built by hand, no gRPC.
"""

from __future__ import annotations

import pytest

from samsa.client import transaction_admin as ta
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import transaction_records_pb2 as t
from samsa.v1 import transactions_pb2 as x


def test_listings_merge_and_sort() -> None:
    first = x.ListTransactionsResponse(
        transactions=[
            x.ListedTransaction(
                transactional_id="b", producer_id=2, state=t.TRANSACTION_STATE_ONGOING
            ),
            x.ListedTransaction(
                transactional_id="a", producer_id=1, state=t.TRANSACTION_STATE_EMPTY
            ),
        ]
    )
    second = x.ListTransactionsResponse(
        transactions=[
            x.ListedTransaction(
                transactional_id="b", producer_id=9, state=t.TRANSACTION_STATE_EMPTY
            )
        ]
    )
    assert ta.listings_of([first, second]) == [
        ta.TransactionListing("a", 1, "Empty"),
        ta.TransactionListing("b", 2, "Ongoing"),
    ]


def test_state_names_round_trip() -> None:
    for state, name in ta.STATE_NAMES.items():
        assert ta.state_of(name.upper()) == state
        assert ta.state_name(state) == name
    with pytest.raises(ValueError, match="unknown state 'open'"):
        ta.state_of("open")


def test_descriptions_and_their_errors() -> None:
    described = x.DescribedTransaction(
        transactional_id="a",
        state=t.TRANSACTION_STATE_PREPARE_COMMIT,
        producer_id=4,
        producer_epoch=3,
        transaction_timeout_ms=1000,
        transaction_start_ms=55,
        partitions=[c.TopicPartitions(topic="out", partitions=[0, 2])],
    )
    assert ta.description_of(described) == ta.TransactionDescription(
        "a", "PrepareCommit", 4, 3, 1000, 55, (("out", 0), ("out", 2))
    )
    missing = x.DescribedTransaction(
        transactional_id="z",
        error_code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,  # type: ignore[arg-type]
        error_message="unknown here",
    )
    with pytest.raises(ta.TransactionError, match="unknown here") as raised:
        ta.description_of(missing)
    assert raised.value.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def producer(
    pid: int, start: int, age_ms: int, epoch: int = 0, timestamp_ms: int = 0
) -> ta.ProducerState:
    return ta.ProducerState(pid, epoch, 4, timestamp_ms, start, age_ms)


def test_candidates_are_open_and_silent_for_the_longest_timeout() -> None:
    producers = {
        ("out", 1): [producer(7, 40, 9_000), producer(8, -1, 10_000)],  # 8: nothing open
        ("out", 0): [producer(9, 12, 4_999, epoch=3), producer(7, 3, 5_000)],
    }
    found = ta.silent_open_transactions(producers, max_transaction_timeout_ms=5_000)
    assert found == [
        ta.OpenTransaction("out", 0, 7, 0, 3, 5_000),  # silent exactly 5 s: a candidate
        ta.OpenTransaction("out", 1, 7, 0, 40, 9_000),
    ]  # 9 wrote 4.999 s ago: its coordinator may still end it
    assert ta.silent_open_transactions(producers, 9_001) == []


def test_silence_is_the_leaders_age_of_the_last_append_not_the_record_timestamps() -> None:
    """A live producer stamping an hour-old CreateTime is not silent; a broker that predates
    the age (0) makes no candidate."""
    hour_old = producer(7, 3, age_ms=10, timestamp_ms=1)
    assert ta.silent_open_transactions({("out", 0): [hour_old]}, 5_000) == []
    assert ta.silent_open_transactions({("out", 0): [producer(7, 3, age_ms=0)]}, 1) == []


def described(state: str, pid: int = 7, partitions=(("out", 0),)) -> ta.TransactionDescription:
    return ta.TransactionDescription("app", state, pid, 1, 60_000, 0, tuple(partitions))


@pytest.mark.parametrize(
    ("description", "hanging"),
    [
        (None, True),  # no transactional id of producer 7 is known
        (described("Ongoing"), False),
        (described("PrepareCommit"), False),  # its markers are being written
        (described("PrepareAbort"), False),
        (described("Ongoing", partitions=[("out", 1)]), True),  # not this partition's
        (described("Ongoing", pid=8), True),  # the id has another producer now
        (described("CompleteCommit"), True),  # ended, but out-0 never got its marker
        (described("Empty"), True),
        (described("CompleteAbort"), True),
        (described("PrepareEpochFence"), False),  # it aborts next: PrepareAbort, markers
        (described("PrepareEpochFence", partitions=[("out", 1)]), True),
        (described("Dead"), True),
    ],
)
def test_a_candidate_hangs_unless_its_coordinator_is_ending_it_there(
    description: ta.TransactionDescription | None, hanging: bool
) -> None:
    candidate = ta.OpenTransaction("out", 0, 7, 1, 3, 0)
    assert ta.is_hanging(candidate, description) is hanging
