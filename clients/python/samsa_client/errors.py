"""The SDK exceptions: each carries a Kafka error code, whether a retry may help, and a message."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from types import MappingProxyType

from samsa.common.errors import ErrorCode, SamsaError, is_retriable

__all__ = [
    "AUTHENTICATION_FAILED",
    "AUTHORIZATION_CODES",
    "AuthenticationError",
    "AuthorizationError",
    "ConcurrentAccessError",
    "KafkaError",
    "NoBrokersAvailable",
    "ProduceError",
    "TopicError",
    "code_of",
    "coded_message",
    "first_of",
]


def code_of(code: int) -> ErrorCode:
    """The ErrorCode of an answer's code; UNKNOWN_SERVER_ERROR for one this client does not know
    (a newer server's), as Kafka's clients read an unknown code, instead of a ValueError."""
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def coded_message(code: int, message: str) -> tuple[ErrorCode, str]:
    """`code_of(code)`, and `message` with the number in front when the code is unknown (a newer
    server's), so that it is not lost."""
    error_code = code_of(code)
    if error_code != code:
        message = f"error code {code}{': ' if message else ''}{message}"
    return error_code, message


class KafkaError(SamsaError):
    """A request failed with a Kafka error code.

    `errors`: when one call acted on many items (topics, groups, partitions, transactional ids),
    every item that failed, by item in the order asked; the error raised is the first of them,
    and each item not in `errors` succeeded (Kafka's admin answers a future per item)."""

    errors: Mapping[Hashable, KafkaError] = MappingProxyType({})

    @classmethod
    def of(cls, code: int, message: str) -> KafkaError:
        error_code, message = coded_message(code, message)
        return cls(message or error_code.name, error_code)

    @property
    def retriable(self) -> bool:
        return is_retriable(self.code)


class ProduceError(KafkaError):
    """A record could not be delivered (after retries, or for a non-retriable reason)."""


class TopicError(KafkaError):
    """An admin operation on a topic failed (exists, unknown, invalid config, …)."""


# The cluster as an ACL resource, as a refusal names it (errors.proto's samsa-resource).
CLUSTER_RESOURCE = "cluster:kafka-cluster"

# The codes of an ACL refusal, by the kind of resource refused (errors.proto).
AUTHORIZATION_CODES = frozenset(
    {
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
)


class AuthorizationError(KafkaError):
    """The cluster's ACLs refused this client's principal (Kafka's TopicAuthorizationException,
    GroupAuthorizationException, ClusterAuthorizationException,
    TransactionalIdAuthorizationException): `code` says which kind of resource, `resource`
    which one (`topic:orders`; "" when the server did not say). Not retriable: raised at once."""

    def __init__(self, message: str, code: ErrorCode, resource: str = "") -> None:
        super().__init__(message, code)
        self.resource = resource

    @property
    def topic(self) -> str | None:
        """The refused topic (`topic:orders`); None when it refused something else."""
        kind, _, name = self.resource.partition(":")
        if kind != "topic" or self.code != ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            return None
        return name


class RecordAuthorizationError(AuthorizationError, ProduceError):
    """A record refused before it was queued, its topic's metadata refused by the ACLs: both the
    AuthorizationError naming the topic and the ProduceError a record's future fails with."""


# How a failed SASL login's message starts, in the client's words: the gRPC call that needed its
# ticket fails UNAVAILABLE with it in its details (sasl_login.py), which refusals.py recognises.
AUTHENTICATION_FAILED = "SASL authentication failed"


class AuthenticationError(AuthorizationError):
    """The cluster did not accept this client's SASL login (Kafka's SaslAuthenticationException,
    SASL_AUTHENTICATION_FAILED): a wrong user name or password, a mechanism the cluster does not
    enable, a server that could not prove it holds the credential, or a session ticket refused
    (expired, its credential replaced or deleted). Not retriable: raised at once. An
    AuthorizationError too, so that every path that raises an ACL refusal at once (instead of
    retrying until a timeout) raises it the same way; `resource` is ""."""

    def __init__(
        self, message: str, code: ErrorCode = ErrorCode.SASL_AUTHENTICATION_FAILED
    ) -> None:
        super().__init__(message, code)


class RecordAuthenticationError(AuthenticationError, ProduceError):
    """A record refused because the login failed: both the AuthenticationError and the
    ProduceError a record's future fails with."""


def record_refusal(refused: AuthorizationError) -> AuthorizationError:
    """The error a record's future fails with for `refused`: a ProduceError too, of the same
    kind (authentication or authorization)."""
    if isinstance(refused, AuthenticationError):
        return RecordAuthenticationError(str(refused), refused.code)
    return RecordAuthorizationError(str(refused), refused.code, refused.resource)


class NoBrokersAvailable(KafkaError):
    """No controller (or no leader) answered within the allowed time."""

    code = ErrorCode.NETWORK_EXCEPTION


class ConcurrentAccessError(KafkaError):
    """A sync Consumer was called on one thread while another was inside a call of it (Kafka's
    ConcurrentModificationException: "KafkaConsumer is not safe for multi-threaded access")."""

    code = ErrorCode.INVALID_REQUEST


def first_of(errors: Mapping[Hashable, KafkaError]) -> KafkaError | None:
    """The first of the items' `errors` (None when there are none), carrying all of them."""
    if not errors:
        return None
    first = next(iter(errors.values()))
    first.errors = MappingProxyType(dict(errors))
    return first
