"""What the rebalance tests share: a pure GroupMember of one consumer ("m-1" in group "g"), the
heartbeat answers that assign it partitions of one topic, and a listener that records its calls."""

from __future__ import annotations

from samsa.client.group_member import GroupMember, MemberSettings
from samsa.client.heartbeat_fields import partitions_to_proto
from samsa.client.rebalance import ConsumerRebalanceListener
from samsa.v1 import coordinator_pb2 as cp

T = "orders"


def member(rebalance_timeout_ms: int = 30_000, max_poll_interval_ms: int = 300_000) -> GroupMember:
    return GroupMember(
        MemberSettings(
            group_id="g",
            member_id="m-1",
            instance_id="",
            client_id="",
            rebalance_timeout_ms=rebalance_timeout_ms,
            max_poll_interval_ms=max_poll_interval_ms,
            server_assignor="",
            retry_backoff_ms=100,
        )
    )


def answer(epoch: int, *partitions: int) -> cp.ConsumerGroupHeartbeatResponse:
    """The coordinator's answer: member epoch `epoch`, owning these partitions of T."""
    return cp.ConsumerGroupHeartbeatResponse(
        member_id="m-1",
        member_epoch=epoch,
        heartbeat_interval_ms=1000,
        assignment=partitions_to_proto(frozenset((T, p) for p in partitions)),
    )


class Recorder(ConsumerRebalanceListener):
    """Records assigned and revoked calls; a lost call takes the default (on_partitions_revoked)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[tuple[str, int]]]] = []

    def on_partitions_assigned(self, partitions: list[tuple[str, int]]) -> None:
        self.calls.append(("assigned", partitions))

    def on_partitions_revoked(self, partitions: list[tuple[str, int]]) -> None:
        self.calls.append(("revoked", partitions))


class LostRecorder(Recorder):
    """Records lost calls as such."""

    def on_partitions_lost(self, partitions: list[tuple[str, int]]) -> None:
        self.calls.append(("lost", partitions))
