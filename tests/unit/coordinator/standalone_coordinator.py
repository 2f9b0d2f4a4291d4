"""A Coordinator with nothing behind its addresses (no controller, no broker), for the unit
tests that drive its image handling and its partitions by hand."""

from __future__ import annotations

from samsa.services.coordinator.coordinator import Coordinator
from samsa.services.coordinator.group_model import GroupConfig


def standalone_coordinator(
    *, listen: str = "127.0.0.1:1", heartbeat_interval_ms: int = 300
) -> Coordinator:
    """Coordinator 1, its controller at a port nobody serves; make it inside a running loop
    (it opens its channels)."""
    return Coordinator(
        coordinator_id=1,
        listen=listen,
        controllers=["127.0.0.1:2"],
        member_key=b"k" * 32,
        heartbeat_interval_ms=heartbeat_interval_ms,
        session_timeout_ms=3000,
        group_config=GroupConfig(),
    )
