"""When a batch goes again, and when it has had its chance — pure: time is passed in, and the
randomness comes from the `random.Random` passed in.

Retries. A failed attempt is retried when the failure is retriable, the batch has had at most
`retries` attempts, and its delivery deadline has not passed: `delivery.timeout.ms` after it was
created (its first record was appended). It goes again after Kafka's backoff (KIP-580):
exponential (x2 per attempt) from retry.backoff.ms to retry.backoff.max.ms, with +-20% jitter so
that producers failed by one event do not retry in lockstep; a static backoff when the maximum is
not above the initial value; and none when the answer named the new leader (KIP-951).

Expiry. A queued batch whose deadline has passed fails with REQUEST_TIMED_OUT (Kafka's "Expiring
N record(s) ..."); the accumulator asks `expired` of each partition's oldest batch.
"""

from __future__ import annotations

from typing import Protocol

from samsa.client.producer_batch import ProducerBatch

RETRY_BACKOFF_MULTIPLIER = 2
RETRY_BACKOFF_JITTER = 0.2


class RandomSource(Protocol):
    """The part of `random.Random` the backoff uses."""

    def random(self) -> float: ...


class RetryBackoff:
    def __init__(self, initial_ms: int, max_ms: int, random_source: RandomSource) -> None:
        self._initial_ms = min(initial_ms, max_ms)
        self._max_ms = max_ms
        self._random = random_source

    def delay_ms(self, attempts: int) -> int:
        """Kafka's ExponentialBackoff: initial * 2^(attempts - 1), jittered by +-20%, capped."""
        initial_ms, max_ms = self._initial_ms, self._max_ms
        if max_ms <= initial_ms:
            return max_ms
        exponent = min(attempts - 1, 62)
        term_ms = min(initial_ms * RETRY_BACKOFF_MULTIPLIER**exponent, max_ms)
        jitter = 1 - RETRY_BACKOFF_JITTER + 2 * RETRY_BACKOFF_JITTER * self._random.random()
        return min(int(term_ms * jitter), max_ms)


class RetryPolicy:
    """retries, delivery.timeout.ms and the backoff, applied to one batch at a time."""

    def __init__(self, retries: int, delivery_timeout_ms: int, backoff: RetryBackoff) -> None:
        self._retries = retries
        self._delivery_timeout_ms = delivery_timeout_ms
        self._backoff = backoff

    def deadline_ms(self, batch: ProducerBatch) -> int:
        return batch.created_ms + self._delivery_timeout_ms

    def expired(self, batch: ProducerBatch, now_ms: int) -> bool:
        return now_ms - batch.created_ms >= self._delivery_timeout_ms

    def retry_at_ms(
        self, batch: ProducerBatch, retriable: bool, now_ms: int, retry_now: bool
    ) -> int | None:
        """When the failed attempt's batch goes again, or None: the failure is final."""
        if not (retriable and batch.attempts <= self._retries and now_ms < self.deadline_ms(batch)):
            return None
        return now_ms if retry_now else now_ms + self._backoff.delay_ms(batch.attempts)

    def final_reason(self, batch: ProducerBatch, retriable: bool, now_ms: int) -> str:
        """Why `retry_at_ms` said None."""
        if not retriable:
            return "not retriable"
        return (
            "retries exhausted"
            if now_ms < self.deadline_ms(batch)
            else "delivery.timeout.ms passed"
        )
