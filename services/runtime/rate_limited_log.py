"""How many lines of one kind a process may log per window, and how many it stayed silent about.

Theory of operation. A log line per bad request is a gift to anyone who can send requests: a
fuzzer once turned 7,809 undecodable requests into 6.4 MB of tracebacks. `LogRateLimiter` keeps a
fixed window per kind of line: the first `lines_max` lines of a window are written, the rest only
counted. The count is reported once, as a summary line, when the window is over: either by the
next `admit` after it (which opens a new window) or by `close_window`, which a driver calls from a
timer so that a flood that simply stops is still summarized.

Pure: the caller passes `now_ms` (any monotonic clock); no I/O, no clock, no threads.
"""

from __future__ import annotations

from typing import NamedTuple


class Admission(NamedTuple):
    """What to do with one line: write it or not, and first summarize the window that ended."""

    write: bool
    # Lines suppressed in the window that closed just before this one (0: nothing to summarize).
    suppressed_before: int


class LogRateLimiter:
    """At most `lines_max` lines per `window_ms`; the rest are counted for a summary."""

    __slots__ = ("_lines", "_suppressed", "_window_start_ms", "lines_max", "window_ms")

    def __init__(self, lines_max: int, window_ms: int) -> None:
        assert lines_max >= 1 and window_ms >= 1, (lines_max, window_ms)
        self.lines_max = lines_max
        self.window_ms = window_ms
        self._window_start_ms: int | None = None
        self._lines = 0
        self._suppressed = 0

    @property
    def suppressed(self) -> int:
        """Lines suppressed so far in the current window."""
        return self._suppressed

    def window_end_ms(self) -> int | None:
        """When the current window ends (None: no window open)."""
        if self._window_start_ms is None:
            return None
        return self._window_start_ms + self.window_ms

    def admit(self, now_ms: int) -> Admission:
        """Account for one line at `now_ms`."""
        suppressed_before = self.close_window(now_ms)
        if self._window_start_ms is None:
            self._window_start_ms = now_ms
        if self._lines < self.lines_max:
            self._lines += 1
            return Admission(True, suppressed_before)
        self._suppressed += 1
        return Admission(False, suppressed_before)

    def close_window(self, now_ms: int) -> int:
        """Close the window if it is over; return how many lines it suppressed (to summarize)."""
        end_ms = self.window_end_ms()
        if end_ms is None or now_ms < end_ms:
            return 0
        suppressed = self._suppressed
        self._window_start_ms = None
        self._lines = 0
        self._suppressed = 0
        return suppressed
