"""Goal: a flood of log lines of one kind costs at most `lines_max` lines per window plus one
summary count, and no line is lost from the count.

Method: drive `LogRateLimiter` with explicit `now_ms` values (it is pure): floods inside one
window, floods across windows, a flood that stops (summarized by `close_window`), and a
hypothesis check that written + summarized always equals the lines offered.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from samsa.services.runtime.rate_limited_log import Admission, LogRateLimiter


def test_a_flood_inside_one_window_writes_lines_max_then_counts() -> None:
    limiter = LogRateLimiter(lines_max=3, window_ms=60_000)
    verdicts = [limiter.admit(now_ms=1_000 + n) for n in range(100)]
    assert [v.write for v in verdicts] == [True] * 3 + [False] * 97
    assert all(v.suppressed_before == 0 for v in verdicts)
    assert limiter.suppressed == 97


def test_the_next_window_summarizes_the_last_and_writes_again() -> None:
    limiter = LogRateLimiter(lines_max=2, window_ms=1_000)
    for n in range(10):
        limiter.admit(now_ms=n)
    assert limiter.admit(now_ms=1_000) == Admission(write=True, suppressed_before=8)
    assert limiter.admit(now_ms=1_001) == Admission(write=True, suppressed_before=0)
    assert limiter.admit(now_ms=1_002) == Admission(write=False, suppressed_before=0)


def test_a_flood_that_stops_is_summarized_by_close_window_once() -> None:
    limiter = LogRateLimiter(lines_max=1, window_ms=1_000)
    for n in range(5):
        limiter.admit(now_ms=100 + n)
    assert limiter.window_end_ms() == 1_100
    assert limiter.close_window(now_ms=1_099) == 0, "the window is not over yet"
    assert limiter.close_window(now_ms=1_100) == 4
    assert limiter.close_window(now_ms=5_000) == 0, "a count is reported once"
    assert limiter.window_end_ms() is None
    assert limiter.admit(now_ms=5_000) == Admission(write=True, suppressed_before=0)


def test_a_quiet_window_summarizes_nothing() -> None:
    limiter = LogRateLimiter(lines_max=5, window_ms=1_000)
    limiter.admit(now_ms=0)
    assert limiter.admit(now_ms=10_000) == Admission(write=True, suppressed_before=0)


@given(
    lines_max=st.integers(1, 5),
    window_ms=st.integers(1, 100),
    gaps=st.lists(st.integers(0, 150), max_size=200),
)
def test_every_line_is_written_or_counted_and_windows_are_bounded(
    lines_max: int, window_ms: int, gaps: list[int]
) -> None:
    limiter = LogRateLimiter(lines_max, window_ms)
    now_ms, written, summarized = 0, [], 0
    for gap in gaps:
        now_ms += gap
        verdict = limiter.admit(now_ms)
        summarized += verdict.suppressed_before
        if verdict.write:
            written.append(now_ms)
    summarized += limiter.close_window(now_ms + window_ms)
    assert len(written) + summarized == len(gaps)
    # Fixed windows: any span of window_ms overlaps at most two of them, so it holds at most
    # 2 * lines_max written lines.
    for index, start in enumerate(written):
        inside = [t for t in written[index:] if t < start + window_ms]
        assert len(inside) <= 2 * lines_max
