"""Error codes and the exceptions that carry them: one table for the whole system.

`ErrorCode` mirrors `samsa.v1.ErrorCode` in proto/samsa/v1/errors.proto: same Kafka names, same
Kafka numbers (the proto spells them `ERROR_CODE_<NAME>`, and its zero value
`ERROR_CODE_UNSPECIFIED` is Kafka's NONE). tests/unit/test_errors.py fails if the two drift.

Each code says whether a client may retry it (Kafka's `RetriableException` split): retry policy
reads the flag, never the name. Cores raise `SamsaError` subclasses carrying a code and a message
that tells a person what to fix; adapters turn them into per-partition ErrorCodes or gRPC statuses.
"""

from __future__ import annotations

import enum


class ErrorCode(enum.IntEnum):
    """Kafka's protocol error codes (names and numbers) that Samsa uses."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    KAFKA_STORAGE_ERROR = 56
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INVALID_UPDATE_VERSION = 95
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    TRANSACTIONAL_ID_NOT_FOUND = 105
    INELIGIBLE_REPLICA = 107
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    INVALID_REGULAR_EXPRESSION = 128


RETRIABLE: frozenset[ErrorCode] = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,  # Kafka retries it: the bytes may have been damaged in flight
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # metadata may not have propagated yet
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,  # the preferred replica may come back
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
        ErrorCode.UNKNOWN_TOPIC_ID,  # the broker's or the client's metadata is behind
    }
)


def is_retriable(code: ErrorCode) -> bool:
    """True when a client may retry the same request after a backoff."""
    return code in RETRIABLE


class SamsaError(Exception):
    """An expected failure with a Kafka error code and a message saying what to fix."""

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self)

    @property
    def retriable(self) -> bool:
        return is_retriable(self.code)


class CorruptRecordError(SamsaError):
    """A batch failed its CRC, framing or bounds checks."""

    code = ErrorCode.CORRUPT_MESSAGE


class RecordTooLargeError(SamsaError):
    """A batch is larger than `max.message.bytes` (or a hard limit in samsa.common.limits)."""

    code = ErrorCode.MESSAGE_TOO_LARGE


class InvalidRecordError(SamsaError):
    """A well-formed batch that breaks a rule (offsets, timestamps, attributes)."""

    code = ErrorCode.INVALID_RECORD


class InvalidTimestampError(SamsaError):
    """A record timestamp outside the range the topic accepts (KIP-937's bounds)."""

    code = ErrorCode.INVALID_TIMESTAMP


class UnsupportedFormatError(SamsaError):
    """A batch whose magic byte this version does not know."""

    code = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


class UnsupportedCompressionError(SamsaError):
    """A batch compressed with a codec Samsa does not implement."""

    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class OffsetOutOfRangeError(SamsaError):
    """A read below the log start offset or above the log end offset."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE


class InvalidConfigError(SamsaError):
    """A configuration key that is unknown, or a value that is out of range or incoherent."""

    code = ErrorCode.INVALID_CONFIG


class StorageError(SamsaError):
    """The disk failed us (EIO, ENOSPC, a file we cannot open): Kafka's KAFKA_STORAGE_ERROR."""

    code = ErrorCode.KAFKA_STORAGE_ERROR
