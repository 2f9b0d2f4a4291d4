"""Goal: a client's SASL login holds the right state: it reuses its ticket until 80% of its
lifetime has passed (KIP-368's re-authentication window) and then earns a new one, runs one
exchange at a time (the callers that waited reuse its ticket, or take its failure), remembers a
refusal with a message the SDK recognises, drops its ticket when a server refuses it, and does
not remember a transport failure (that call is retried as any unreachable server's). The SDK
reads a refused login, and a refused ticket, as an AuthenticationError: not retriable.

Method: the pure LoginState driven with numbers; SaslLogin with a fake exchange function and a
fake clock (threads where the lock is the point, released by events, never by sleeps); the
ticket plugin with a fake context and callback; refusals.refusal_of on statuses taken apart.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest

from samsa.client.errors import (
    AUTHENTICATION_FAILED,
    AuthenticationError,
    AuthorizationError,
    ProduceError,
    record_refusal,
)
from samsa.client.refusals import refusal_of
from samsa.client.sasl_login import (
    TICKET_KEY,
    LoginRefused,
    SaslLogin,
    TicketPlugin,
    endpoint_of,
    ticket_refused,
)
from samsa.client.sasl_session import LoginState
from samsa.common.errors import ErrorCode
from samsa.common.tls import SaslSettings

SETTINGS = SaslSettings("SCRAM-SHA-256", "alice", "secret")
LIFETIME_MS = 10_000


def test_the_state_renews_at_80_percent_of_the_lifetime() -> None:
    state = LoginState()
    assert state.ticket_at(0) is None
    state.earned("t1", LIFETIME_MS, now_ms=1_000)
    assert state.ticket_at(1_000) == "t1"
    assert state.ticket_at(8_999) == "t1"
    assert state.ticket_at(9_000) is None  # 1 000 + 80% of 10 000


def test_the_state_remembers_a_failure_for_the_callers_that_waited_on_it() -> None:
    state = LoginState()
    state.earned("t1", LIFETIME_MS, 0)
    seen = state.attempts
    state.failed("refused")
    assert state.ticket_at(1) is None  # the old ticket went with the failure
    assert state.failure_since(seen) == "refused"
    assert state.failure_since(state.attempts) is None  # a caller that came after it tries again
    state.earned("t2", LIFETIME_MS, 2)
    assert state.failure_since(seen) is None


def test_the_state_drops_only_the_refused_ticket() -> None:
    state = LoginState()
    state.earned("t2", LIFETIME_MS, 0)
    state.refused("t1")  # an older one: t2 stays
    assert state.ticket_at(1) == "t2"
    state.refused()
    assert state.ticket_at(1) is None


@dataclass
class FakeExchange:
    """Answers ticket-1, ticket-2, ...; or raises `failure`; optionally waits for `release`."""

    failure: Exception | None = None
    release: threading.Event | None = None
    started: threading.Event = field(default_factory=threading.Event)
    endpoints: list[str] = field(default_factory=list)

    def __call__(self, endpoint: str) -> tuple[str, int]:
        self.endpoints.append(endpoint)
        self.started.set()
        if self.release is not None:
            assert self.release.wait(10)
        if self.failure is not None:
            raise self.failure
        return f"ticket-{len(self.endpoints)}", LIFETIME_MS


class Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def test_a_login_reuses_its_ticket_and_renews_it_at_80_percent() -> None:
    exchange, clock = FakeExchange(), Clock()
    login = SaslLogin(SETTINGS, exchange, clock)
    assert [login.ticket("b1:9092") for _ in range(5)] == ["ticket-1"] * 5
    clock.now_s += 7.999
    assert login.ticket("b2:9092") == "ticket-1"
    clock.now_s += 0.001  # 80% of 10 s
    assert login.ticket("b2:9092") == "ticket-2"
    assert exchange.endpoints == ["b1:9092", "b2:9092"]  # with the endpoint of the call


class CountingLock:
    """The login's lock, counting the callers that reached it: the test releases the exchange
    once every caller is waiting on it (no sleep)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.arrived = threading.Condition()
        self.count = 0

    def __enter__(self) -> None:
        with self.arrived:
            self.count += 1
            self.arrived.notify_all()
        self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def run_waiting(login: SaslLogin, exchange: FakeExchange, callers: int) -> list[Any]:
    """`callers` threads asking for a ticket while the first exchange is held, released once all
    of them wait on the login's lock; their results (a ticket or the exception raised)."""
    lock = CountingLock()
    login._lock = lock  # type: ignore[assignment]

    def ask() -> Any:
        try:
            return login.ticket("b1:9092")
        except Exception as error:  # the outcome is the point
            return error

    assert exchange.release is not None
    with ThreadPoolExecutor(callers) as pool:
        first = pool.submit(ask)
        assert exchange.started.wait(10)
        others = [pool.submit(ask) for _ in range(callers - 1)]
        with lock.arrived:
            assert lock.arrived.wait_for(lambda: lock.count == callers, 10)
        exchange.release.set()
        return [first.result(10), *(other.result(10) for other in others)]


