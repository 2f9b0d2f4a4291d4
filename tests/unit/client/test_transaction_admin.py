"""Goal: ListTransactions and DescribeTransactions answers become Kafka-named dataclasses: ids
listed by two coordinators (a partition moving) appear once, sorted; state names round-trip
(case-insensitively) and unknown ones are refused; a described error raises TransactionError
with its code.

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
