"""Goal: a fetcher of more partitions than one request may name still long-polls an idle broker
that keeps no session. Since c9f2a71 every full fetch to a broker with no session left (session_id
0: its cache is full) names `limit` partitions and says it left some out (`FetchParts.more`), and
both the consumer (fetch_sessions.py) and the follower (replica_fetcher._request) then send
max_wait_ms=0. Nothing ever clears `more` there, so with nothing to read they fetch in a busy
loop, each request naming `limit` partitions (10,000 by default), for as long as the broker's
cache stays full: the opposite of "an idle partition costs nothing" (DESIGN.md section 4).
Now `more` holds only until every partition has been named since the last long-poll. A broker
keeping sessions sees the same fetches as before, and partitions named always (a follower's
outside the ISR) keep one fixed rotation (they went last in a set's order, by hash).

Method: the pure FetchSessionClient (and the consumer's BrokerFetchSessions over it), limit
lowered to 2, five partitions, every fetch answered with session_id 0 (or 7: a session).
"""

from __future__ import annotations

import pytest

from samsa.client.fetch_sessions import BrokerFetchSessions
from samsa.common import limits
from samsa.common.fetch_session_client import FetchPosition, FetchSessionClient
from samsa.v1 import broker_pb2

LIMIT = 2
KEYS = [("t", number) for number in range(5)]
ROUNDS = 20
ROUND_FETCHES = -(-len(KEYS) // LIMIT)  # fetches naming every partition once: 3


@pytest.fixture(autouse=True)
def small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "request_partitions_max", LIMIT)


def at(offset: int) -> FetchPosition:
    return FetchPosition(offset, -1, -1, 1024)


def test_an_idle_fetcher_to_a_broker_keeping_no_session_long_polls_once_a_round() -> None:
    client = FetchSessionClient()
    for key in KEYS:
        client.set(key, FetchPosition(0, -1, -1, 1024))
    long_polls = 0
    for _ in range(ROUNDS):
        parts = client.build()
        assert parts.full and len(parts.partitions) <= LIMIT
        long_polls += not parts.more
        client.on_answer(parts, session_id=0)
    assert long_polls >= ROUNDS // 3 - 1, f"{long_polls} of {ROUNDS} idle fetches long-polled"


@pytest.mark.parametrize("moving", [0, 1, len(KEYS)])
def test_without_a_session_every_partition_is_named_between_two_long_polls(moving: int) -> None:
    """A long-poll ends each round of ROUND_FETCHES fetches, and only once every partition was
    named in it, however many partitions have news after each fetch."""
    client = FetchSessionClient()
    for key in KEYS:
        client.set(key, at(0))
    named_in_round: set[tuple[str, int]] = set()
    fetches_in_round = 0
    for request in range(1, ROUNDS + 1):
        for key in KEYS[:moving]:
            client.set(key, at(request))
        parts = client.build()
        named_in_round |= parts.partitions.keys()
        fetches_in_round += 1
        if not parts.more:
            assert named_in_round == set(KEYS), f"long-polled before naming all: {request}"
            assert fetches_in_round == ROUND_FETCHES
            named_in_round.clear()
            fetches_in_round = 0
        assert fetches_in_round < ROUND_FETCHES, f"no long-poll by fetch {request}"
        client.on_answer(parts, session_id=0)


def test_the_consumer_long_polls_a_broker_keeping_no_session_once_a_round() -> None:
    sessions = BrokerFetchSessions(partition_max_bytes=1024)
    offsets = dict.fromkeys(KEYS, 0)
    waits = []
    for _ in range(2 * ROUND_FETCHES):
        request, parts = sessions.request(1, offsets, {}, max_wait_ms=500)
        waits.append(request.max_wait_ms)
        sessions.on_answer(1, parts, broker_pb2.FetchResponse(session_id=0))
    assert waits == [0, 0, 500] * 2


def test_a_broker_keeping_sessions_gets_the_same_fetches_as_before() -> None:
    """The full fetch opens the session with the first LIMIT, incremental fetches add the
    rest without a wait, then every fetch long-polls, naming nothing while all is idle."""
    client = FetchSessionClient()
    for key in KEYS:
        client.set(key, at(0))
    fetches = []
    for _ in range(5):
        parts = client.build()
        fetches.append((parts.full, list(parts.partitions), parts.more))
        client.on_answer(parts, session_id=7)
    assert fetches == [
        (True, KEYS[0:2], True),
        (False, KEYS[2:4], True),
        (False, KEYS[4:5], False),
        (False, [], False),
        (False, [], False),
    ]


def test_partitions_named_always_past_the_limit_take_turns_in_one_fixed_order() -> None:
    """Five partitions outside the ISR, two a fetch: in the order they were named always."""
    client = FetchSessionClient()
    for key in KEYS:
        client.set(key, at(0))
        client.name_always(key, True)
    named = []
    for _ in range(ROUNDS):
        parts = client.build()
        named += parts.partitions
        client.on_answer(parts, session_id=7)
    assert named == (KEYS * ROUNDS)[: LIMIT * ROUNDS]
