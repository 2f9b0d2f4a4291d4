"""Goal: the log's pure decisions (roll, retention, flush) follow Kafka's arithmetic at their
boundaries.

Method: numbers in, answers out — each rule tested one step either side of its threshold.
"""

from __future__ import annotations

from samsa.common import limits
from samsa.services.broker.log import policy
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.policy import SegmentStats, compaction_due

CONFIG = LogConfig(segment_bytes=10_000, segment_ms=1_000, max_message_bytes=5_000)


def roll(**overrides: int | None) -> str | None:
    arguments: dict[str, int | None] = {
        "segment_base_offset": 100,
        "segment_size_bytes": 5_000,
        "segment_first_append_ms": 0,
        "append_size_bytes": 1_000,
        "append_last_offset": 200,
        "append_batch_count": 1,
        "index_entries_room": 10,
        "now_ms": 500,
    }
    arguments.update(overrides)
    return policy.roll_reason(CONFIG, **arguments)  # type: ignore[arg-type]


def test_roll_reasons() -> None:
    assert roll() is None
    assert roll(append_size_bytes=5_000) is None, "exactly segment.bytes still fits"
    assert roll(append_size_bytes=5_001) == policy.ROLL_SIZE
    assert roll(now_ms=1_000) is None
    assert roll(now_ms=1_001) == policy.ROLL_TIME
    assert roll(segment_first_append_ms=None, now_ms=10**9) is None
    overflow = 100 + limits.segment_relative_offset_max + 1
    assert roll(append_last_offset=overflow - 1) is None
    assert roll(append_last_offset=overflow) == policy.ROLL_OFFSET_OVERFLOW
    assert roll(append_batch_count=11) == policy.ROLL_INDEX_FULL


def test_an_empty_segment_never_rolls_for_size_or_age() -> None:
    assert roll(segment_size_bytes=0, append_size_bytes=10**6, now_ms=10**9) is None
    assert roll(segment_size_bytes=0, append_last_offset=10**12) == policy.ROLL_OFFSET_OVERFLOW


SEGMENTS = [
    SegmentStats(0, 10, 1_000, max_timestamp=100),
    SegmentStats(10, 20, 1_000, max_timestamp=300),
    SegmentStats(20, 30, 1_000, max_timestamp=200),
    SegmentStats(30, 40, 1_000, max_timestamp=900),
]


def deletable(
    config: LogConfig, *, now_ms: int = 1_000, start: int = 0, high_watermark: int = 50
) -> int:
    return policy.retention_deletable_count(
        SEGMENTS,
        log_size_bytes=4_500,
        log_start_offset=start,
        high_watermark=high_watermark,
        config=config,
        now_ms=now_ms,
    )


def test_retention_by_time_is_a_prefix() -> None:
    assert deletable(LogConfig(retention_ms=900)) == 0, "1000 - 100 is not > 900"
    assert deletable(LogConfig(retention_ms=899)) == 1
    # The third segment is old enough, but the second is not: retention stops there.
    assert deletable(LogConfig(retention_ms=750)) == 1
    assert deletable(LogConfig(retention_ms=699)) == 3
    assert deletable(LogConfig(retention_ms=-1), now_ms=10**12) == 0


def test_retention_by_size_keeps_at_least_retention_bytes() -> None:
    assert deletable(LogConfig(retention_bytes=4_500)) == 0
    assert deletable(LogConfig(retention_bytes=3_500)) == 1
    assert deletable(LogConfig(retention_bytes=3_499)) == 1
    assert deletable(LogConfig(retention_bytes=0)) == 4


def test_segments_below_the_log_start_always_go() -> None:
    compact_only = LogConfig(cleanup_policy=frozenset({"compact"}), retention_ms=1)
    assert deletable(compact_only, now_ms=10**12) == 0
    assert deletable(compact_only, start=19) == 1
    assert deletable(compact_only, start=20) == 2


def test_retention_keeps_every_segment_not_wholly_below_the_high_watermark() -> None:
    """Kafka's rule: records not yet replicated (or committed) stay, however old their
    timestamps or large the log, so the log start never passes the high watermark."""
    assert deletable(LogConfig(retention_ms=0), high_watermark=25) == 2
    assert deletable(LogConfig(retention_bytes=0), high_watermark=20) == 2
    assert deletable(LogConfig(retention_bytes=0), high_watermark=19) == 1
    assert deletable(LogConfig(retention_ms=0), high_watermark=0) == 0


def test_segments_without_timestamps_do_not_expire_by_time() -> None:
    stats = [SegmentStats(0, 10, 100, max_timestamp=-1)]
    count = policy.retention_deletable_count(
        stats,
        log_size_bytes=200,
        log_start_offset=0,
        high_watermark=10,
        config=LogConfig(retention_ms=0),
        now_ms=10**12,
    )
    assert count == 0


