"""The state of a client's SASL login, pure: which session ticket to send, when to earn a new
one, and which failure to give the calls that waited on a failed exchange (sasl_login.py holds
the lock, the clock and the exchange around it).

Theory of operation. One SCRAM exchange earns a ticket valid for `session_lifetime_ms` (the
server's sasl.session.lifetime.ms). The client re-authenticates once 80% of that lifetime has
passed (KIP-368's re-authentication window: early enough that a call in flight at expiry is
rare, late enough that exchanges are rare), so `ticket_at` answers None from then on. A server
refusing the ticket (expired, its credential replaced or deleted) drops it: the next call runs
a new exchange. A failed exchange is remembered with a number (`attempts`): a call that was
already waiting when it failed takes that failure instead of running one more exchange that
would fail the same.
"""

from __future__ import annotations

from dataclasses import dataclass

# The part of a ticket's lifetime after which the client earns a new one (KIP-368: the client
# re-authenticates between 85% and 95% of the session lifetime; 80% leaves a slow exchange
# room to finish before expiry).
REAUTHENTICATE_AT = 0.8


@dataclass(frozen=True)
class Session:
    """A ticket, and when (on the client's monotonic clock) it is due for renewal."""

    ticket: str
    renew_at_ms: float


@dataclass
class LoginState:
    """What a login knows between calls: its session (None: none yet, or dropped), how many
    exchanges it ran, and the failure of the last one (None: it succeeded)."""

    session: Session | None = None
    attempts: int = 0
    failure: str | None = None

    def ticket_at(self, now_ms: float) -> str | None:
        """The ticket to send at `now_ms`; None when an exchange is due first."""
        if self.session is None or now_ms >= self.session.renew_at_ms:
            return None
        return self.session.ticket

    def failure_since(self, attempts_seen: int) -> str | None:
        """The failure of an exchange that ended after a caller saw `attempts_seen` (it waited
        on it): that caller fails with it rather than running another."""
        return self.failure if self.attempts > attempts_seen else None

    def earned(self, ticket: str, lifetime_ms: int, now_ms: float) -> None:
        """An exchange succeeded at `now_ms`, with a ticket valid for `lifetime_ms`."""
        self.attempts += 1
        self.failure = None
        self.session = Session(ticket, now_ms + max(lifetime_ms, 0) * REAUTHENTICATE_AT)

    def failed(self, message: str) -> None:
        """An exchange was refused (a wrong password, a server that could not prove the
        credential): remembered for the calls that waited on it; the old ticket is dropped."""
        self.attempts += 1
        self.failure = message
        self.session = None

    def refused(self, ticket: str | None = None) -> None:
        """A server refused the session ticket (`ticket`, or whichever is held): drop it, so
        that the next call authenticates afresh."""
        if self.session is not None and ticket in (None, self.session.ticket):
            self.session = None
