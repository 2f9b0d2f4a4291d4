"""Goal: the SDK acts on the brokers' per-partition TOPIC_AUTHORIZATION_FAILED (Produce and Fetch
answer a refused topic per partition, the rest of the request served): a fetch answer's refused
partition makes the next poll() raise the AuthorizationError naming its topic (Kafka's
TopicAuthorizationException) while the answer's other partition is buffered and taken by the
poll after; a produce answer's refused partition fails its records' futures with the error that
is both AuthorizationError (naming the topic) and ProduceError, not retried, and so are the
futures of records whose producer id was refused (CLUSTER_AUTHORIZATION_FAILED, naming the
cluster, as Kafka's ClusterAuthorizationException); a group Admin asked
about answered GROUP_AUTHORIZATION_FAILED raises the AuthorizationError naming it.

Method: the pure FetchState fed a hand-made answer (as test_client_fetch_refused.py), and
BatchOutcomes settled with a hand-made Completed, as the produce sender settles a partition's
non-retriable answer.
"""

from __future__ import annotations

import pytest

from samsa.client.config import ConsumerConfig
from samsa.client.errors import AuthorizationError, ProduceError
from samsa.client.fetch_state import FetchState
from samsa.client.group_admin_calls import _raise_every_failure
from samsa.client.producer_batch import NO_OFFSET, Completed
from samsa.client.record_future import BatchOutcome, BatchOutcomes
from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.v1 import broker_pb2
from samsa.v1 import coordinator_pb2 as g

MESSAGE = "User:CN=alice may not READ topic b (no ALLOW ACL, or a DENY one; ...)"


def answer() -> broker_pb2.FetchResponse:
    a = broker_pb2.FetchResponse.PartitionResponse(
        partition=0, high_watermark=1, records=build_batch([b"v"])
    )
    b = broker_pb2.FetchResponse.PartitionResponse(
        partition=0, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=MESSAGE
    )
    return broker_pb2.FetchResponse(
        topics=[
            broker_pb2.FetchResponse.TopicResponse(name="a", partitions=[a]),
            broker_pb2.FetchResponse.TopicResponse(name="b", partitions=[b]),
        ]
    )


def test_a_refused_partition_raises_its_topic_and_the_other_is_still_read() -> None:
    state = FetchState(ConsumerConfig.from_dict({"bootstrap.servers": "localhost:9092"}))
    state.assign([("a", 0), ("b", 0)])
    state.seek(("a", 0), 0)
    state.seek(("b", 0), 0)
    state.fetches_to_send({("a", 0): 1, ("b", 0): 1}, 1_000)
    state.on_fetch_answer(1, answer())
    error = state.pop_error()
    assert isinstance(error, AuthorizationError)
    assert error.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert error.topic == "b" and str(error) == MESSAGE
    assert state.pop_error() is None  # raised once
    assert [(r.topic, r.offset, r.value) for r in state.take(10)] == [("a", 0, b"v")]


@pytest.mark.parametrize("message", ["User:CN=alice may not WRITE topic b (...)", ""])
def test_a_refused_partitions_futures_fail_with_the_authorization_error(message: str) -> None:
    outcomes = BatchOutcomes()
    outcome = outcomes.by_batch_id[7] = BatchOutcome()
    if message:
        outcomes.note_message(7, message)
    completed = Completed(
        7, "b", 0, 1, NO_OFFSET, -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "after 1 attempt"
    )
    outcomes.settle([completed])
    error = outcome.error_of(0)
    assert isinstance(error, AuthorizationError) and isinstance(error, ProduceError)
    assert error.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED and error.topic == "b"
    assert str(error) == (message or "after 1 attempt")


def test_a_refused_producer_id_fails_the_futures_with_the_cluster_authorization_error() -> None:
    # InitProducerId refused by the ACLs: the driver fails every queued batch with its code.
    outcomes = BatchOutcomes()
    outcome = outcomes.by_batch_id[3] = BatchOutcome()
    message = "InitProducerId: User:bob may not IDEMPOTENT_WRITE the cluster (...)"
    completed = Completed(
        3, "a", 0, 1, NO_OFFSET, -1, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, message
    )
    outcomes.settle([completed])
    error = outcome.error_of(0)
    assert isinstance(error, AuthorizationError) and isinstance(error, ProduceError)
    assert error.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert error.resource == "cluster:kafka-cluster" and error.topic is None
    assert str(error) == message


def test_a_group_answered_group_authorization_failed_raises_authorization_error() -> None:
    refused = g.DescribedGroup(
        group_id="theirs",
        error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
        error_message="User:CN=alice may not DESCRIBE group theirs (...)",
    )
    answers = {"mine": g.DescribedGroup(group_id="mine"), "theirs": refused}
    with pytest.raises(AuthorizationError) as raised:
        _raise_every_failure(answers)
    assert raised.value.resource == "group:theirs" and set(raised.value.errors) == {"theirs"}
    assert raised.value.code == ErrorCode.GROUP_AUTHORIZATION_FAILED
