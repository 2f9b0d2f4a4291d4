"""A history checker for produce-under-faults tests: what was sent and acknowledged, against what
the partitions hold at the end.

Not a test module: the idempotence tests import it (txn_history_checker.py checks transactional
pipelines).

A history is the sends of several producers. Every value is unique and names its producer and
its place in that producer's send order. At the end the partitions are read in full, and
`check` finds, per partition:
- lost: an acknowledged value absent from the partition, or not at the offset its ack named;
- duplicated: a value stored more than once;
- reordered: two values of one producer stored in the opposite order from the one they were
  sent in (per partition: a producer's order is only promised within a partition).
Values that were sent but never acknowledged may be present once or absent; both are fine.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field


def value_of(producer: int, sequence: int) -> bytes:
    """The unique value of the `sequence`-th send of `producer`."""
    return b"p%d-%d" % (producer, sequence)


def parse_value(value: bytes) -> tuple[int, int]:
    """(producer, sequence) back from a value made by `value_of`."""
    producer, sequence = value[1:].split(b"-")
    return int(producer), int(sequence)


@dataclass
class History:
    """Acknowledgements, recorded from any thread."""

    acked: dict[bytes, tuple[int, int]] = field(
        default_factory=dict
    )  # value -> (partition, offset)
    sent: int = 0
    failed: Counter[str] = field(default_factory=Counter)  # why sends failed -> how many
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record_sent(self) -> None:
        with self._lock:
            self.sent += 1

    def record_ack(self, value: bytes, partition: int, offset: int) -> None:
        with self._lock:
            self.acked[value] = (partition, offset)

    def record_failure(self, reason: str) -> None:
        with self._lock:
            self.failed[reason] += 1


@dataclass
class Report:
    records_sent: int
    records_acked: int
    records_stored: int
    lost: list[bytes]
    duplicated: list[bytes]
    reordered: list[tuple[bytes, bytes]]

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered)

    def summary(self) -> str:
        return (
            f"sent {self.records_sent}, acked {self.records_acked}, stored {self.records_stored}; "
            f"lost {len(self.lost)}, duplicated {len(self.duplicated)}, "
            f"reordered {len(self.reordered)}"
        )


def check(history: History, stored: dict[int, list[tuple[int, bytes]]]) -> Report:
    """Compare the history with each partition's (offset, value) records, in offset order."""
    where: dict[bytes, tuple[int, int]] = {}
    counts: Counter[bytes] = Counter()
    reordered: list[tuple[bytes, bytes]] = []
    for partition, records in stored.items():
        last_of: dict[int, tuple[int, bytes]] = defaultdict(lambda: (-1, b""))
        for offset, value in records:
            counts[value] += 1
            where[value] = (partition, offset)
            producer, sequence = parse_value(value)
            previous_sequence, previous_value = last_of[producer]
            if sequence < previous_sequence:
                reordered.append((previous_value, value))
            else:
                last_of[producer] = (sequence, value)
    lost = [value for value, at in history.acked.items() if where.get(value) != at]
    duplicated = [value for value, count in counts.items() if count > 1]
    return Report(
        records_sent=history.sent,
        records_acked=len(history.acked),
        records_stored=sum(len(records) for records in stored.values()),
        lost=sorted(lost),
        duplicated=sorted(duplicated),
        reordered=reordered,
    )
