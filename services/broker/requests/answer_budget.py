"""The bytes of fetch answers a broker holds at once: one budget for the whole process (pure).

Theory of operation. Fetch and FetchStream need no cluster secret, and each answer may hold up
to limits.fetch_response_bytes_max of records in the broker's memory until gRPC has written it.
A stranger who opens hundreds of fetches and never reads their answers would otherwise make the
broker hold hundreds of them at once, and the kernel would end it for everyone. Kafka sends
from the page cache (sendfile) and has quotas; here every answer is Python memory, so its bytes
are counted against `capacity_bytes`: the broker key `fetch.answers.bytes.max` over
ANSWER_COPIES, since an answer costs about twice its bytes while it is written.

A fetch's pass over its partitions is synchronous (one event loop), so it asks the budget how
much it may hold (`room_bytes`), reads within that, and takes exactly what it read (`hold`)
before anything else runs: the budget is never exceeded, not even by KIP-74's first batch,
which the reader returns whole only when it fits the room. `reserve(wanted) -> granted` is the
same in one step, for callers that know their size before reading. The bytes are released once
the answer has been written (after the stream's write; after the unary call ended), or once the
write deadline ended its RPC (answer_write_deadline.py): a client that never reads holds them
for at most that long.

Fairness. A fetch that could read nothing (the room was smaller than its first batch, or zero)
takes a ticket and waits, in arrival order, for `need_bytes` to be free; while anyone waits, a
newcomer's room is zero, so that small fetches cannot starve a large one. `ready` names the
first ticket in line once its need fits; the driver (answer_gate.py) wakes it, and the fetch
reads again with the room it is then given, keeping its place until it leaves the line. A
need is at most the capacity, and the capacity at least one maximal answer (the config's floor),
so the first in line is always served once the answers held before it are written.

Invariants: 0 <= held_bytes <= capacity_bytes; a ticket is in line at most once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# An answer costs about twice its bytes while gRPC writes it: the serialized message, which
# gRPC's send operation keeps, and the copy of it the C core sends from (measured on a broker:
# 40 unread 8 MiB answers, +615 MiB RSS; bounded to 64 MiB of answers, +124 MiB).
ANSWER_COPIES = 2


@dataclass
class AnswerBudget:
    capacity_bytes: int
    held_bytes: int = 0
    # Tickets waiting for room, in arrival order, with the bytes each needs (dicts keep order).
    waiting: dict[int, int] = field(default_factory=dict)
    _next_ticket: int = 1

    def __post_init__(self) -> None:
        assert self.capacity_bytes > 0, self.capacity_bytes

    @property
    def free_bytes(self) -> int:
        return self.capacity_bytes - self.held_bytes

    def room_bytes(self, ticket: int | None = None) -> int:
        """What an answer may hold now: the free bytes, for the first in line or anyone while
        nobody waits; otherwise 0 (its turn comes after theirs)."""
        if self.waiting and (ticket is None or next(iter(self.waiting)) != ticket):
            return 0
        return self.free_bytes

    def hold(self, size_bytes: int, ticket: int | None = None) -> int:
        """Hold `size_bytes` of an answer read within `room_bytes(ticket)`; returns them (to
        `release` once written)."""
        assert 0 <= size_bytes <= self.room_bytes(ticket), (size_bytes, self.room_bytes(ticket))
        self.held_bytes += size_bytes
        return size_bytes

    def reserve(self, wanted_bytes: int, ticket: int | None = None) -> int:
        """Hold as much of `wanted_bytes` as there is room for; returns the bytes granted (0
        when there is none: wait in line)."""
        assert wanted_bytes >= 0, wanted_bytes
        return self.hold(min(wanted_bytes, self.room_bytes(ticket)), ticket)

    def release(self, size_bytes: int) -> None:
        """The answer holding `size_bytes` was written (or dropped)."""
        assert 0 <= size_bytes <= self.held_bytes, (size_bytes, self.held_bytes)
        self.held_bytes -= size_bytes

    def wait(self, need_bytes: int, ticket: int | None = None) -> int:
        """Take a place in line needing `need_bytes` (at most the capacity), or update the
        need of `ticket`, keeping its place; returns the ticket."""
        assert need_bytes > 0, need_bytes
        if ticket is None or ticket not in self.waiting:
            ticket = self._next_ticket
            self._next_ticket += 1
        self.waiting[ticket] = min(need_bytes, self.capacity_bytes)
        return ticket

    def leave(self, ticket: int) -> None:
        """`ticket` leaves the line (served, timed out or cancelled); a no-op if not in it."""
        self.waiting.pop(ticket, None)

    def ready(self) -> int | None:
        """The first ticket in line, once the bytes it needs are free; else None."""
        for ticket, need_bytes in self.waiting.items():
            return ticket if need_bytes <= self.free_bytes else None
        return None
