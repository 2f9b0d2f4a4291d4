"""Broker sessions, as the active controller sees them: who has heartbeated recently enough.

Pure: time comes in as `now_ms`. Sessions are not in the metadata log (heartbeats would flood it);
only their consequence, a FenceBrokerRecord, is. A controller that becomes active has seen none of
the heartbeats its predecessor saw, so `reset_all` starts everybody's session afresh at that
moment: a broker is fenced only after a full session timeout of silence towards *this* controller.
"""

from __future__ import annotations

from collections.abc import Collection


class BrokerLiveness:
    """broker id -> (broker epoch, last heartbeat in ms) of the current sessions."""

    def __init__(self) -> None:
        self._sessions: dict[int, tuple[int, int]] = {}
        self._reset_at_ms: int | None = None

    def heartbeat(self, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        self._sessions[broker_id] = (broker_epoch, now_ms)

    def forget(self, broker_id: int) -> None:
        self._sessions.pop(broker_id, None)

    def reset_all(self, now_ms: int, registered: Collection[int] | None = None) -> None:
        """Every known session restarts now; brokers not yet heard of get one from `now_ms`.
        Given `registered`, the sessions of ids not in it are dropped: a broker unregistered
        while another controller was active is forgotten here too (its id may come back new)."""
        self._sessions = {
            broker: (epoch, now_ms)
            for broker, (epoch, _) in self._sessions.items()
            if registered is None or broker in registered
        }
        self._reset_at_ms = now_ms

    def is_alive(self, broker_id: int, broker_epoch: int, now_ms: int, timeout_ms: int) -> bool:
        """Whether this incarnation of the broker heartbeated within the timeout. One this
        controller has not heard from under that epoch since it became active (the broker's
        heartbeats went to its predecessor) has a session from that moment, as in `expired`:
        otherwise, for a session timeout after every failover, a second process taking a live
        broker's id would be let in (register_broker), and the first one thrown out."""
        session = self._sessions.get(broker_id)
        if session is not None and session[0] == broker_epoch:
            return now_ms - session[1] <= timeout_ms
        return self._reset_at_ms is not None and now_ms - self._reset_at_ms <= timeout_ms

    def expired(
        self, now_ms: int, timeout_ms: int, registered: dict[int, int] | None = None
    ) -> list[int]:
        """Brokers whose session expired. `registered` (id -> epoch) adds brokers this controller
        never heard from: their session counts from the moment it became active."""
        expired = [
            broker for broker, (_, last) in self._sessions.items() if now_ms - last > timeout_ms
        ]
        if registered is not None and self._reset_at_ms is not None:
            silent_since_activation = now_ms - self._reset_at_ms > timeout_ms
            expired += [
                broker
                for broker in registered
                if broker not in self._sessions and silent_since_activation
            ]
        return sorted(expired)
