"""A client's SASL login (security.protocol=SASL_SSL): the session ticket every call of the
client carries as `samsa-sasl-ticket` metadata, earned by a SCRAM exchange or an OAUTHBEARER
token (sasl_exchange.py) and renewed before it expires (sasl_session.py holds the pure state).

Theory of operation. A client object (Producer, Consumer, their asyncio twins, Admin,
PartitionRangeReader) has one `SaslLogin`, shared by its sync and aio channels: their channel
credentials compose the TLS ones with `grpc.metadata_call_credentials(TicketPlugin(login))`, so
gRPC asks the plugin for metadata before each call (not each stream message), on a thread of its
own where it may block, without a change at any call site. The plugin asks the login for a
ticket for the call's endpoint (the host:port of `context.service_url`). Without a usable one
the login runs an exchange with that endpoint, on a channel of its own without the plugin,
under a lock: one exchange at a time per login; the calls that waited reuse its ticket, or fail
with its failure.

A refused exchange (wrong password, unknown user, mechanism not enabled, a server that cannot
prove it holds the credential) fails the call before it is sent: gRPC answers it UNAVAILABLE
with the plugin's message, which starts with AUTHENTICATION_FAILED, and refusals.py turns it
into an AuthenticationError, raised at once like an ACL refusal. An exchange that could not
reach the server fails the call UNAVAILABLE without that prefix: retried as any unreachable
server. A server refusing a ticket (UNAUTHENTICATED, samsa-error-code 58) makes every login of
the process drop its ticket (`ticket_refused`), the refusal naming no client. So does a request
stream the server ended at its ticket's expiry (`stream_expired`, KIP-368), which is no refusal:
the stream's driver reopens it, with a ticket from a new exchange, and sends its requests again.
Drivers also reopen an idle stream whose ticket is due for renewal (`stream_stale`), so that a
stream that finds an idle moment never meets its expiry: gRPC asks the plugin for a ticket as a
call opens, never again for a stream's messages, so an open stream keeps the ticket it had.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from urllib.parse import urlsplit

import grpc

from samsa.client.errors import AUTHENTICATION_FAILED
from samsa.client.sasl_session import LoginState
from samsa.common.tls import SaslSettings

log = logging.getLogger(__name__)

TICKET_KEY = "samsa-sasl-ticket"

# An exchange with an endpoint: (ticket, lifetime in ms), or LoginRefused, or any other
# exception for a server that could not be reached.
Exchange = Callable[[str], tuple[str, int]]

_LOGINS: weakref.WeakSet[SaslLogin] = weakref.WeakSet()
_LOGINS_LOCK = threading.Lock()


class LoginRefused(Exception):
    """The cluster refused the login, or could not prove it knows the user: not retriable."""


class SaslLogin:
    """One client's login: its ticket, renewed through `exchange` when due."""

    def __init__(
        self,
        settings: SaslSettings,
        exchange: Exchange,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._exchange = exchange
        self._clock = clock
        self._lock = threading.Lock()
        self._state = LoginState()
        with _LOGINS_LOCK:
            _LOGINS.add(self)

    def ticket(self, endpoint: str) -> str:
        """A ticket valid now; runs an exchange with `endpoint` when none is (one at a time:
        the callers that waited take its ticket, or its failure). LoginRefused (its message
        starting with AUTHENTICATION_FAILED) when the cluster refused the login."""
        seen = self._state.attempts
        with self._lock:
            if (ticket := self._state.ticket_at(self._now_ms())) is not None:
                return ticket
            if (failure := self._state.failure_since(seen)) is not None:
                raise LoginRefused(failure)
            try:
                ticket, lifetime_ms = self._exchange(endpoint)
            except LoginRefused as refused:
                message = (
                    f"{AUTHENTICATION_FAILED} for {self.settings.who} "
                    f"({self.settings.mechanism}) at {endpoint}: {refused}"
                )
                self._state.failed(message)
                raise LoginRefused(message) from None
            self._state.earned(ticket, lifetime_ms, self._now_ms())
            return ticket

    def stream_generation(self) -> int:
        """The exchange whose ticket a stream opened now carries: the last one, or the next when
        the ticket is due for renewal (the stream's opening runs that exchange). Read without
        the lock, which an exchange holds: an event loop asks it."""
        state = self._state
        return state.attempts + (state.ticket_at(self._now_ms()) is None)

    def stream_stale(self, generation: int) -> bool:
        """Whether a stream opened at `generation` carries a ticket due for renewal, or older
        than the login's: reopened at its next idle point, it carries a fresh one before the
        server ends it at expiry (KIP-368's re-authentication, for a stream). Without the lock,
        as `stream_generation`: a race costs one reopen more or less, never a failure."""
        state = self._state
        attempts = state.attempts
        return attempts > generation or (
            attempts == generation and state.ticket_at(self._now_ms()) is None
        )

    def refused(self) -> None:
        """A server refused the ticket: the next call authenticates afresh."""
        with self._lock:
            self._state.refused()

    @property
    def state(self) -> LoginState:
        """The pure state (for tests and diagnostics)."""
        return self._state

    def _now_ms(self) -> float:
        return self._clock() * 1000.0


def ticket_refused() -> None:
    """A server refused a ticket of this process (refusals.py): every login drops its own."""
    with _LOGINS_LOCK:
        logins = list(_LOGINS)
    for login in logins:
        login.refused()


def stream_expired(details: str) -> None:
    """A server ended a request stream at its ticket's expiry (refusals.py): every login drops
    its ticket, as after a refusal, and the stream is reopened (logged: tests count these)."""
    log.info("a stream's SASL session expired; logging in again to reopen it: %s", details)
    ticket_refused()


def endpoint_of(service_url: str) -> str:
    """The host:port of a call's `service_url` (https://host:port/package.Service)."""
    return urlsplit(service_url).netloc


class TicketPlugin(grpc.AuthMetadataPlugin):
    """Gives each call its login's ticket; a failure fails the call (UNAVAILABLE, the message
    in its details)."""

    def __init__(self, login: SaslLogin) -> None:
        self._login = login

    def __call__(
        self, context: grpc.AuthMetadataContext, callback: grpc.AuthMetadataPluginCallback
    ) -> None:
        try:
            ticket = self._login.ticket(endpoint_of(context.service_url))
        except Exception as error:  # gRPC fails the call with it
            callback(None, error)
            return
        callback(((TICKET_KEY, ticket),), None)
