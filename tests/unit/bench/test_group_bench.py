"""Goal: the consumer-group benchmark's figures mean what its tables say — medians over the runs
that produced a figure, group over assign() in the ratio column and the 90 % target, a join that
counts only once every member owns its even share, and a takeover that counts only survivors'
events after the kill or the close() — and a failed run or scenario carries its reason into its
cells instead of losing the others.

Method: the pure summaries and table builders run on hand-made runs and member events with known
answers (no cluster, no process, no clock).
"""

from __future__ import annotations

import pytest

from bench import group_tables as gt
from bench.group_member_proc import MemberEvent, is_balanced, owned_by, takeover_s

QUICK = gt.Plan.for_run(quick=True)


def _run(records_per_s: float, first_record_ms: float = 50.0) -> gt.ConsumeRun:
    return gt.ConsumeRun(
        records=1000,
        size=100,
        elapsed_s=1000 / records_per_s,
        first_record_s=first_record_ms / 1000,
        first_batch=200,
        steady_s=0.5,
    )


def _lines(text: str, label: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(label)]


def test_quick_divides_the_record_counts_by_five_and_keeps_two_runs_each() -> None:
    full = gt.Plan.for_run(quick=False)
    assert {size: count // 5 for size, count in full.records.items()} == QUICK.records
    assert full.end_to_end_records == 1000 and QUICK.end_to_end_records == 200
    assert QUICK.rounds >= 2 and full.rounds >= 2


def test_median_takes_the_figures_and_passes_a_reason_on_only_when_there_is_none() -> None:
    assert gt.median_cell([3.0, "failed: OSError", 1.0, 2.0]) == 2.0
    assert gt.median_cell([4.0, 1.0]) == 2.5
    assert gt.median_cell(["failed: A", "failed: B"]) == "failed: A"
    assert gt.median_cell([]) == "n/a (no run)"


def test_a_run_rate_counts_from_the_first_poll_and_its_steady_rate_after_the_first_batch() -> None:
    run = gt.ConsumeRun(1000, 100, elapsed_s=0.5, first_record_s=0.1, first_batch=200, steady_s=0.4)
    assert run.records_per_s == 2000.0
    assert run.steady_records_per_s == 2000.0  # 800 records after the first batch in 0.4 s
    one_batch = gt.ConsumeRun(1000, 100, elapsed_s=0.5, first_record_s=0.1, first_batch=1000)
    assert one_batch.steady_records_per_s == "n/a (one batch)"


def test_consumption_table_shows_each_run_the_medians_and_group_over_assign() -> None:
    runs = {
        gt.ASSIGN: [_run(100_000.0, 40.0), _run(110_000.0, 60.0), _run(90_000.0, 50.0)],
        gt.GROUP: [_run(95_000.0, 400.0), _run(99_000.0), _run(60_000.0)],
    }
    text = gt.consumption_table(100, gt.Plan.for_run(quick=False), runs)
    header = text.splitlines()[1].split()
    assert header[:2] == ["group", "assign"] and header[2] == "group/assign"
    (median,) = _lines(text, "median records/s")
    assert median.split()[2:] == ["95,000", "100,000", "0.95x"]
    (first,) = _lines(text, "median first record ms")
    assert first.split()[4:6] == ["50", "50"]  # the group's 400 ms is not the median
    assert len(_lines(text, "run ")) == 3
    assert "met (0.95x)" in text


def test_a_failed_group_run_is_a_note_and_the_target_reads_the_other_runs() -> None:
    runs = {
        gt.ASSIGN: [_run(100_000.0), _run(100_000.0)],
        gt.GROUP: ["failed: KafkaError: not coordinator", _run(80_000.0)],
    }
    text = gt.consumption_table(100, QUICK, runs)
    (run_1,) = _lines(text, "run 1 records/s")
    assert "see note 1" in run_1 and run_1.split()[-1] == "n/a"
    assert "note 1: failed: KafkaError: not coordinator" in text
    assert "missed (0.80x)" in text


def test_balanced_means_every_partition_once_and_even_shares() -> None:
    shares = {"a": {0, 1, 2}, "b": {3, 4, 5}, "c": {6, 7, 8}, "d": {9, 10, 11}}
    assert is_balanced(shares, 12)
    assert not is_balanced(shares | {"d": {9, 10, 11, 0}}, 12)  # partition 0 owned twice
    assert not is_balanced(shares | {"d": {9, 10}}, 12)  # partition 11 unowned
    assert not is_balanced({"a": set(range(5)), "b": set(range(5, 12))}, 12)  # 5 and 7
    assert is_balanced({"a": {0, 1, 2, 3}, "b": {4, 5, 6, 7}, "c": {8, 9, 10}}, 11)
    assert not is_balanced({}, 12)
    assert not is_balanced({"a": set(), "b": set(range(12))}, 12)


def test_join_time_ends_at_the_last_listener_call_before_the_group_settled() -> None:
    calls = [10.04, 10.05, 10.56, 10.62, 12.3, 12.31]  # the last two: revoked by close()
    assert gt.join_time_s(calls, [10.01, 10.0, 10.02, 10.0], settled_at=12.2) == pytest.approx(0.62)
    with pytest.raises(RuntimeError, match="no listener call"):
        gt.join_time_s([12.3], [10.0], settled_at=12.2)


def test_join_table_gives_each_round_the_median_and_the_median_in_heartbeats() -> None:
    text = gt.join_table([2.0, "failed: TimeoutError", 1.0], 0.25)
    assert _lines(text, "round 1 join ms")[0].split()[-1] == "2,000"
    assert "see note 1" in _lines(text, "round 2 join ms")[0]
    assert _lines(text, "median join ms")[0].split()[-1] == "1,500"
    assert _lines(text, "heartbeat interval ms")[0].split()[-1] == f"{gt.HEARTBEAT_INTERVAL_MS}"
    assert _lines(text, "median in heartbeats")[0].split()[-1] == "3.0"
    assert "owned its partition after 250 ms" in text


def _event(member: str, kind: str, t: float, *partitions: int) -> MemberEvent:
    return MemberEvent(member, kind, t, partitions)


def test_takeover_counts_survivors_events_after_the_kill_until_the_last_partition() -> None:
    events = [
        _event("m1", "consumed", 1.0, 0, 1),  # before the kill: not a takeover
        _event("m2", "consumed", 5.0, 0),  # the victim itself: not a survivor
        _event("m3", "consumed", 12.0, 0),
        _event("m3", "consumed", 12.5, 0),  # only the first after the kill counts
        _event("m1", "consumed", 14.0, 1, 7),  # partition 7 was not the victim's
    ]
    survivors = {"m1", "m3"}
    assert takeover_s(events, 10.0, {0, 1}, survivors, "consumed") == 4.0
    assert takeover_s(events[:4], 10.0, {0, 1}, survivors, "consumed") is None
    assert takeover_s(events, 10.0, {0, 1}, survivors, "assigned") is None
    assert takeover_s(events, 10.0, set(), survivors, "consumed") is None


def test_owned_is_each_members_last_reported_assignment() -> None:
    events = [
        _event("m1", "assignment", 1.0, *range(12)),
        _event("m1", "revoked", 2.0, 6, 7),
        _event("m2", "assignment", 2.5, 6, 7),
        _event("m1", "assignment", 3.0, 0, 1, 2, 3, 4, 5),
    ]
    assert owned_by(events) == {"m1": frozenset(range(6)), "m2": frozenset({6, 7})}


def test_failover_table_puts_the_kill_beside_the_leave_and_carries_reasons() -> None:
    kill = {"partitions": 4.0, "assigned_ms": 6036.0, "consumed_ms": 6165.0}
    kill |= {"close_ms": "n/a (killed)", "session_ms": 6000.0}
    leave = {"partitions": 4.0, "assigned_ms": 468.0, "consumed_ms": 488.0, "session_ms": 6000.0}
    text = gt.failover_table({"kill": kill, "leave": leave | {"close_ms": 78.0}})
    assert text.splitlines()[1].split()[0] == gt.KILL
    assert _lines(text, "-> all consumed ms")[0].split()[-2:] == ["6,165", "488"]
    assert _lines(text, "close() took ms")[0].split()[-3:] == ["n/a", "(killed)", "78"]
    failed = gt.failover_table({"kill": "failed: RuntimeError: member-2 went away", "leave": leave})
    assert "see note 1" in _lines(failed, "partitions moved")[0]
    assert "note 1: failed: RuntimeError: member-2 went away" in failed


def test_latency_table_is_group_over_assign_on_the_medians_of_the_runs() -> None:
    results = {
        gt.ASSIGN: [{"p50_us": 5000.0, "p99_us": 10_000.0}, {"p50_us": 3000.0, "p99_us": 8000.0}],
        gt.GROUP: [{"p50_us": 4400.0, "p99_us": 8100.0}, "failed: RuntimeError: no record"],
    }
    text = gt.latency_table(results, QUICK)
    assert _lines(text, "produce->consume p50 µs")[0].split()[-3:] == ["4,400", "4,000", "1.10x"]
    assert _lines(text, "produce->consume p99 µs")[0].split()[-1] == "0.90x"
    assert "200 records" in text.splitlines()[0]
    assert "every run, p50/p99 µs: assign 5,000/10,000 / 3,000/8,000; group 4,400/8,100" in text
    assert "failed: RuntimeError: no record" in text  # the failed run is named, not hidden
