"""Goal: with auto.offset.reset=none, a partition left without a position (no committed offset)
is never looked up with ListOffsets: it is raised by the next poll() as OffsetOutOfRangeError
(Kafka's NoOffsetForPartitionException). Looked up, its NO_RESET spec (-1) reached the broker,
which refused it as INVALID_REQUEST, and poll() raised that confusing refusal first.

Method: drive the pure FetchState of a group consumer: its COMMITTED reset is looked up, the
group has no committed offset, and we read what is left to look up and what poll() raises.
"""

from __future__ import annotations

import pytest

from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import COMMITTED, FetchState
from samsa.common.errors import OffsetOutOfRangeError

T0 = ("t", 0)


def test_a_partition_without_a_committed_offset_is_not_looked_up_with_reset_none() -> None:
    config = {"bootstrap.servers": "x:1", "group.id": "g", "auto.offset.reset": "none"}
    state = FetchState(ConsumerConfig.from_dict(config))
    state.assign([T0])
    assert state.request_resets() is True
    ((tp, (spec, token)),) = state.offsets_to_look_up().items()
    assert (tp, spec) == (T0, COMMITTED)
    state.on_committed_missing({T0: token})
    assert not state.lookups_due(), "nothing for the driver to look up"
    assert state.offsets_to_look_up() == {}, "no ListOffsets for a spec the broker refuses"
    with pytest.raises(OffsetOutOfRangeError, match=r"auto\.offset\.reset=none"):
        state.request_resets()
    state.seek(T0, 4)
    assert state.request_resets() is False and state.position(T0) == 4
