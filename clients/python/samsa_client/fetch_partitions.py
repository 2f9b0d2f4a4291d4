"""The records of the consumer's partition table: what the fetch state keeps per partition.

The fetch state (fetch_state.py) owns the table: each assigned partition's `Partition`, with its
`Buffered` records waiting for `poll()`, and each broker's fetch `InFlight`. Fetch answers
(fetch_answers.py) and offset lookups (offset_resets.py) write into the same table; the records
live here, apart from all three, so that their imports stay acyclic. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from samsa.client.consumer_records import ConsumerRecord
from samsa.common.fetch_session_client import FetchParts

TopicPartition = tuple[str, int]


class Buffered:
    """Decoded records of one partition waiting to be handed out."""

    __slots__ = ("end_offset", "leader_epoch", "records", "start")

    def __init__(self, records: list[ConsumerRecord], leader_epoch: int, end_offset: int) -> None:
        self.records = records
        self.start = 0
        self.leader_epoch = leader_epoch  # of the last batch these records came from
        # The position once all are handed out: past any hidden batches (markers, aborted
        # records) fetched after the last of them.
        self.end_offset = end_offset


class Partition:
    """One assigned partition. `position`/`fetch_offset` are None while a reset is pending."""

    __slots__ = (
        "buffers",
        "fetch_offset",
        "leader_epoch",
        "paused",
        "position",
        "read_replica",
        "read_replica_leader",
        "read_replica_until_ms",
        "refused_by",
        "retry_at_ms",
    )

    def __init__(self) -> None:
        self.position: int | None = None
        self.fetch_offset: int | None = None
        self.leader_epoch = -1  # of the last batch handed out; -1: none yet
        self.read_replica: int | None = None  # the replica the leader told us to read from
        # The leader that named it, and when it is forgotten (None: set at the next planning):
        # the leader is asked again then, or as soon as another leads (fetch_state.py).
        self.read_replica_leader: int | None = None
        self.read_replica_until_ms: int | None = None
        self.paused = False
        # The broker that last refused to serve it (a leader that moved, a failed disk): not
        # asked again before retry_at_ms (None: set at the next planning) while it still leads.
        self.refused_by: int | None = None
        self.retry_at_ms: int | None = None
        self.buffers: deque[Buffered] = deque()


class InFlight(NamedTuple):
    offsets: dict[TopicPartition, int]  # the fetch offset asked per partition (dropped: gone)
    parts: FetchParts
