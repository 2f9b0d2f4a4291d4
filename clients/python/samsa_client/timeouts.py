"""The check every SDK call that takes a timeout in seconds makes of it (poll, flush, close,
the transactional calls), in one place so that they all refuse the same values.

Why. NaN never runs out: a deadline of now + NaN is never passed and every wait given NaN
returns at once, so a call waiting for something spun a core for ever (poll(nan), flush(nan)).
A negative timeout is refused as Kafka refuses a negative Duration (IllegalArgumentException);
infinity is a wait without limit, as None is.
"""

from __future__ import annotations


def checked_timeout(timeout: float) -> float:
    """`timeout`, checked: a number of seconds >= 0 (inf included), else ValueError."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
        raise ValueError(f"timeout must be a number of seconds >= 0, not {timeout!r}")
    return timeout
