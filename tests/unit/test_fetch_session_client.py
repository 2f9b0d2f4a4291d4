"""Goal: the fetcher's side of a fetch session names exactly what changed. Full fetches name
everything and open a session; incremental ones name only positions that differ from what the
broker holds, plus partitions to forget; an answer settles only what it carried (a position that
moved while the request was out is named again); a reset goes back to a full fetch.

Method: FetchSessionClient driven directly (it is pure).
"""

from __future__ import annotations

from samsa.common.fetch_session_client import FetchPosition, FetchSessionClient, fetch_request

A, B, C = ("t", 0), ("t", 1), ("u", 0)


def at(offset: int) -> FetchPosition:
    return FetchPosition(offset, 3, 2, 1024)


def opened(*keys: tuple[str, int]) -> FetchSessionClient:
    client = FetchSessionClient()
    for key in keys:
        client.set(key, at(0))
    parts = client.build()
    assert parts.full and parts.session_epoch == 0 and set(parts.partitions) == set(keys)
    client.on_answer(parts, session_id=77)
    return client


def test_an_open_session_names_nothing_until_a_position_moves() -> None:
    client = opened(A, B, C)
    parts = client.build()
    assert not parts.full and parts.session_id == 77 and parts.session_epoch == 1
    assert parts.partitions == {} and parts.forgotten == ()
    client.on_answer(parts, 77)
    client.set(B, at(5))
    client.set(A, at(0))  # unchanged: not named
    parts = client.build()
    assert parts.partitions == {B: at(5)} and parts.session_epoch == 2
    client.on_answer(parts, 77)
    assert client.build().partitions == {}


def test_forgetting_names_the_partition_once_and_only_if_the_broker_holds_it() -> None:
    client = opened(A, B)
    client.set(B, None)
    client.set(C, None)  # never sent: nothing to forget
    parts = client.build()
    assert parts.forgotten == (B,) and parts.partitions == {}
    client.on_answer(parts, 77)
    assert client.build().forgotten == () and client.sent(B) is None


def test_a_position_that_moves_while_the_request_is_out_is_named_again() -> None:
    client = opened(A)
    client.set(A, at(5))
    parts = client.build()
    client.set(A, at(9))  # the follower appended more before the answer came
    client.on_answer(parts, 77)
    assert client.sent(A) == at(5)
    assert client.build().partitions == {A: at(9)}


def test_a_reset_or_a_broker_without_sessions_means_full_fetches() -> None:
    client = opened(A, B)
    client.reset()
    parts = client.build()
    assert parts.full and parts.session_id == 77 and set(parts.partitions) == {A, B}
    client.on_answer(parts, session_id=0)  # the broker's cache is full
    again = client.build()
    assert again.full and again.session_id == 0 and set(again.partitions) == {A, B}


def test_epochs_wrap_to_one() -> None:
    client = opened(A)
    client.next_epoch = 2**31 - 1
    parts = client.build()
    client.on_answer(parts, 77)
    assert client.next_epoch == 1


def test_partitions_named_always_are_in_every_incremental_request() -> None:
    client = opened(A, B)
    client.name_always(B, True)
    for _ in range(3):
        parts = client.build()
        assert parts.partitions == {B: at(0)}
        client.on_answer(parts, 77)
    client.name_always(B, False)
    assert client.build().partitions == {}


def test_a_followers_log_start_is_named_when_it_moves_and_sent_when_known() -> None:
    client = opened(A)
    client.set(A, FetchPosition(0, 3, 2, 1024, log_start_offset=40))
    parts = client.build()
    assert parts.partitions == {A: FetchPosition(0, 3, 2, 1024, 40)}, "a moved log start is news"
    request = fetch_request(parts, replica_id=2)
    assert request.topics[0].partitions[0].log_start_offset == 40


def test_a_new_topic_id_names_the_partition_again_under_that_id() -> None:
    """KIP-516: a position carries its topic's id; a new id (the topic was deleted and created
    again) is a new position, named in the next incremental fetch under it, and partitions of
    one name whose ids differ for a moment go in two TopicData entries, each named once."""
    old_id, new_id = b"\x0a" * 16, b"\x0b" * 16
    client = FetchSessionClient()
    for key in (A, B):
        client.set(key, FetchPosition(0, 3, 2, 1024, topic_id=old_id))
    parts = client.build()
    request = fetch_request(parts)
    assert [(t.name, t.topic_id, len(t.partitions)) for t in request.topics] == [("t", old_id, 2)]
    client.on_answer(parts, session_id=77)
    client.set(A, FetchPosition(0, 3, 2, 1024, topic_id=new_id))
    parts = client.build()
    assert not parts.full and set(parts.partitions) == {A}
    request = fetch_request(parts)
    assert [(t.name, t.topic_id) for t in request.topics] == [("t", new_id)]
    client.reset()
    named = {
        (t.topic_id, p.partition)
        for t in fetch_request(client.build()).topics
        for p in t.partitions
    }
    assert named == {(new_id, 0), (old_id, 1)}
