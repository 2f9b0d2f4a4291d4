"""The leader-epoch cache: which leader epoch wrote which offsets (KIP-101, KIP-279).

Theory of operation. Every batch carries the leader epoch of the leader that appended it. The
cache keeps one entry per epoch, (leader_epoch, start_offset): the first offset written in that
epoch, in increasing order of both. A follower that restarts or changes leader asks the leader
`end_offset_for_epoch(its latest epoch)` and truncates to the answer instead of trusting its high
watermark — the fix for KIP-101's lost and diverging records.

- `assign` records an epoch's start offset when it is new. An entry that conflicts with the new
  one (a later-or-equal epoch, or a later-or-equal start offset) is removed first: the log is being
  rewritten from there (Kafka's maybeTruncateNonMonotonicEntries).
- `truncate_from_end(end_offset)` forgets epochs that start at or after a truncated log end.
- `truncate_from_start(start_offset)` forgets epochs wholly below a new log start offset and moves
  the start of the epoch that straddles it up to it.
- `end_offset_for_epoch(e, log_end_offset)` answers with (the largest epoch <= e, the start offset
  of the first epoch > e), or the log end offset when e is the latest epoch, or (-1, -1) when e is
  unknown or above every cached epoch (Kafka's LeaderEpochFileCache.endOffsetFor).
- `epoch_of(entries, offset)` names the epoch that wrote an offset (ListOffsets answers it, so
  that a consumer that seeks there can check its later fetches against it, KIP-320).

Invariants: epochs strictly increase, start offsets strictly increase, both are >= 0.
Pure: the log persists `entries` through checkpoint_format / checkpoint_file.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable

from samsa.services.broker.log.checkpoint_format import CorruptCheckpointError

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """Sorted (leader_epoch, start_offset) entries; every mutator says whether it changed them."""

    __slots__ = ("_epochs", "_start_offsets")

    def __init__(self, entries: Iterable[tuple[int, int]] = ()) -> None:
        self._epochs: list[int] = []
        self._start_offsets: list[int] = []
        for leader_epoch, start_offset in entries:
            self.assign(leader_epoch, start_offset)

    @classmethod
    def from_checkpoint(cls, entries: Iterable[tuple[int, ...]]) -> LeaderEpochCache:
        """A cache from checkpoint entries, which must already satisfy the invariants."""
        cache = cls()
        for leader_epoch, start_offset in entries:
            if (
                leader_epoch < 0
                or start_offset < 0
                or (
                    cache._epochs
                    and (
                        leader_epoch <= cache._epochs[-1]
                        or start_offset <= cache._start_offsets[-1]
                    )
                )
            ):
                raise CorruptCheckpointError(
                    f"leader-epoch entry ({leader_epoch}, {start_offset}) breaks the cache's "
                    f"order after {cache.entries()[-1:]}"
                )
            cache.assign(leader_epoch, start_offset)
        return cache

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.entries()})"

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._start_offsets, strict=True))

    @property
    def latest_epoch(self) -> int:
        """The latest cached epoch, or UNDEFINED_EPOCH (-1) when the cache is empty."""
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def start_offset_of(self, leader_epoch: int) -> int | None:
        index = bisect_left(self._epochs, leader_epoch)
        if index < len(self._epochs) and self._epochs[index] == leader_epoch:
            return self._start_offsets[index]
        return None

    def assign(self, leader_epoch: int, start_offset: int) -> bool:
        """Record that `leader_epoch` starts at `start_offset` unless it is already known."""
        assert leader_epoch >= 0 and start_offset >= 0, (leader_epoch, start_offset)
        if (
            self._epochs
            and leader_epoch == self._epochs[-1]
            and start_offset >= self._start_offsets[-1]
        ):
            return False  # the common case: another batch of the current epoch
        while self._epochs and (
            self._epochs[-1] >= leader_epoch or self._start_offsets[-1] >= start_offset
        ):
            self._epochs.pop()
            self._start_offsets.pop()
        self._epochs.append(leader_epoch)
        self._start_offsets.append(start_offset)
        return True

    def assign_batches(self, starts: Iterable[tuple[int, int]]) -> bool:
        """`assign` each (leader_epoch, base_offset) of appended batches whose epoch is set
        (>= 0); True when any changed the cache."""
        changed = False
        for leader_epoch, start_offset in starts:
            if leader_epoch >= 0:
                changed |= self.assign(leader_epoch, start_offset)
        return changed

    def truncate_from_end(self, end_offset: int) -> bool:
        """Remove the entries whose start offset is >= `end_offset`."""
        keep = bisect_left(self._start_offsets, end_offset)
        if end_offset < 0 or keep == len(self._start_offsets):
            return False
        del self._epochs[keep:]
        del self._start_offsets[keep:]
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """Remove entries starting at or below `start_offset`, keeping the last of them moved to
        `start_offset` (so truncate_from_start(6) keeps an epoch that covers offset 6)."""
        removed = bisect_right(self._start_offsets, start_offset)
        if removed == 0:
            return False
        straddling_epoch = self._epochs[removed - 1]
        if removed == 1 and self._start_offsets[0] == start_offset:
            return False
        del self._epochs[:removed]
        del self._start_offsets[:removed]
        self._epochs.insert(0, straddling_epoch)
        self._start_offsets.insert(0, start_offset)
        return True

    def clear(self) -> bool:
        changed = bool(self._epochs)
        self._epochs.clear()
        self._start_offsets.clear()
        return changed

    def end_offset_for_epoch(self, leader_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """KIP-101: (epoch, end offset) for a follower whose latest epoch is `leader_epoch`."""
        if leader_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if leader_epoch == self._epochs[-1]:
            return leader_epoch, log_end_offset
        higher = bisect_right(self._epochs, leader_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            # Older than every cached epoch: its data is gone; the follower restarts from the
            # first epoch we know of (Kafka answers the same).
            return leader_epoch, self._start_offsets[0]
        return self._epochs[higher - 1], self._start_offsets[higher]


def epoch_of(entries: list[tuple[int, int]], offset: int) -> int:
    """The epoch of the entries (LeaderEpochCache.entries()) whose range holds `offset`: the
    last one starting at or below it; UNDEFINED_EPOCH below the first or with none."""
    index = bisect_right([start for _, start in entries], offset)
    return entries[index - 1][0] if index > 0 and offset >= 0 else UNDEFINED_EPOCH
