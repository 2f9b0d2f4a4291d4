"""Goal: a second process taking a live broker's (or coordinator's) id is refused right after a
controller failover too, not only in steady state. The new active controller has heard none of
the live one's heartbeats; its sessions counted from its activation for fencing (`expired`) but
not for the duplicate check (`is_alive`), so for a session timeout after every failover the
duplicate, retrying every 0.5 s, was registered and the live process thrown out (STALE_BROKER_EPOCH
at its next heartbeat, then a registration counted as unclean, KIP-966).

Method: register and unfence with one controller's sessions, then decide the duplicate's
registration with a fresh `BrokerLiveness` reset at activation, as main.py's hook does, within and
after the session timeout.
"""

from __future__ import annotations

from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.controller import control_plane as cp
from samsa.services.controller.liveness import BrokerLiveness
from samsa.v1 import controller_pb2 as c

TIMEOUT_MS = 9000
ACTIVATED_MS = 2000


def _commit(image: MetadataImage, result: cp.ControlResult) -> MetadataImage:
    return replay(image, make_batch(image, result.records, 1)) if result.records else image


def _live_broker() -> MetadataImage:
    image = MetadataImage.empty()
    request = c.RegisterBrokerRequest(broker_id=1, incarnation_id="a", endpoint="h:1")
    image = _commit(
        image,
        cp.register_broker(
            image, request, liveness=BrokerLiveness(), now_ms=0, session_timeout_ms=TIMEOUT_MS
        ),
    )
    heartbeat = c.BrokerHeartbeatRequest(broker_id=1, broker_epoch=0, metadata_offset=1)
    image = _commit(image, cp.broker_heartbeat(image, heartbeat))
    assert not image.brokers[1].fenced
    return image


def _activated() -> BrokerLiveness:
    sessions = BrokerLiveness()
    sessions.reset_all(ACTIVATED_MS)
    return sessions


def test_a_duplicate_broker_is_refused_within_a_session_of_the_failover():
    image, sessions = _live_broker(), _activated()
    duplicate = c.RegisterBrokerRequest(broker_id=1, incarnation_id="b", endpoint="h:2")
    now_ms = ACTIVATED_MS + 500
    assert sessions.expired(now_ms, TIMEOUT_MS, {1: 0}) == [], "alive for the fencing loop"
    refused = cp.register_broker(
        image, duplicate, liveness=sessions, now_ms=now_ms, session_timeout_ms=TIMEOUT_MS
    )
    assert refused.records == []
    assert refused.response.status.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    # Once a session of silence has passed, the registered one is gone: a restart gets in.
    later_ms = ACTIVATED_MS + TIMEOUT_MS + 1
    assert sessions.expired(later_ms, TIMEOUT_MS, {1: 0}) == [1]
    accepted = cp.register_broker(
        image, duplicate, liveness=sessions, now_ms=later_ms, session_timeout_ms=TIMEOUT_MS
    )
    assert accepted.response.status.error_code == ErrorCode.NONE


def test_a_duplicate_coordinator_is_refused_within_a_session_of_the_failover():
    image = MetadataImage.empty()
    first = c.RegisterCoordinatorRequest(coordinator_id=1, incarnation_id="a", endpoint="h:1")
    image = _commit(
        image,
        cp.register_coordinator(
            image, first, liveness=BrokerLiveness(), now_ms=0, session_timeout_ms=TIMEOUT_MS
        ),
    )
    duplicate = c.RegisterCoordinatorRequest(coordinator_id=1, incarnation_id="b", endpoint="h:2")
    refused = cp.register_coordinator(
        image,
        duplicate,
        liveness=_activated(),
        now_ms=ACTIVATED_MS + 500,
        session_timeout_ms=TIMEOUT_MS,
    )
    assert refused.records == []
    assert refused.response.status.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION


def test_a_session_of_another_epoch_counts_from_the_activation_too():
    """The entry this controller kept from an earlier term names an older registration (the
    broker registered again through another controller meanwhile)."""
    sessions = BrokerLiveness()
    sessions.heartbeat(1, broker_epoch=3, now_ms=0)
    sessions.reset_all(ACTIVATED_MS)
    assert sessions.is_alive(1, 7, ACTIVATED_MS + TIMEOUT_MS, TIMEOUT_MS)
    assert not sessions.is_alive(1, 7, ACTIVATED_MS + TIMEOUT_MS + 1, TIMEOUT_MS)
    assert not BrokerLiveness().is_alive(1, 7, 0, TIMEOUT_MS), "never active: no sessions"
