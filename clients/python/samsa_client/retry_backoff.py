"""Kafka's retry backoff (KIP-580) — pure: the randomness comes from the `random.Random` passed in.

Exponential (x2 per attempt) from retry.backoff.ms to retry.backoff.max.ms, with +-20% jitter so
that producers failed by one event do not retry in lockstep; a static backoff when the maximum is
not above the initial value.
"""

from __future__ import annotations

from typing import Protocol

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
