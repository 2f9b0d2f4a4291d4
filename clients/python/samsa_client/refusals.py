"""ACL refusals as the SDK raises them: a server's PERMISSION_DENIED (or UNAUTHENTICATED) answer,
with the trailing metadata `samsa-error-code` and `samsa-resource` (proto/samsa/v1/errors.proto),
turned into an AuthorizationError carrying Kafka's code (TOPIC_, GROUP_, CLUSTER_ or
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and the refused resource.

Every retry loop of the SDK asks `authorization_error` about a failed call beside its check of
REFUSED_AS_SENT (cluster_metadata.py): asked again, or asked of another server, an ACL refusal
is refused again, so it is raised at once instead of waiting out the caller's deadline (as
Kafka's clients raise TopicAuthorizationException and its siblings at once).

A failed SASL login is refused the same way, as an AuthenticationError (an AuthorizationError
with SASL_AUTHENTICATION_FAILED): a server answering UNAUTHENTICATED with `samsa-error-code: 58`
(no ticket, or one expired, revoked or replaced), after which every login of the process drops
its ticket so that the next call authenticates afresh (a refusal names no client: the others pay
one exchange more), and a call whose login failed before it was sent (gRPC answers it
UNAVAILABLE with the login's message, which starts with AUTHENTICATION_FAILED: sasl_login.py).
One answer with that code is not a refusal: a request stream the server ended at its ticket's
expiry (KIP-368) carries `samsa-sasl-session: expired` too (`session_expired`). Then the logins
drop their tickets as well, and the stream's requests fail as after any broken stream (no
AuthorizationError): the caller reopens it, which logs in again, and sends them again.

DescribeTopics is answered per topic instead (Kafka's Metadata): a topic the caller may not
DESCRIBE comes back with TOPIC_AUTHORIZATION_FAILED (`topic_refusals`), and the calls that need
it raise its AuthorizationError (`first_refusal`) while the other topics are used as ever.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

import grpc

from samsa.client import sasl_login
from samsa.client.errors import AUTHENTICATION_FAILED, AuthenticationError, AuthorizationError
from samsa.common.errors import ErrorCode

ERROR_CODE_KEY = "samsa-error-code"
RESOURCE_KEY = "samsa-resource"
# With code 58: the server ended a request stream at its ticket's expiry (errors.proto).
SESSION_KEY = "samsa-sasl-session"
SESSION_EXPIRED = "expired"
Trailing = Iterable[tuple[str, str | bytes]]
# Refused by the cluster's ACLs: every server refuses it the same (`authorization_error`).
REFUSED_BY_ACLS = frozenset({grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED})
# A login that failed before the call was sent: gRPC fails the call with this status.
LOGIN_FAILED_STATUS = grpc.StatusCode.UNAVAILABLE


def authorization_error(error: grpc.RpcError) -> AuthorizationError | None:
    """The AuthorizationError of an ACL refusal (PERMISSION_DENIED or UNAUTHENTICATED), from the
    server's trailing metadata `samsa-error-code` and `samsa-resource` (errors.proto); None for
    any other failure. Every retry loop raises it at once: asked again, it is refused again."""
    code = error.code() if callable(getattr(error, "code", None)) else None
    if code not in REFUSED_BY_ACLS and code != LOGIN_FAILED_STATUS:
        return None
    trailing: Trailing = ()
    with contextlib.suppress(Exception):  # a call that never reached a server has none
        trailing = tuple(error.trailing_metadata() or ())
    return refusal_of(code, error.details() or "", trailing)


def refusal_of(
    code: grpc.StatusCode, details: str, trailing_metadata: Trailing
) -> AuthorizationError | None:
    """`authorization_error` of a status already taken apart (a fetch stream's)."""
    if code == LOGIN_FAILED_STATUS:
        failed = details.find(AUTHENTICATION_FAILED)
        return None if failed < 0 else AuthenticationError(details[failed:])
    if code not in REFUSED_BY_ACLS:
        return None
    trailing = dict(trailing_metadata)
    error_code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with contextlib.suppress(ValueError, TypeError):
        error_code = ErrorCode(int(trailing.get(ERROR_CODE_KEY, error_code)))
    if error_code == ErrorCode.SASL_AUTHENTICATION_FAILED:
        if trailing.get(SESSION_KEY) == SESSION_EXPIRED:
            sasl_login.stream_expired(details)
            return None  # not refused: the stream is reopened, after a new login
        sasl_login.ticket_refused()
        return AuthenticationError(details or f"{AUTHENTICATION_FAILED}: {code.name}")
    resource = trailing.get(RESOURCE_KEY, "")
    if isinstance(resource, bytes):
        resource = resource.decode("utf-8", "replace")
    message = details or code.name
    return AuthorizationError(message, error_code, str(resource))


def session_expired(error: grpc.RpcError) -> bool:
    """Whether the server ended a stream at its SASL ticket's expiry (UNAUTHENTICATED, code 58
    and the marker), not refused it; if so every login has dropped its ticket (`refusal_of`)."""
    code = error.code() if callable(getattr(error, "code", None)) else None
    if code != grpc.StatusCode.UNAUTHENTICATED:
        return False
    trailing: Trailing = ()
    with contextlib.suppress(Exception):
        trailing = tuple(error.trailing_metadata() or ())
    if (SESSION_KEY, SESSION_EXPIRED) not in trailing:
        return False
    return refusal_of(code, error.details() or "", trailing) is None


def topic_refusals(topics: Iterable[Any]) -> dict[str, AuthorizationError]:
    """The AuthorizationError of each DescribeTopics topic answered TOPIC_AUTHORIZATION_FAILED
    (its message names the principal, the operation and the topic), by name."""
    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return {
        topic.name: AuthorizationError(
            topic.error_message or code.name, code, f"topic:{topic.name}"
        )
        for topic in topics
        if topic.error_code == code
    }


def first_refusal(
    refused: Mapping[str, AuthorizationError], topics: Iterable[str]
) -> AuthorizationError | None:
    """The refusal of the first of `topics` that `refused` holds; None when none is."""
    return next((refused[topic] for topic in topics if topic in refused), None)
