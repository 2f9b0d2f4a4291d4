"""Goal: with more partitions on one broker than one fetch may name, every partition keeps being
named, however long the consumer or follower runs. Two ways one was left out for ever:

- a broker keeping no session (session_id 0: its session cache is full) gets full fetches that
  hold nothing between them, but once every partition had been named once, the partitions that
  moved and then the first `limit` in order took every fetch: an idle partition left out of those
  was never fetched again, so records written to it later were never read;
- a follower names every partition outside the ISR in every fetch (`name_always`); past the limit
  the same `limit` of them (a set's order) took every fetch, so the others never caught up and
  stayed out of the ISR (after the restart of a broker leading more than the limit).

Method: the pure FetchSessionClient with the limit lowered to 2, over many fetches.
"""

from __future__ import annotations

import pytest

from samsa.common import limits
from samsa.common.fetch_session_client import FetchPosition, FetchSessionClient

LIMIT = 2
KEYS = [("t", number) for number in range(5)]
ROUNDS = 20


@pytest.fixture(autouse=True)
def small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "request_partitions_max", LIMIT)


def at(offset: int) -> FetchPosition:
    return FetchPosition(offset, -1, -1, 1024)


def _longest_wait(client: FetchSessionClient, session_id: int, moving: list) -> int:
    """The most fetches in a row (of ROUNDS) any key of KEYS went unnamed."""
    last = dict.fromkeys(KEYS, 0)
    longest = 0
    for request in range(1, ROUNDS + 1):
        for key in moving:
            client.set(key, at(request))
        parts = client.build()
        assert len(parts.partitions) + len(parts.forgotten) <= LIMIT
        for key in parts.partitions:
            last[key] = request
        client.on_answer(parts, session_id=session_id)
        longest = max(longest, *(request - named for named in last.values()))
    return longest


def test_a_broker_keeping_no_session_has_every_partition_named_in_turn() -> None:
    client = FetchSessionClient()
    for key in KEYS:
        client.set(key, at(0))
    # One partition has news after every fetch; the others are idle.
    assert _longest_wait(client, 0, KEYS[:1]) <= 3


def test_partitions_named_always_past_the_limit_are_named_in_turn() -> None:
    client = FetchSessionClient()
    for key in KEYS:
        client.set(key, at(0))
        client.name_always(key, True)
    assert _longest_wait(client, 7, []) <= 3


def test_partitions_that_moved_are_named_while_more_than_the_limit_are_named_always() -> None:
    """One partition in the ISR keeps moving while the other four are outside it."""
    client = FetchSessionClient()
    for key in KEYS:
        client.set(key, at(0))
        client.name_always(key, key != KEYS[0])
    assert _longest_wait(client, 7, KEYS[:1]) <= 5


def test_exactly_the_limit_is_named_in_every_fetch_and_never_more() -> None:
    """A fetcher of exactly the limit: every fetch names all it must, and long-polls."""
    client = FetchSessionClient()
    keys = KEYS[:LIMIT]
    for key in keys:
        client.set(key, at(0))
        client.name_always(key, True)
    for request in range(1, 5):
        parts = client.build()
        assert set(parts.partitions) == set(keys) and not parts.more
        client.on_answer(parts, session_id=7 if request > 1 else 0)
        for key in keys:
            client.set(key, at(request))
    client.reset()
    parts = client.build()
    assert parts.full and set(parts.partitions) == set(keys) and not parts.more


def test_a_follower_naming_always_more_than_the_limit_still_long_polls_when_idle() -> None:
    """Past the limit, partitions named always take turns: once each has been named since the
    last long-poll, the next fetch long-polls (`more` false), or an idle follower outside the
    ISR of more partitions than one fetch may name would fetch without waiting for ever."""
    client = FetchSessionClient()
    for key in KEYS:
        client.set(key, at(0))
        client.name_always(key, True)
    parts = client.build()
    client.on_answer(parts, session_id=7)
    waits = []
    for _ in range(ROUNDS):
        parts = client.build()
        waits.append(not parts.more)
        client.on_answer(parts, session_id=7)
    # Five partitions, two a fetch: a round of three fetches names them all and then waits.
    assert all(any(waits[start : start + 3]) for start in range(ROUNDS - 2))


def test_a_moved_partition_left_out_past_the_limit_is_fetched_at_once() -> None:
    """A position that changed and did not fit still makes the fetch say `more`."""
    client = FetchSessionClient()
    for key in KEYS:
        client.set(key, at(0))
    parts = client.build()
    client.on_answer(parts, session_id=7)
    for key in KEYS:
        client.set(key, at(1))
    parts = client.build()
    assert len(parts.partitions) == LIMIT and parts.more


@pytest.mark.parametrize("answered_before_reset", [2, 5])
def test_the_full_fetch_after_a_reset_says_more_when_it_leaves_partitions_out(
    answered_before_reset: int,
) -> None:
    """A failed request or a session error (`reset`) makes the next fetch a full one opening a
    new session with only `limit` of the partitions: the others are in no session, so it must
    say `more` (not long-poll, 500 ms for a follower) however many the old session's round had
    named before the reset."""
    client = FetchSessionClient()
    for key in KEYS:
        client.set(key, at(0))
        client.name_always(key, True)
    for _ in range(answered_before_reset):
        client.on_answer(client.build(), session_id=7)
    client.reset()
    parts = client.build()
    assert parts.full and len(parts.partitions) == LIMIT
    assert parts.more, "three partitions are in no session yet"
