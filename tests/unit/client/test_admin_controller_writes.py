"""Goal: Admin's writes to the controllers follow NOT_CONTROLLER redirects without hammering
them: two controllers that each name the other as active (stale views while an election runs)
are asked a bounded number of times per second, not in a tight loop for request.timeout.ms.

Method: two gRPC servers on loopback answering CreateTopics with NOT_CONTROLLER naming each
other; the real Admin writes through them with a 1 s request.timeout.ms.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_controllers import NotController, serving_controllers

from samsa.client.admin import Admin
from samsa.client.controller_calls import WRITE_RETRY_BACKOFF_S
from samsa.client.errors import NoBrokersAvailable


@pytest.fixture
def two_controllers_naming_each_other() -> Iterator[tuple[str, list[NotController]]]:
    servicers = [NotController(), NotController()]
    with serving_controllers(*servicers) as endpoints:
        servicers[0].active, servicers[1].active = endpoints[1], endpoints[0]
        yield ",".join(endpoints), servicers


def test_redirects_between_two_controllers_back_off(two_controllers_naming_each_other) -> None:  # type: ignore[no-untyped-def]
    bootstrap, servicers = two_controllers_naming_each_other
    admin = Admin({"bootstrap.servers": bootstrap, "request.timeout.ms": 1000})
    with admin, pytest.raises(NoBrokersAvailable, match="not the active controller"):
        admin.create_topic("t", 1, 1)
    asked = sum(servicer.calls for servicer in servicers)
    assert asked >= 2, "the redirect was followed"
    assert asked <= 1.0 / WRITE_RETRY_BACKOFF_S + 3, f"{asked} CreateTopics in one second"
