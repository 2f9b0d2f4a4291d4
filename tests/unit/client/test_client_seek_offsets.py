"""Goal: seek() refuses an offset no fetch can carry, at the call. It took any value it could
compare with 0: a float (5.0), a bool or an int past int64 became the position, and then the plan
of every fetch raised building the FetchRequest (TypeError, protobuf's "Value out of range"), so
the driver logged that error every turn and fetched no partition of the consumer again, the
others included, while poll() returned nothing. An int, a numpy integer among them, is taken.

Method: the pure FetchState: the seek, the position, and the fetches it then plans.
"""

from __future__ import annotations

import pytest

from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState

T0, T1 = ("t", 0), ("t", 1)
LEADERS = {T0: 1, T1: 1}


def make() -> FetchState:
    state = FetchState(
        ConsumerConfig.from_dict({"bootstrap.servers": "x:1", "auto.offset.reset": "earliest"})
    )
    state.assign([T0, T1])
    state.seek(T0, 3)
    state.seek(T1, 0)
    return state


def fetched(state: FetchState) -> dict[tuple[str, int], int]:
    ((_, request),) = state.fetches_to_send(LEADERS, 1_000).requests
    return {(t.name, p.partition): p.fetch_offset for t in request.topics for p in t.partitions}


@pytest.mark.parametrize(
    ("offset", "error"),
    [(5.0, TypeError), ("5", TypeError), (True, TypeError), (2**63, ValueError), (-1, ValueError)],
)
def test_an_offset_no_fetch_can_carry_is_refused_and_the_position_kept(
    offset: object, error: type[Exception]
) -> None:
    state = make()
    with pytest.raises(error, match="offset must be"):
        state.seek(T0, offset)  # type: ignore[arg-type]
    assert state.position(T0) == 3
    assert fetched(state) == {T0: 3, T1: 0}, "every partition is still fetched"


def test_an_int_and_a_numpy_integer_are_taken_as_ints() -> None:
    numpy = pytest.importorskip("numpy")
    state = make()
    state.seek(T0, numpy.int64(7))
    state.seek(T1, 2**63 - 1)
    assert type(state.position(T0)) is int
    assert fetched(state) == {T0: 7, T1: 2**63 - 1}
