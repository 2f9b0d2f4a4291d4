"""Goal: Admin refuses arguments it can tell are wrong before it sends anything, with the error
Kafka gives for them: what the wire cannot carry must not reach a server that would read it
otherwise.

Method: Admins whose bootstrap server refuses connections (127.0.0.1:1), so any request sent
would end in NoBrokersAvailable after request.timeout.ms; a refusal must come at once instead.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest
from fake_controllers import serving_controllers

from samsa.client.admin import Admin, NewTopic
from samsa.client.errors import KafkaError, NoBrokersAvailable, TopicError
from samsa.common.errors import ErrorCode, InvalidConfigError
from samsa.v1 import controller_pb2 as c
from samsa.v1 import controller_pb2_grpc

REFUSED = "127.0.0.1:1"


def refused_admin() -> Admin:
    return Admin({"bootstrap.servers": REFUSED, "request.timeout.ms": 3_000})


def test_a_replication_factor_of_zero_is_refused_not_taken_as_the_default() -> None:
    """proto3 cannot tell 0 from unset, and the controller reads both as the cluster default;
    Kafka refuses 0 (INVALID_REPLICATION_FACTOR: larger than 0, or -1 for the default)."""
    with refused_admin() as admin:
        started = time.monotonic()
        with pytest.raises(TopicError, match=r"'orders'.*replication factor 0") as raised:
            admin.create_topics([NewTopic("fine", 1, -1), NewTopic("orders", 3, 0)])
        assert raised.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
        with pytest.raises(TopicError):
            admin.create_topic("orders", 3, replication_factor=0)
        assert time.monotonic() - started < 1.0, "refused before anything was sent"
        with pytest.raises(NoBrokersAvailable):
            admin.create_topic("orders", 3, replication_factor=-1)  # the default: sent


def test_a_config_value_that_is_not_a_string_is_refused_naming_its_key() -> None:
    """Config values are strings on the wire (Kafka's are too); an int reached protobuf, which
    raised "TypeError: bad argument type for built-in operation", naming neither the topic
    nor the key."""
    with refused_admin() as admin:
        started = time.monotonic()
        with pytest.raises(TopicError, match=r"'orders'.*retention\.ms=1000.*'1000'") as raised:
            admin.create_topics([NewTopic("orders", 3, 1, {"retention.ms": 1000})])  # type: ignore[dict-item]
        assert raised.value.code == ErrorCode.INVALID_CONFIG
        with pytest.raises(TopicError, match=r"'orders'.*flush\.messages=True"):
            admin.alter_configs("orders", set={"flush.messages": True})  # type: ignore[dict-item]
        with pytest.raises(TopicError, match=r"'orders'.*None"):
            admin.alter_configs("orders", delete=[None])  # type: ignore[list-item]
        # One name, not a list of them: its letters went as names ("e, n, t is altered twice").
        with pytest.raises(TopicError, match=r"'orders'.*\['retention\.ms'\]"):
            admin.alter_configs("orders", delete="retention.ms")
        assert time.monotonic() - started < 1.0, "refused before anything was sent"


@pytest.mark.parametrize("servers", [" , ", ",", [""], "localhost", "host:0", "host:http", 9092])
def test_bootstrap_servers_without_a_host_port_address_are_refused_as_config(servers) -> None:  # type: ignore[no-untyped-def]
    """As the producer's and consumer's: a list of host:port; not an IndexError at the first
    write, nor 'no attempt was made' after request.timeout.ms."""
    with pytest.raises(InvalidConfigError, match=r"bootstrap\.servers"):
        Admin({"bootstrap.servers": servers})


class RefusesAsTooMany(controller_pb2_grpc.ControllerServiceServicer):
    """Answers every write and read as a server answers a request over its limits."""

    def __init__(self) -> None:
        self.calls = 0

    def _refuse(self, request, context):  # type: ignore[no-untyped-def]
        self.calls += 1
        context.abort(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "1001 topics in one request; send at most 1000 per request",
        )

    CreateTopics = DeleteTopics = DescribeTopics = DescribeConfigs = _refuse


@pytest.fixture
def refusing_server() -> Iterator[tuple[str, RefusesAsTooMany]]:
    servicer = RefusesAsTooMany()
    with serving_controllers(servicer) as (endpoint,):
        yield endpoint, servicer


@pytest.mark.parametrize(
    "call",
    [
        lambda admin: admin.create_topics([NewTopic(f"t{n}", 1, 1) for n in range(1001)]),
        lambda admin: admin.delete_topics([f"t{n}" for n in range(1001)]),
        lambda admin: admin.describe_configs("t"),
    ],
    ids=["write", "forwarded-write", "read"],
)
def test_a_request_over_the_servers_limits_fails_at_once_saying_what_to_change(
    refusing_server, call
) -> None:  # type: ignore[no-untyped-def]
    """RESOURCE_EXHAUSTED is a limit (README: 'with a message saying what to change'): every
    server answers the same request the same, so it is not retried until request.timeout.ms
    and then reported as 'no broker answered' with a retriable code."""
    endpoint, servicer = refusing_server
    with Admin({"bootstrap.servers": endpoint, "request.timeout.ms": 3_000}) as admin:
        started = time.monotonic()
        with pytest.raises(KafkaError, match="send at most 1000") as raised:
            call(admin)
    assert time.monotonic() - started < 1.0
    assert servicer.calls == 1
    assert raised.value.code == ErrorCode.INVALID_REQUEST
    assert not raised.value.retriable


class AnswersAsTheController(controller_pb2_grpc.ControllerServiceServicer):
    """Creates and deletes topics as the controller does within one request: a name already
    created (or deleted) earlier in the same request is refused."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def CreateTopics(self, request, context):  # type: ignore[no-untyped-def]
        return self._answer(c.CreateTopicsResponse(), [t.name for t in request.topics], 36)

    def DeleteTopics(self, request, context):  # type: ignore[no-untyped-def]
        return self._answer(c.DeleteTopicsResponse(), list(request.names), 3)

    def _answer(self, answer, names: list[str], repeated_code: int):  # type: ignore[no-untyped-def]
        self.asked.append(names)
        for n, name in enumerate(names):
            code = repeated_code if name in names[:n] else 0
            answer.topics.add(name=name, error_code=code, error_message=f"{name!r} again")
        return answer


@pytest.fixture
def controller() -> Iterator[tuple[str, AnswersAsTheController]]:
    servicer = AnswersAsTheController()
    with serving_controllers(servicer) as (endpoint,):
        yield endpoint, servicer


def test_a_topic_named_twice_in_one_call_is_asked_for_once(controller) -> None:  # type: ignore[no-untyped-def]
    """Kafka's admin keeps one entry per topic name (the first); sending both made the call
    fail (TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION) for the topic it had just created
    or deleted itself."""
    endpoint, servicer = controller
    with Admin({"bootstrap.servers": endpoint, "request.timeout.ms": 3_000}) as admin:
        admin.create_topics([NewTopic("a", 1, 1), NewTopic("b", 2, 1), NewTopic("a", 5, 1)])
        admin.delete_topics(iter(["a", "a", "b"]))
    assert servicer.asked == [["a", "b"], ["a", "b"]]