def test_should_flush() -> None:
    config = LogConfig(flush_messages=10, flush_ms=1_000)
    assert not policy.should_flush(config, unflushed_records=0, last_flush_ms=0, now_ms=10**9)
    assert not policy.should_flush(config, unflushed_records=9, last_flush_ms=0, now_ms=999)
    assert policy.should_flush(config, unflushed_records=10, last_flush_ms=0, now_ms=0)
    assert policy.should_flush(config, unflushed_records=1, last_flush_ms=0, now_ms=1_000)
    never = LogConfig()
    assert not policy.should_flush(never, unflushed_records=10**6, last_flush_ms=0, now_ms=10**12)


def test_compaction_is_due_when_half_the_log_is_new_or_a_horizon_passed() -> None:
    closed = [(0, 400), (100, 400), (200, 200)]  # base offset, bytes

    def due(cleaned_to: int, *, ratio: float = 0.5, due_ms: int = 10**18) -> bool:
        return compaction_due(
            closed, cleaned_to=cleaned_to, dirty_ratio=ratio, due_ms=due_ms, now_ms=1_000
        )

    assert due(0), "never compacted: all of it is dirty"
    assert due(100), "600 of 1,000 bytes written since the last pass"
    assert not due(200), "200 of 1,000"
    assert due(200, ratio=0.2) and not due(200, ratio=0.21)
    assert not due(300), "nothing new"
    assert not due(300, ratio=0.0), "a ratio of 0 still needs something new"
    assert due(300, due_ms=1_000), "a tombstone or marker the last pass kept may go now"
    assert not due(300, due_ms=1_001)
    assert not compaction_due([], cleaned_to=0, dirty_ratio=0.5, due_ms=0, now_ms=1), "no log"


def test_an_empty_segment_goes_only_with_an_expired_one_after_it() -> None:
    """Compaction keeps the log's first segment when it empties it (so that the log start
    stays): that segment has no timestamp and no bytes, and must neither expire by itself
    (the log start would jump past offsets only compaction emptied) nor hold back retention
    of the segments after it for ever."""
    stats = [
        SegmentStats(0, 10, 0, max_timestamp=-1),
        SegmentStats(10, 20, 100, max_timestamp=100),
        SegmentStats(20, 30, 100, max_timestamp=900),
    ]

    def count(config: LogConfig) -> int:
        return policy.retention_deletable_count(
            stats,
            log_size_bytes=300,
            log_start_offset=0,
            high_watermark=30,
            config=config,
            now_ms=1_000,
        )

    assert count(LogConfig(retention_ms=950)) == 0, "nothing expired: the empty one stays"
    assert count(LogConfig(retention_ms=500)) == 2, "it goes with the expired one after it"
    assert count(LogConfig(retention_ms=50)) == 3
    assert count(LogConfig(retention_bytes=300)) == 0, "nothing in excess: the empty one stays"
    assert count(LogConfig(retention_bytes=200)) == 2
    assert count(LogConfig(retention_bytes=100)) == 3


def test_retention_reaches_the_active_segment_only_when_it_holds_committed_records() -> None:
    closed = [SegmentStats(0, 10, 100, max_timestamp=100)]

    def count(active: SegmentStats, config: LogConfig, high_watermark: int = 20) -> int:
        return policy.retention_deletable_count(
            closed,
            active=active,
            log_size_bytes=100 + active.size_bytes,
            log_start_offset=0,
            high_watermark=high_watermark,
            config=config,
            now_ms=1_000,
        )

    expired = SegmentStats(10, 20, 100, max_timestamp=200)
    assert count(expired, LogConfig(retention_ms=500)) == 2, "both go: the caller rolls first"
    assert count(expired, LogConfig(retention_ms=500), high_watermark=19) == 1
    assert count(expired, LogConfig(retention_ms=850)) == 1, "the active one is not expired"
    assert count(expired, LogConfig(retention_bytes=0)) == 2
    assert count(expired, LogConfig(retention_bytes=100)) == 1
    empty = SegmentStats(10, 10, 0, max_timestamp=-1)
    assert count(empty, LogConfig(retention_ms=0, retention_bytes=0)) == 1, "never an empty one"
    log_start_past_it = policy.retention_deletable_count(
        closed,
        active=expired,
        log_size_bytes=200,
        log_start_offset=20,
        high_watermark=20,
        config=LogConfig(),
        now_ms=1_000,
    )
    assert log_start_past_it == 1, "the log start offset never takes the active segment"
