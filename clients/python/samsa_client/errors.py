"""The SDK exceptions: each carries a Kafka error code, whether a retry may help, and a message."""

from __future__ import annotations

from samsa.common.errors import ErrorCode, SamsaError, is_retriable

__all__ = ["KafkaError", "NoBrokersAvailable", "ProduceError", "TopicError"]


class KafkaError(SamsaError):
    """A request failed with a Kafka error code."""

    @classmethod
    def of(cls, code: int, message: str) -> KafkaError:
        error_code = ErrorCode(code)
        return cls(message or error_code.name, error_code)

    @property
    def retriable(self) -> bool:
        return is_retriable(self.code)


class ProduceError(KafkaError):
    """A record could not be delivered (after retries, or for a non-retriable reason)."""


class TopicError(KafkaError):
    """An admin operation on a topic failed (exists, unknown, invalid config, …)."""


class NoBrokersAvailable(KafkaError):
    """No controller (or no leader) answered within the allowed time."""

    code = ErrorCode.NETWORK_EXCEPTION
