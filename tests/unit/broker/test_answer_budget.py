"""Goal: the answer budget (answer_budget.py) never lets the bytes held pass its capacity, grants
what there is room for, serves waiting fetches in arrival order without letting newcomers jump
the line, and returns to zero once every answer is released.

Method: the pure core driven by hand, and a dumb reference (a list of holds) checked against it
over random sequences of reserve, release, wait and leave.
"""

from __future__ import annotations

import random

import pytest

from samsa.services.broker.requests.answer_budget import AnswerBudget


def test_a_grant_is_what_there_is_room_for_and_a_release_gives_it_back() -> None:
    budget = AnswerBudget(100)
    assert budget.reserve(60) == 60
    assert budget.reserve(60) == 40, "the rest of the room: a smaller answer, not a refusal"
    assert budget.reserve(10) == 0, "no room left"
    assert budget.held_bytes == 100
    budget.release(60)
    assert budget.room_bytes() == 60
    budget.release(40)
    assert budget.held_bytes == 0


def test_hold_takes_exactly_what_a_pass_read_within_its_room() -> None:
    budget = AnswerBudget(100)
    room = budget.room_bytes()
    assert budget.hold(room) == 100
    with pytest.raises(AssertionError):
        budget.hold(1)  # more than the room: a reader that ignored it is a bug
    with pytest.raises(AssertionError):
        budget.release(101)  # more than is held: a double release is a bug


def test_waiting_fetches_are_served_in_arrival_order() -> None:
    budget = AnswerBudget(100)
    budget.hold(90)
    first = budget.wait(50)
    second = budget.wait(5)
    assert budget.ready() is None, "the first needs 50; 10 are free"
    assert budget.room_bytes() == 0, "a newcomer goes behind those waiting, even a small one"
    assert budget.room_bytes(second) == 0, "the second waits for the first"
    budget.release(40)
    assert budget.ready() == first
    assert budget.room_bytes(first) == 50
    budget.hold(50, first)
    budget.leave(first)
    assert budget.ready() is None, "nothing is free for the second yet"
    budget.release(50)
    assert budget.ready() == second
    budget.leave(second)
    assert budget.room_bytes() == 50, "nobody waits: anyone gets the free bytes again"


def test_a_ticket_keeps_its_place_when_its_need_changes() -> None:
    budget = AnswerBudget(100)
    budget.hold(100)
    first = budget.wait(1)
    second = budget.wait(1)
    assert budget.wait(70, first) == first, "woken with room 1, its batch needs 70: it stays first"
    assert list(budget.waiting) == [first, second]
    budget.release(30)
    assert budget.ready() is None, "the first needs 70 and the second may not pass it"


def test_a_need_is_capped_at_the_capacity_so_the_first_in_line_is_always_served() -> None:
    budget = AnswerBudget(100)
    ticket = budget.wait(10**9)
    assert budget.waiting[ticket] == 100
    assert budget.ready() == ticket, "an idle budget serves any need"


def test_leaving_is_idempotent_and_a_left_ticket_no_longer_blocks_others() -> None:
    budget = AnswerBudget(100)
    budget.hold(100)
    gone = budget.wait(10)
    budget.leave(gone)
    budget.leave(gone)
    budget.release(100)
    assert budget.room_bytes() == 100
    assert budget.ready() is None


@pytest.mark.parametrize("seed", range(20))
def test_random_sequences_match_a_dumb_reference(seed: int) -> None:
    rng = random.Random(seed)
    capacity = rng.randint(1, 1000)
    budget = AnswerBudget(capacity)
    holds: list[int] = []  # the reference: every grant not yet released
    line: list[int] = []  # tickets in arrival order
    for _ in range(500):
        action = rng.choice(["reserve", "release", "wait", "leave"])
        ticket = rng.choice([None, *line[:1]])
        if action == "reserve":
            wanted = rng.randint(0, capacity)
            room = capacity - sum(holds) if not line or ticket == line[0] else 0
            granted = budget.reserve(wanted, ticket)
            assert granted == min(wanted, room), f"seed {seed}"
            holds.append(granted)
        elif action == "release" and holds:
            budget.release(holds.pop(rng.randrange(len(holds))))
        elif action == "wait":
            line.append(budget.wait(rng.randint(1, 2 * capacity)))
        elif action == "leave" and line:
            budget.leave(line.pop(rng.randrange(len(line))))
        assert 0 <= budget.held_bytes == sum(holds) <= capacity, f"seed {seed}"
        assert list(budget.waiting) == line, f"seed {seed}"
        ready = budget.ready()
        if ready is not None:
            assert ready == line[0] and budget.waiting[ready] <= budget.free_bytes
    for size in holds:
        budget.release(size)
    assert budget.held_bytes == 0, f"seed {seed}: every hold released leaves nothing held"
