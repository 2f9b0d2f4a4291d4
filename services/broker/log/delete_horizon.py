"""When compaction first cleaned each offset: where a tombstone's delete.retention.ms starts.

Theory of operation (Kafka's delete horizon, KIP-534). A tombstone must stay delete.retention.ms
after the first compaction pass that cleaned it, so that a consumer that read the value it deletes
before that pass (which removes the value) still has that long to read the delete. Kafka stamps
the horizon into the batch the first time its cleaner passes over it; Samsa keeps it beside the
log instead, by offset range: every pass cleans the log from its start up to where it ends
(`CleaningJob.cleaned_to`), so what it cleaned first is the range from where the previous passes
ended to where it ends. `FirstCleaned` holds those ranges, as (end offset, exclusive; time of the
pass) with increasing ends: an offset's first pass is the first entry whose end is above it, and
an offset at or above the last end was never cleaned (its first pass is the one running now). A
producer's record timestamp plays no part: it is the producer's to choose (an event time days
old, a replayed record's), and a horizon counted from it could remove a tombstone in the very
pass that removes its value.

A truncation cuts the ranges at the new log end (what is written there again is new to the
cleaner); a log start moved past ranges makes them irrelevant, and they are dropped. To bound the
checkpoint, past ENTRIES_MAX entries the two oldest are merged, keeping the later time: a merged
range's tombstones stay longer, never shorter. log_compaction.py keeps one, checkpoints it with
the cleaner's offset and feeds each pass a copy (compaction.CleaningRules). Pure.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

ENTRIES_MAX = 64


class FirstCleaned:
    """(end offset, first-cleaned time) ranges; see the module docstring."""

    __slots__ = ("_ends", "_times")

    def __init__(self, entries: Iterable[tuple[int, int]] = ()) -> None:
        self._ends: list[int] = []
        self._times: list[int] = []
        for end, time_ms in entries:
            if end > (self._ends[-1] if self._ends else 0):
                self._ends.append(end)
                self._times.append(time_ms)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._ends, self._times, strict=True))

    def copy(self) -> FirstCleaned:
        return FirstCleaned(self.entries())

    @property
    def end(self) -> int:
        """Where the passes so far ended: every offset below it was cleaned (0: none)."""
        return self._ends[-1] if self._ends else 0

    def first_cleaned_ms(self, offset: int) -> int | None:
        """When the pass that first cleaned `offset` ran, or None when none has yet."""
        index = bisect.bisect_right(self._ends, offset)
        return self._times[index] if index < len(self._times) else None

    def on_pass(self, cleaned_to: int, now_ms: int) -> None:
        """A pass that ran at `now_ms` cleaned everything below `cleaned_to`."""
        if cleaned_to <= (self._ends[-1] if self._ends else 0):
            return
        self._ends.append(cleaned_to)
        self._times.append(now_ms)
        if len(self._ends) > ENTRIES_MAX:
            del self._ends[0]
            self._times[1] = max(self._times[0], self._times[1])
            del self._times[0]

    def truncate(self, log_end_offset: int) -> bool:
        """The log lost everything from `log_end_offset` on; answers whether a range changed."""
        cut = bisect.bisect_left(self._ends, log_end_offset)  # the first range reaching it
        if cut == len(self._ends) or self._ends[-1] == log_end_offset:
            return False
        del self._ends[cut + 1 :], self._times[cut + 1 :]
        if log_end_offset > 0:
            self._ends[cut] = log_end_offset
        else:
            del self._ends[cut], self._times[cut]
        return True

    def forget_below(self, log_start_offset: int) -> None:
        """Drop the ranges wholly below `log_start_offset` (nothing of the log is left there)."""
        gone = bisect.bisect_right(self._ends, log_start_offset)
        del self._ends[:gone], self._times[:gone]
