"""Goal: Admin takes Kafka's default.api.timeout.ms: the deadline of a whole call, retries
included, which may not be shorter than request.timeout.ms (Kafka refuses that config); without
it, a call gives up after request.timeout.ms as before.

Method: Admins whose bootstrap server refuses connections (127.0.0.1:1), so every call retries
until its deadline; the time each call takes to fail is measured.
"""

from __future__ import annotations

import time

import pytest
from admin_call_kinds import each_kind_of_admin_call

from samsa.client.admin import Admin
from samsa.client.errors import KafkaError
from samsa.common.errors import InvalidConfigError

REFUSED = "127.0.0.1:1"


@each_kind_of_admin_call
def test_default_api_timeout_ms_is_the_whole_call_deadline(call) -> None:  # type: ignore[no-untyped-def]
    config = {
        "bootstrap.servers": REFUSED,
        "request.timeout.ms": 500,
        "default.api.timeout.ms": 1_500,
    }
    with Admin(config) as admin:
        started = time.monotonic()
        with pytest.raises(KafkaError, match=r"default\.api\.timeout\.ms|1\.5 s"):
            call(admin)
        took = time.monotonic() - started
    assert 1.4 <= took < 4.0, f"gave up after {took:.2f} s, not default.api.timeout.ms"


def test_without_it_request_timeout_ms_stays_the_deadline() -> None:
    with Admin({"bootstrap.servers": REFUSED, "request.timeout.ms": 500}) as admin:
        started = time.monotonic()
        with pytest.raises(KafkaError):
            admin.list_topics()
        assert time.monotonic() - started < 1.4


@pytest.mark.parametrize("value", [0, -1, "x", True, 1.5])
def test_a_default_api_timeout_ms_that_is_not_a_positive_integer_is_refused(value) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidConfigError, match=r"default\.api\.timeout\.ms"):
        Admin({"bootstrap.servers": REFUSED, "default.api.timeout.ms": value})


def test_a_default_api_timeout_ms_below_request_timeout_ms_is_refused_as_kafka_does() -> None:
    with pytest.raises(InvalidConfigError, match=r"default\.api\.timeout\.ms.*request\.timeout"):
        Admin(
            {
                "bootstrap.servers": REFUSED,
                "request.timeout.ms": 30_000,
                "default.api.timeout.ms": 10_000,
            }
        )


def test_each_attempt_within_default_api_timeout_ms_is_at_most_request_timeout_ms() -> None:
    """Kafka: request.timeout.ms bounds each request, default.api.timeout.ms the whole call; a
    hung server must not hold one attempt for the whole call (or for 10 s)."""
    from fake_controllers import serving_controllers

    from samsa.v1 import controller_pb2_grpc

    deadlines: list[float] = []

    class Hung(controller_pb2_grpc.ControllerServiceServicer):
        def CreateTopics(self, request, context):  # type: ignore[no-untyped-def]
            deadlines.append(context.time_remaining())
            context.abort(__import__("grpc").StatusCode.UNAVAILABLE, "busy")

    with serving_controllers(Hung()) as (endpoint,):
        config = {
            "bootstrap.servers": endpoint,
            "request.timeout.ms": 400,
            "default.api.timeout.ms": 1_000,
        }
        with Admin(config) as admin, pytest.raises(KafkaError):
            admin.create_topic("t", 1, 1)
    assert deadlines and max(deadlines) <= 0.45, deadlines
