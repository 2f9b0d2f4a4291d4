"""Goal: `samsa groups reset-offsets` plans (group_admin.plan_offset_resets) move each partition
as Kafka's kafka-consumer-groups.sh does for every strategy, clamped to the log, sorted, and
saying where nothing was committed; offset deletion names partitions per topic and reads each
outcome.

Method: the pure functions of samsa.client.group_admin on hand-made offsets and answers.
"""

from __future__ import annotations

from typing import Any

import pytest

from samsa.client.group_admin import (
    GroupError,
    OffsetReset,
    deleted_offsets_of,
    offset_delete_request,
    plan_offset_resets,
)
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as c

TP0, TP1 = ("t", 0), ("t", 1)
EARLIEST = {TP0: 10, TP1: 0}
LATEST = {TP0: 100, TP1: 50}


def _plan(strategy: str, value: int = 0, **kwargs: Any) -> list[tuple[int, int]]:
    committed = kwargs.pop("committed", {TP0: 40, TP1: 45})
    plan = plan_offset_resets(
        [TP1, TP0], committed, EARLIEST, LATEST, strategy, value, kwargs.get("found")
    )
    return [(r.current_offset, r.new_offset) for r in plan]


def test_reset_to_the_ends_of_the_log() -> None:
    assert _plan("to-earliest") == [(40, 10), (45, 0)]
    assert _plan("to-latest") == [(40, 100), (45, 50)]


def test_reset_to_an_offset_is_clamped_to_the_log() -> None:
    assert _plan("to-offset", 30) == [(40, 30), (45, 30)]
    assert _plan("to-offset", 5) == [(40, 10), (45, 5)]
    assert _plan("to-offset", 70) == [(40, 70), (45, 50)]


def test_a_clamped_offset_keeps_the_one_chosen_before() -> None:
    plan = plan_offset_resets([TP0, TP1], {}, EARLIEST, LATEST, "to-offset", 70)
    assert [r.clamped_from for r in plan] == [None, 70]  # 70 is in TP0's log, past TP1's end
    plan = plan_offset_resets([TP0], {TP0: 40}, EARLIEST, LATEST, "shift-by", -35)
    assert plan == [OffsetReset("t", 0, 40, 10, clamped_from=5)]


def test_shift_by_moves_from_the_committed_offset_and_is_clamped() -> None:
    assert _plan("shift-by", -35) == [(40, 10), (45, 10)]
    assert _plan("shift-by", 10) == [(40, 50), (45, 50)]
    with pytest.raises(ValueError, match="no committed offset"):
        _plan("shift-by", 1, committed={TP0: 40})


def test_reset_to_a_time_goes_to_the_log_end_where_no_record_is_that_late() -> None:
    assert _plan("to-datetime", 123, found={TP0: 60, TP1: None}) == [(40, 60), (45, 50)]


def test_reset_from_a_file_takes_each_partitions_offset_clamped() -> None:
    assert _plan("from-file", found={TP0: 70, TP1: 5}) == [(40, 70), (45, 5)]
    assert _plan("from-file", found={TP0: 200, TP1: 0}) == [(40, 100), (45, 0)]


def test_reset_to_current_keeps_what_is_committed_and_takes_the_log_end_elsewhere() -> None:
    assert _plan("to-current") == [(40, 40), (45, 45)]
    assert _plan("to-current", committed={TP0: 40}) == [(40, 40), (-1, 50)]


def test_a_plan_is_sorted_and_says_where_nothing_was_committed() -> None:
    plan = plan_offset_resets([TP1, TP0], {}, EARLIEST, LATEST, "to-earliest")
    assert plan == [OffsetReset("t", 0, -1, 10), OffsetReset("t", 1, -1, 0)]
    with pytest.raises(ValueError, match="unknown reset strategy"):
        plan_offset_resets([TP0], {}, EARLIEST, LATEST, "to-nowhere")


def test_offset_delete_names_partitions_per_topic_and_reads_each_outcome() -> None:
    request = offset_delete_request("g", [("t", 1), ("u", 0), ("t", 0), ("t", 1)])
    assert [(t.topic, list(t.partitions)) for t in request.topics] == [("t", [0, 1]), ("u", [0])]
    answer = c.OffsetDeleteResponse(
        partitions=[
            c.OffsetDeletePartition(topic="t", partition=0),
            c.OffsetDeletePartition(
                topic="u",
                partition=0,
                error_code=ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,  # type: ignore[arg-type]
                error_message="a member of group 'g' subscribes to 'u'",
            ),
        ]
    )
    outcomes = deleted_offsets_of(answer)
    assert outcomes[("t", 0)] is None
    refused = outcomes[("u", 0)]
    assert refused is not None and refused.code is ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
    assert "subscribes to 'u'" in str(refused)
    missing = c.OffsetDeleteResponse(
        error_code=ErrorCode.GROUP_ID_NOT_FOUND,  # type: ignore[arg-type]
        error_message="group 'g' does not exist",
    )
    with pytest.raises(GroupError, match="does not exist"):
        deleted_offsets_of(missing)