def test_one_exchange_at_a_time_the_others_wait_and_reuse_its_ticket() -> None:
    exchange = FakeExchange(release=threading.Event())
    login = SaslLogin(SETTINGS, exchange)
    assert run_waiting(login, exchange, 6) == ["ticket-1"] * 6
    assert len(exchange.endpoints) == 1


def test_a_refusal_is_remembered_and_surfaced_to_the_callers_that_waited() -> None:
    exchange = FakeExchange(failure=LoginRefused("invalid credentials"), release=threading.Event())
    login = SaslLogin(SETTINGS, exchange)
    results = run_waiting(login, exchange, 4)
    assert all(isinstance(result, LoginRefused) for result in results)
    message = str(results[0])
    assert message.startswith(AUTHENTICATION_FAILED)
    assert "'alice' (SCRAM-SHA-256) at b1:9092: invalid credentials" in message
    assert {str(result) for result in results} == {message}
    assert len(exchange.endpoints) == 1
    assert login.state.failure == message
    with pytest.raises(LoginRefused):  # a later call tries again (the password may be set now)
        login.ticket("b1:9092")
    assert len(exchange.endpoints) == 2


def test_a_transport_failure_is_not_a_refusal() -> None:
    exchange = FakeExchange(failure=ConnectionError("unreachable"))
    login = SaslLogin(SETTINGS, exchange)
    with pytest.raises(ConnectionError):
        login.ticket("b1:9092")
    assert login.state.failure is None
    exchange.failure = None
    assert login.ticket("b1:9092") == "ticket-2"


def test_a_refused_ticket_is_dropped_by_every_login_of_the_process() -> None:
    first, second = FakeExchange(), FakeExchange()
    logins = [SaslLogin(SETTINGS, first), SaslLogin(SETTINGS, second)]
    assert [login.ticket("b:1") for login in logins] == ["ticket-1", "ticket-1"]
    ticket_refused()
    assert [login.ticket("b:1") for login in logins] == ["ticket-2", "ticket-2"]


@dataclass
class Context:
    service_url: str
    method_name: str = "Fetch"


def plugin_answer(login: SaslLogin, url: str) -> tuple[Any, Exception | None]:
    answers: list[tuple[Any, Exception | None]] = []
    TicketPlugin(login)(Context(url), lambda metadata, error: answers.append((metadata, error)))  # type: ignore[arg-type]
    (answer,) = answers
    return answer


def test_the_plugin_gives_the_ticket_for_the_calls_endpoint_or_its_failure() -> None:
    exchange = FakeExchange()
    login = SaslLogin(SETTINGS, exchange)
    metadata, error = plugin_answer(login, "https://[::1]:9092/samsa.v1.BrokerService")
    assert (metadata, error) == (((TICKET_KEY, "ticket-1"),), None)
    assert exchange.endpoints == ["[::1]:9092"]
    assert endpoint_of("https://broker-1:9093/samsa.v1.SaslService") == "broker-1:9093"
    refused = SaslLogin(SETTINGS, FakeExchange(failure=LoginRefused("invalid credentials")))
    metadata, error = plugin_answer(refused, "https://b:1/samsa.v1.BrokerService")
    assert metadata is None and isinstance(error, LoginRefused)


def test_the_sdk_reads_a_failed_login_as_an_authentication_error() -> None:
    details = (
        "Getting metadata from plugin failed with error: "
        f"{AUTHENTICATION_FAILED} for user 'alice' (SCRAM-SHA-256) at b:1: invalid credentials"
    )
    error = refusal_of(grpc.StatusCode.UNAVAILABLE, details, ())
    assert isinstance(error, AuthenticationError) and not error.retriable
    assert str(error).startswith(AUTHENTICATION_FAILED)
    assert error.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert refusal_of(grpc.StatusCode.UNAVAILABLE, "connection refused", ()) is None


def test_a_refused_ticket_is_an_authentication_error_and_drops_the_ticket() -> None:
    login = SaslLogin(SETTINGS, FakeExchange())
    login.ticket("b:1")
    trailing = (("samsa-error-code", "58"),)
    error = refusal_of(grpc.StatusCode.UNAUTHENTICATED, "ticket expired", trailing)
    assert isinstance(error, AuthenticationError) and str(error) == "ticket expired"
    assert login.state.session is None
    acl = refusal_of(grpc.StatusCode.UNAUTHENTICATED, "no principal", ())
    assert type(acl) is AuthorizationError  # an ACL refusal stays one
    assert acl.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_a_records_future_fails_with_an_authentication_error_that_is_a_produce_error() -> None:
    error = record_refusal(AuthenticationError("SASL authentication failed: x"))
    assert isinstance(error, AuthenticationError) and isinstance(error, ProduceError)
    acl = record_refusal(
        AuthorizationError("denied", ErrorCode.TOPIC_AUTHORIZATION_FAILED, "topic:t")
    )
    assert not isinstance(acl, AuthenticationError) and acl.topic == "t"
