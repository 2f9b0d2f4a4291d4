"""Goal: an error code this client does not know (a newer server's) becomes a KafkaError with
UNKNOWN_SERVER_ERROR and the number in its message, as Kafka's clients map unknown codes, not a
ValueError traceback from the ErrorCode enum.

Method: the pure answer readers on answers built by hand with code 999.
"""

from __future__ import annotations

import pytest

from samsa.client.cluster_admin import raise_first
from samsa.client.errors import KafkaError, TopicError
from samsa.client.group_admin import GroupError, lag_of
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c
from samsa.v1 import coordinator_pb2 as g

NEW_CODE = 999


def test_kafka_error_of_an_unknown_code() -> None:
    error = KafkaError.of(NEW_CODE, "a newer refusal")
    assert error.code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert "999" in str(error) and "a newer refusal" in str(error)
    assert GroupError.of(NEW_CODE, "").code == ErrorCode.UNKNOWN_SERVER_ERROR


def test_a_topic_result_with_an_unknown_code() -> None:
    result = c.CreateTopicsResponse.Result(name="t", error_code=NEW_CODE)  # type: ignore[arg-type]
    with pytest.raises(TopicError, match="999") as raised:
        raise_first([result])
    assert raised.value.code == ErrorCode.UNKNOWN_SERVER_ERROR


def test_a_lag_row_with_an_unknown_code() -> None:
    answer = g.DescribeGroupLagResponse()
    answer.partitions.add(topic="t", partition=0, error_code=NEW_CODE)  # type: ignore[arg-type]
    (row,) = lag_of(answer)
    assert row.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
