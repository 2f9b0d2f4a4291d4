"""The leader's follower bookkeeping, with numbers for time: what the high watermark may rise to,
caught-up, ISR shrink/expand, the low watermark. (The high watermark itself:
test_partition_replica.)"""

from __future__ import annotations

from samsa.services.broker.replica.replication import LeaderReplication, high_watermark_within

LAG = 1000


def leader(now: int = 0) -> LeaderReplication:
    return LeaderReplication(leader_id=1, replicas=[1, 2, 3], now_ms=now)


def test_the_smallest_log_end_counts_the_leader_and_the_isr_followers_only():
    state = leader()
    assert state.smallest_log_end(10, [1, 2, 3]) == -1, "followers have not fetched"
    state.on_follower_fetch(2, 10, 10, now_ms=1)
    state.on_follower_fetch(3, 6, 10, now_ms=1)
    assert state.smallest_log_end(10, [1, 2, 3]) == 6
    assert state.smallest_log_end(10, [1, 2]) == 10, "3 is not in that ISR"
    assert state.smallest_log_end(8, [1, 2]) == 8, "nor is the leader's own end skipped"


def test_a_lagging_follower_leaves_the_isr_and_rejoins_once_caught_up():
    state = leader(now=0)
    common = {
        "replicas": [1, 2, 3],
        "eligible": {1, 2, 3},
        "epoch_start_offset": 0,
        "replica_fetch_ms": {},
        "high_watermark": 0,
    }
    state.on_follower_fetch(2, 5, 5, now_ms=100)
    state.on_follower_fetch(3, 0, 5, now_ms=100)
    assert (
        state.proposed_isr(isr=[1, 2, 3], now_ms=500, lag_max_ms=LAG, leader_end_offset=5, **common)
        is None
    )
    state.on_follower_fetch(2, 9, 9, now_ms=1500)  # 2 keeps up, 3 stays silent
    assert state.proposed_isr(
        isr=[1, 2, 3], now_ms=1500, lag_max_ms=LAG, leader_end_offset=9, **common
    ) == (1, 2)
    common["high_watermark"] = 9  # the ISR (1, 2) holds 9
    state.on_follower_fetch(3, 7, 9, now_ms=1600)  # fetched, but below the HW
    assert (
        state.proposed_isr(isr=[1, 2], now_ms=1600, lag_max_ms=LAG, leader_end_offset=9, **common)
        is None
    )
    state.on_follower_fetch(3, 9, 9, now_ms=1700)
    assert state.proposed_isr(
        isr=[1, 2], now_ms=1700, lag_max_ms=LAG, leader_end_offset=9, **common
    ) == (1, 2, 3)


def test_caught_up_means_holding_what_the_leader_had_at_the_previous_fetch():
    state = leader()
    state.on_follower_fetch(2, 0, 100, now_ms=0)  # behind: not caught up now
    state.on_follower_fetch(2, 100, 150, now_ms=800)  # has what existed at the previous fetch
    assert state.followers[2].last_caught_up_ms == 0
    state.on_follower_fetch(2, 150, 200, now_ms=1600)
    assert state.followers[2].last_caught_up_ms == 800


def test_fenced_or_not_yet_caught_up_replicas_never_join():
    state = leader()
    state.on_follower_fetch(3, 5, 5, now_ms=10)
    common = {
        "high_watermark": 5,
        "isr": [1],
        "replicas": [1, 2, 3],
        "now_ms": 20,
        "lag_max_ms": LAG,
        "leader_end_offset": 5,
        "replica_fetch_ms": {},
    }
    assert state.proposed_isr(eligible={1, 2}, epoch_start_offset=0, **common) is None
    assert state.proposed_isr(eligible={1, 2, 3}, epoch_start_offset=6, **common) is None
    assert state.proposed_isr(eligible={1, 2, 3}, epoch_start_offset=5, **common) == (1, 3)


def test_a_follower_high_watermark_is_capped_by_its_own_log():
    assert high_watermark_within(10, 0, 7) == 7
    assert high_watermark_within(4, 0, 7) == 4


def test_a_high_watermark_is_never_below_the_log_start():
    assert high_watermark_within(54, 61, 63) == 61


def test_a_follower_holding_the_whole_log_stays_caught_up_while_it_fetches_anything():
    """Fetch sessions name an idle partition in no request, so its own progress stands still:
    a follower that holds the whole log stays in the ISR while it fetches from this broker at
    all, and leaves once it stops fetching or the log grows past it."""
    state = leader(now=0)
    state.on_follower_fetch(2, 5, 5, now_ms=100)
    state.on_follower_fetch(3, 5, 5, now_ms=100)
    common = {
        "isr": [1, 2, 3],
        "replicas": [1, 2, 3],
        "eligible": {1, 2, 3},
        "high_watermark": 5,
    }
    fetching = {2: 5000, 3: 900}  # 2 fetched (other partitions) just now; 3 went silent
    proposal = state.proposed_isr(
        epoch_start_offset=0,
        now_ms=5000,
        lag_max_ms=LAG,
        leader_end_offset=5,
        replica_fetch_ms=fetching,
        **common,
    )
    assert proposal == (1, 2)
    # The log grew past 2: its fetches elsewhere no longer count for this partition, those
    # before (it was caught up at them, as the look at 5000 saw) until the lag has passed.
    fetching[2] = 6001
    proposal = state.proposed_isr(
        epoch_start_offset=0,
        now_ms=6000,
        lag_max_ms=LAG,
        leader_end_offset=6,
        replica_fetch_ms=fetching,
        **common,
    )
    assert proposal == (1, 2)
    proposal = state.proposed_isr(
        epoch_start_offset=0,
        now_ms=6001,
        lag_max_ms=LAG,
        leader_end_offset=6,
        replica_fetch_ms=fetching,
        **common,
    )
    assert proposal == (1,)


def test_the_low_watermark_is_the_smallest_isr_log_start_and_a_move_is_reported():
    state = leader()
    assert state.low_watermark(40, [1, 2, 3]) == -1, "followers have not reported a log start"
    assert not state.on_follower_fetch(2, 10, 10, now_ms=1, log_start_offset=0), "a first report"
    assert not state.on_follower_fetch(3, 10, 10, now_ms=1, log_start_offset=0)
    assert state.low_watermark(40, [1, 2, 3]) == 0
    assert state.on_follower_fetch(2, 10, 10, now_ms=2, log_start_offset=40), "a move"
    assert not state.on_follower_fetch(2, 10, 10, now_ms=3, log_start_offset=40), "no move"
    assert state.low_watermark(40, [1, 2, 3]) == 0, "follower 3 still starts at 0"
    assert state.low_watermark(40, [1, 2]) == 40, "only the ISR counts"
    assert state.low_watermark(30, [1, 2]) == 30, "nor is the leader's own start skipped"
