"""Goal: poll() shares max.poll.records among the partitions with buffered records in turn, so a
busy partition cannot hold back the records of another that were fetched before its own next
answer (Kafka's consumer hands out completed fetches in the order they arrived). Before, every
take started at the first assigned partition: a partition whose fetches kept refilling its buffer
as poll() emptied it was always served first, and the others got only what was left of a poll's
limit once per refill, their lag growing for as long as the first one was busy.

Method: the pure FetchState with hand-made fetch answers (test_client_fetch_state.py's helpers):
T0 and T1 both have records buffered; once T0's buffer is emptied by a take that stops on its
last record, T0 is fetched and refilled before the next take.
"""

from __future__ import annotations

from test_client_fetch_state import T0, T1, answer, at, batch, make, send


def test_a_refilled_partition_does_not_go_before_one_that_was_waiting() -> None:
    state = at(make(), {T0: 0, T1: 0})
    send(state)
    state.on_fetch_answer(1, answer(p0={"records": batch(0, 4)}))
    state.on_fetch_answer(2, answer(p1={"records": batch(0, 4)}))
    first = state.take(4)
    assert [(r.partition, r.offset) for r in first] == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert send(state) == {1: {T0: 4}}, "T0, emptied, is fetched again"
    state.on_fetch_answer(1, answer(p0={"records": batch(4, 4)}))

    second = state.take(4)
    assert [(r.partition, r.offset) for r in second] == [(1, 0), (1, 1), (1, 2), (1, 3)], (
        "T1's records, buffered before T0's new ones, come first"
    )
    third = state.take(4)
    assert [(r.partition, r.offset) for r in third] == [(0, 4), (0, 5), (0, 6), (0, 7)]


def test_a_take_that_stops_inside_a_partition_goes_on_with_it() -> None:
    state = at(make(), {T0: 0, T1: 0})
    send(state)
    state.on_fetch_answer(1, answer(p0={"records": batch(0, 4)}))
    state.on_fetch_answer(2, answer(p1={"records": batch(0, 2)}))
    assert [(r.partition, r.offset) for r in state.take(3)] == [(0, 0), (0, 1), (0, 2)]
    assert [(r.partition, r.offset) for r in state.take(3)] == [(0, 3), (1, 0), (1, 1)]
