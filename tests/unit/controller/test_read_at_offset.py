"""Goal: a Describe* at a `min_metadata_offset` no controller has committed is a non-retriable
INVALID_ARGUMENT that says where the log ends, while an offset a lagging controller may still
apply stays a retriable UNAVAILABLE after the bounded wait.

Method: the servicer's `_read_at` over a real `ControllerDriver` (no quorum: its image and
activity are set by hand), a servicer holding only that driver, and a fake gRPC context whose
`abort` raises; the bounded wait is shortened so the UNAVAILABLE cases answer in milliseconds.
"""

from __future__ import annotations

import asyncio
import dataclasses

import grpc
import pytest

from samsa.common import limits
from samsa.metadata.image import MetadataImage
from samsa.services.controller import servicer
from samsa.services.controller.driver import ControllerDriver


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class FakeContext:
    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


def read_at(
    *, active: bool, end_offset: int, min_offset: int, in_flight: int = 0, deposed: bool = False
) -> None:
    """`_read_at` on a driver in the given state; `deposed`: it stops being active mid-wait."""

    async def run() -> None:
        driver = ControllerDriver(node_id=1, raft_address_to_node={})
        driver.image = dataclasses.replace(MetadataImage.empty(), end_offset=end_offset)
        driver.active = active
        driver._records_in_flight = in_flight
        # `_read_at` reads only the driver; skip the constructor, whose other collaborators
        # (liveness, membership) this test does not need.
        service = object.__new__(servicer.ControllerServicer)
        service.driver = driver
        if deposed:
            asyncio.get_running_loop().call_later(0.01, setattr, driver, "active", False)
        await service._read_at(min_offset, FakeContext())

    asyncio.run(run())


@pytest.fixture(autouse=True)
def short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servicer, "READ_YOUR_WRITES_WAIT_S", 0.05)


def test_an_offset_beyond_the_active_controllers_log_is_invalid_and_says_where_it_ends() -> None:
    with pytest.raises(Aborted) as refused:
        read_at(active=True, end_offset=7, min_offset=10**12)
    assert refused.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert "ends at offset 7" in refused.value.details
    assert "status.metadata_offset" in refused.value.details


def test_an_offset_inside_the_batch_in_flight_stays_retriable() -> None:
    # Committed but not yet applied here: the client may already have seen offset 10.
    with pytest.raises(Aborted) as refused:
        read_at(active=True, end_offset=7, min_offset=10, in_flight=3)
    assert refused.value.code is grpc.StatusCode.UNAVAILABLE


def test_a_leader_deposed_during_the_wait_does_not_refuse() -> None:
    # Cut off from its quorum, it believed it was active while a new leader committed more.
    with pytest.raises(Aborted) as refused:
        read_at(active=True, end_offset=7, min_offset=7 + 1000, deposed=True)
    assert refused.value.code is grpc.StatusCode.UNAVAILABLE


def test_an_offset_no_quorum_can_have_reached_is_refused_without_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Further ahead than a new leader could commit during the old one's fallback window: the
    # answer must not wait (a client's 5 s call deadline would expire first under load).
    async def must_not_wait(*_: object) -> bool:
        raise AssertionError("an absurd offset waited for the read-your-writes wait")

    monkeypatch.setattr(ControllerDriver, "wait_for_offset", must_not_wait)
    with pytest.raises(Aborted) as refused:
        read_at(active=True, end_offset=7, min_offset=8 + limits.metadata_offset_ahead_max)
    assert refused.value.code is grpc.StatusCode.INVALID_ARGUMENT


def test_a_follower_cannot_tell_so_it_answers_retriable_unavailable() -> None:
    # A follower lags the active controller by an unknown number of records.
    with pytest.raises(Aborted) as refused:
        read_at(active=False, end_offset=7, min_offset=10**12)
    assert refused.value.code is grpc.StatusCode.UNAVAILABLE
    assert "up to offset 7" in refused.value.details


def test_an_applied_offset_is_served() -> None:
    read_at(active=True, end_offset=7, min_offset=7)
    read_at(active=False, end_offset=7, min_offset=3)
