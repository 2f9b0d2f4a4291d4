"""The history checker itself catches each break it exists for.

Goal: a checker that cannot fail proves nothing; each kind of violation (a lost ack, a value at
another offset than its ack said, a duplicate, a reorder within a producer) must be reported, and
a clean history must not be.

Method: small hand-made histories and stored partitions, no cluster.
"""

from __future__ import annotations

from history_checker import History, check, value_of
from txn_history_checker import PipelineReport, check_pipelines, copied


def history_of(acks: dict[bytes, tuple[int, int]]) -> History:
    history = History()
    for value, (partition, offset) in acks.items():
        history.record_sent()
        history.record_ack(value, partition, offset)
    return history


A, B, C = value_of(0, 0), value_of(0, 1), value_of(1, 0)


def test_a_clean_history_passes() -> None:
    report = check(
        history_of({A: (0, 0), B: (0, 1), C: (1, 0)}), {0: [(0, A), (1, B)], 1: [(0, C)]}
    )
    assert report.ok, report.summary()
    assert (report.records_sent, report.records_acked, report.records_stored) == (3, 3, 3)


def test_unacknowledged_values_may_be_stored_once() -> None:
    history = history_of({A: (0, 0)})
    history.record_sent()  # B: sent, outcome unknown
    assert check(history, {0: [(0, A), (1, B)]}).ok


def test_a_lost_ack_is_reported() -> None:
    assert check(history_of({A: (0, 0), B: (0, 1)}), {0: [(0, A)]}).lost == [B]


def test_a_value_at_another_offset_than_acked_is_lost() -> None:
    assert check(history_of({A: (0, 0)}), {0: [(0, B), (1, A)]}).lost == [A]


def test_a_duplicate_is_reported() -> None:
    report = check(history_of({A: (0, 0)}), {0: [(0, A), (1, A)]})
    assert report.duplicated == [A]


def test_a_reorder_within_a_producer_is_reported_but_not_across_producers() -> None:
    report = check(history_of({}), {0: [(0, B), (1, A), (2, C)]})
    assert report.reordered == [(B, A)]
    assert check(history_of({}), {0: [(0, C), (1, A)], 1: [(0, B)]}).ok


# --- transactional pipelines (txn_history_checker) ----------------------------------------------

X, Y, Z = b"in-0-0", b"in-0-1", b"in-1-0"


def pipeline_report(committed: list[tuple[int, int, bytes]], **changes: object) -> PipelineReport:
    arguments: dict[str, object] = {
        "inputs": {0: [X, Y], 1: [Z]},
        "committed_output": committed,
        "all_output": committed,
        "observed": committed,
        "offsets": {0: 2, 1: 1},
    }
    arguments.update(changes)
    return check_pipelines(**arguments)  # type: ignore[arg-type]


def test_a_clean_pipeline_history_passes() -> None:
    committed = [(0, 0, copied(X)), (0, 2, copied(Z)), (1, 0, copied(Y))]
    aborted = (1, 1, copied(Y))  # written by an aborted attempt, never read
    report = pipeline_report(committed, all_output=[*committed, aborted])
    assert report.ok, report.summary()
    assert report.aborted_outputs == 1 and report.committed_outputs == 3


def test_each_pipeline_violation_is_reported() -> None:
    committed = [(0, 0, copied(X)), (0, 2, copied(Z)), (1, 0, copied(Y))]
    missing = pipeline_report(committed[:2])
    assert missing.missing == [Y] and missing.offset_mismatch == [(0, 2, 1)]
    twice = pipeline_report([*committed, (1, 5, copied(Y))])
    assert twice.duplicated == [Y]
    leaked = pipeline_report(committed, observed=[*committed, (1, 1, copied(Y))])
    assert leaked.aborted_seen == [(1, 1, copied(Y))]
    ahead = pipeline_report(committed, offsets={0: 1, 1: 1})
    assert ahead.offset_mismatch == [(0, 1, 2)], "copies beyond the committed offset"
    stray = pipeline_report([*committed, (1, 9, b"junk")])
    assert stray.strays == [b"junk"]
    for report in (missing, twice, leaked, ahead, stray):
        assert not report.ok
