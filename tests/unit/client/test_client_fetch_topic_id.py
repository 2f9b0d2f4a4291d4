"""Goal: the consumer's fetch state follows topic ids (KIP-516). Fetches name each topic's id
from the metadata; UNKNOWN_TOPIC_ID (a broker hosting another topic of that name) is retried
after a metadata refresh, never raised by poll(); and a topic whose id changes in the metadata
(deleted and created again) has its partitions reset per auto.offset.reset, since offsets read
in the old topic mean nothing in the new one — once per change, never for the first id seen or
for a refreshed view showing the same id.

Method: drive the pure FetchState (and TopicIdentities) with hand-made metadata views and answers,
numbers for time, as test_client_fetch_state.py does.
"""

from __future__ import annotations

import pytest

from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import EARLIEST, FetchState
from samsa.common.errors import ErrorCode, OffsetOutOfRangeError
from samsa.v1 import broker_pb2

T0, T1, U0 = ("t", 0), ("t", 1), ("u", 0)
OLD_ID, NEW_ID, U_ID = b"\x0a" * 16, b"\x0b" * 16, b"\x0c" * 16
LEADERS = {T0: 1, T1: 1, U0: 1}
NOW = 1_000


def make(reset: str = "earliest") -> FetchState:
    config = {"bootstrap.servers": "localhost:9092", "auto.offset.reset": reset}
    state = FetchState(ConsumerConfig.from_dict(config))
    state.assign([T0, T1, U0])
    for tp, offset in ((T0, 3), (T1, 7), (U0, 9)):
        state.seek(tp, offset)
    return state


def plan(state: FetchState, topic_ids: dict[str, bytes]) -> dict[tuple[str, int], bytes]:
    """Send what is due and answer it empty; the topic id each partition was fetched under."""
    requests = state.fetches_to_send(LEADERS, NOW, None, topic_ids).requests
    named = {}
    for node, request in requests:
        for topic in request.topics:
            for wanted in topic.partitions:
                named[(topic.name, wanted.partition)] = topic.topic_id
        state.on_fetch_answer(node, broker_pb2.FetchResponse())
    return named


def test_fetches_name_the_metadatas_topic_ids() -> None:
    state = make()
    assert plan(state, {"t": OLD_ID, "u": U_ID}) == {T0: OLD_ID, T1: OLD_ID, U0: U_ID}


def test_a_new_view_with_the_same_ids_keeps_the_positions() -> None:
    state = make()
    plan(state, {"t": OLD_ID, "u": U_ID})
    plan(state, {"t": OLD_ID, "u": U_ID})  # a refresh: another dict, the same ids
    assert state.positions() == {T0: 3, T1: 7, U0: 9}


def test_a_changed_id_resets_that_topics_partitions_per_auto_offset_reset() -> None:
    state = make()
    plan(state, {"t": OLD_ID, "u": U_ID})
    named = plan(state, {"t": NEW_ID, "u": U_ID})
    assert state.positions() == {U0: 9}, "the re-created topic's old offsets are dropped"
    assert T0 not in named and T1 not in named, "not fetched from the old offsets"
    lookups = state.offsets_to_look_up()
    assert {tp: spec for tp, (spec, _) in lookups.items()} == {T0: EARLIEST, T1: EARLIEST}
    state.on_offsets_found({tp: (token, 0) for tp, (_, token) in lookups.items()})
    named = plan(state, {"t": NEW_ID, "u": U_ID})
    assert (named[T0], named[T1]) == (NEW_ID, NEW_ID)
    plan(state, {"t": NEW_ID, "u": U_ID})
    assert state.positions() == {T0: 0, T1: 0, U0: 9}, "reset once per change"


def test_with_auto_offset_reset_none_the_next_poll_raises() -> None:
    state = make("none")
    plan(state, {"t": OLD_ID})
    plan(state, {"t": NEW_ID})
    assert state.position(T0) is None
    with pytest.raises(OffsetOutOfRangeError):
        state.request_resets()


def test_a_topic_reassigned_after_leaving_learns_its_id_afresh() -> None:
    state = make()
    plan(state, {"t": OLD_ID, "u": U_ID})
    state.assign([U0])
    plan(state, {"t": OLD_ID, "u": U_ID})
    state.assign([T0, U0])
    state.seek(T0, 4)
    plan(state, {"t": NEW_ID, "u": U_ID})
    assert state.positions() == {T0: 4, U0: 9}, "no position of the old topic was kept"


def test_unknown_topic_id_is_retried_after_a_refresh_not_raised() -> None:
    state = make()
    requests = state.fetches_to_send(LEADERS, NOW, None, {"t": OLD_ID}).requests
    ((node, _),) = requests
    refusal = broker_pb2.FetchResponse.PartitionResponse(
        partition=0, error_code=ErrorCode.UNKNOWN_TOPIC_ID, error_message="another id"
    )
    answer = broker_pb2.FetchResponse(
        topics=[broker_pb2.FetchResponse.TopicResponse(name="t", partitions=[refusal])]
    )
    effects = state.on_fetch_answer(node, answer)
    assert effects.metadata_stale
    assert state.pop_error() is None
    assert state.position(T0) == 3, "kept until the metadata shows a new id"
