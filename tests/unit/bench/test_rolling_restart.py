"""Goal: the rolling-restart scenario reports the stall it saw and no more — the longest pause
between consecutive acks in each window (a restart's window runs from its SIGTERM to the next
one's), a producer that never recovered as an open gap rather than a short one — and calls an
acked record lost exactly when its offset does not hold its value (or, acked without an offset,
when its value is stored nowhere).

Method: the pure functions of bench/rolling_restart.py are called on hand-made ack timestamps
and offset -> value maps with known answers; no cluster, no clock. The producer thread's
bookkeeping runs once, inline, over a fake Producer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import SimpleNamespace

import pytest

from bench import rolling_restart
from bench.rolling_restart import (
    ReadBack,
    RollingRestartResult,
    Window,
    compare_read_back,
    max_ack_gap_ms,
    restart_windows,
)

# Acks every 10 ms, a 500 ms hole after 0.1 s and a 2 s hole after 1.0 s.
ACKS_S = [0.01 * i for i in range(11)] + [0.6 + 0.01 * i for i in range(41)] + [3.0, 3.01]


def test_the_longest_gap_over_the_whole_run() -> None:
    assert max_ack_gap_ms(ACKS_S, -math.inf, math.inf) == pytest.approx(2000.0)


def test_a_window_sees_only_the_gaps_that_overlap_it() -> None:
    assert max_ack_gap_ms(ACKS_S, 0.0, 0.09) == pytest.approx(10.0)
    assert max_ack_gap_ms(ACKS_S, 0.3, 0.35) == pytest.approx(500.0)  # inside the hole
    assert max_ack_gap_ms(ACKS_S, 0.61, 0.9) == pytest.approx(10.0)
    assert max_ack_gap_ms(ACKS_S, 0.9, 1.5) == pytest.approx(2000.0)


def test_unsorted_ack_times_give_the_same_gaps() -> None:
    shuffled = ACKS_S[::2] + ACKS_S[1::2]
    assert max_ack_gap_ms(shuffled, 0.3, 0.35) == pytest.approx(500.0)


def test_a_producer_that_never_recovered_is_an_open_gap_up_to_the_window_end() -> None:
    acks = [0.0, 0.01, 0.02]
    assert max_ack_gap_ms(acks, 0.0, 5.0) == pytest.approx(4980.0)
    assert max_ack_gap_ms(acks, 1.0, 5.0) == pytest.approx(4000.0)  # from the window's start


def test_no_ack_at_all_is_no_figure() -> None:
    assert max_ack_gap_ms([], 0.0, 1.0) is None
    assert max_ack_gap_ms([0.5], -math.inf, math.inf) is None


def test_windows_run_from_each_sigterm_to_the_next() -> None:
    windows = restart_windows(0.5, [("broker-1 (leader)", 2.0), ("broker-2", 7.0)], 12.0)
    assert windows == [
        Window("steady", 0.5, 2.0),
        Window("broker-1 (leader)", 2.0, 7.0),
        Window("broker-2", 7.0, 12.0),
    ]
    assert restart_windows(0.5, [], 3.0) == [Window("steady", 0.5, 3.0)]


def test_the_overall_gap_is_the_longest_window_gap() -> None:
    result = RollingRestartResult(ack_times_s=ACKS_S, restarts=[("broker-1", 0.5)], end_s=3.5)
    gaps = result.max_gaps_ms()
    assert list(gaps) == ["steady", "broker-1", "overall"]
    assert gaps["steady"] == pytest.approx(500.0)
    assert gaps["broker-1"] == pytest.approx(2000.0)
    assert gaps["overall"] == gaps["broker-1"]


def test_an_acked_record_is_lost_unless_its_offset_holds_its_value() -> None:
    acked = {0: b"a", 1: b"b", 2: b"c", 3: b"d"}
    stored = {0: b"a", 1: b"x", 2: b"c", 4: b"d"}  # 1 overwritten, 3 missing (d moved to 4)
    assert compare_read_back(acked, stored) == ReadBack(checked=4, lost=2, duplicated=0)


def test_duplicates_from_retried_batches_are_counted_apart_from_losses() -> None:
    acked = {0: b"a", 2: b"b"}
    stored = {0: b"a", 1: b"b", 2: b"b", 3: b"b"}  # b stored three times: two extra copies
    assert compare_read_back(acked, stored) == ReadBack(checked=2, lost=0, duplicated=2)


def test_a_record_acked_without_an_offset_is_checked_by_its_value() -> None:
    """A retried batch proven written completes without an offset (-1): such records used to
    share the key -1, so all but one counted as failed and the one as lost."""
    acked = {0: b"a", 3: b"d"}
    stored = {0: b"a", 1: b"b", 2: b"c", 3: b"d"}
    assert compare_read_back(acked, stored, [b"b", b"c"]) == ReadBack(4, 0, 0)
    assert compare_read_back(acked, stored, [b"b", b"x"]) == ReadBack(4, 1, 0)


def test_the_producer_counts_records_acked_without_an_offset_as_acked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Acked:
        def __init__(self, offset: int) -> None:
            self.offset = offset

        def done(self) -> bool:
            return True

        def exception(self, timeout: float | None = None) -> None:
            return None

        def result(self, timeout: float | None = None) -> SimpleNamespace:
            return SimpleNamespace(offset=self.offset)

        def add_done_callback(self, callback: Callable[[Acked], None]) -> None:
            callback(self)

    class Producer:
        """Acks records 3 to 5 without an offset; stops the run after 10."""

        def __init__(self, config: dict) -> None:
            self.count = 0

        def __enter__(self) -> Producer:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def send(self, topic: str, value: bytes, partition: int) -> Acked:
            offset, self.count = self.count, self.count + 1
            if self.count == 10:
                steady.stop.set()
            return Acked(-1 if 3 <= offset <= 5 else offset)

        def flush(self, timeout: float | None = None) -> None:
            pass

    monkeypatch.setattr(rolling_restart, "Producer", Producer)
    steady = rolling_restart._SteadyProducer("boot", "t", 0.0)
    steady._run()
    assert (steady.sent, steady.failed, len(steady.acked)) == (10, 0, 7)
    assert steady.acked_without_offset == [b"roll-%09d" % index for index in (3, 4, 5)]
