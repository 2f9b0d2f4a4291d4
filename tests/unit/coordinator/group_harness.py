"""Test helpers for the group coordinator core: a shard driven with a manual clock and a mutable
topics view, which keeps every record it emitted (encoded, as the log would) and, after every
call that writes, rebuilds a fresh shard from them and compares (`assert_failover`): a handler
whose live state differs from the replay of its records fails the step that did it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from samsa.services.coordinator.group_assignment import UNJUDGED
from samsa.services.coordinator.group_model import GroupConfig, GroupShard
from samsa.services.coordinator.group_records import decode, encode
from samsa.services.coordinator.group_shard import GroupCoordinatorShard
from samsa.services.coordinator.group_writer import GroupResult
from samsa.v1 import coordinator_pb2 as c

Owned = Mapping[str, Iterable[int]]


def owned_message(owned: Owned) -> c.OwnedPartitions:
    message = c.OwnedPartitions()
    for topic in sorted(owned):
        numbers = sorted(owned[topic])
        if numbers:
            message.topics.add(topic=topic, partitions=numbers)
    return message


def assignment_of(response: c.ConsumerGroupHeartbeatResponse) -> dict[str, set[int]]:
    return {entry.topic: set(entry.partitions) for entry in response.assignment.topics}


def persistent_view(state: GroupShard) -> tuple[GroupShard, list[list[str]]]:
    """What must survive a failover: the shard (timers excluded by compare=False) and the order
    of each group's members (replay keeps it: group_replay's "Member order")."""
    return state, [list(state.groups[g].members) for g in sorted(state.groups)]


class GroupHarness:
    def __init__(
        self,
        topics: Mapping[str, int] | None = None,
        config: GroupConfig | None = None,
        group_id: str = "g",
    ) -> None:
        self.coordinator = GroupCoordinatorShard(config or GroupConfig())
        self.topics: dict[str, int] = dict(topics or {"t": 4})
        self.now_ms = 1_000_000
        self.group_id = group_id
        self.log: list[tuple[bytes, bytes | None]] = []

    @property
    def state(self) -> GroupShard:
        return self.coordinator.state

    def group(self, group_id: str | None = None):
        return self.state.groups[group_id or self.group_id]

    def member(self, member_id: str):
        return self.group().members[member_id]

    def keep(self, result: GroupResult) -> GroupResult:
        self.log.extend(encode(record) for record in result.records)
        self.assert_failover()
        return result

    def heartbeat(
        self,
        member_id: str,
        member_epoch: int,
        owned: Owned | None = None,
        **fields,
    ) -> c.ConsumerGroupHeartbeatResponse:
        access = fields.pop("access", UNJUDGED)  # who heartbeats, and the ACLs' judge
        request = c.ConsumerGroupHeartbeatRequest(
            group_id=fields.pop("group_id", self.group_id),
            member_id=member_id,
            member_epoch=member_epoch,
            **fields,
        )
        if owned is not None:
            request.owned_partitions.CopyFrom(owned_message(owned))
        result = self.coordinator.heartbeat(request, self.now_ms, self.topics, access)
        return self.keep(result).response

    def join(
        self,
        member_id: str,
        topics: Iterable[str] = ("t",),
        regex: str = "",
        instance_id: str = "",
        assignor: str = "",
        rebalance_timeout_ms: int = 10_000,
        **fields,
    ) -> c.ConsumerGroupHeartbeatResponse:
        subscription = c.ConsumerGroupSubscription(
            topic_names=[] if regex else list(topics), topic_regex=regex
        )
        return self.heartbeat(
            member_id,
            0,
            owned={},
            subscription=subscription,
            group_instance_id=instance_id,
            server_assignor=assignor,
            rebalance_timeout_ms=rebalance_timeout_ms,
            **fields,
        )

    def commit(
        self, member_id: str, member_epoch: int, offsets: Mapping[tuple[str, int], int]
    ) -> c.OffsetCommitResponse:
        request = c.OffsetCommitRequest(
            group_id=self.group_id, member_id=member_id, member_epoch=member_epoch
        )
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append((partition, offset))
        for topic, entries in by_topic.items():
            topic_request = request.topics.add(name=topic)
            for partition, offset in entries:
                topic_request.partitions.add(
                    partition=partition, committed_offset=offset, committed_leader_epoch=-1
                )
        return self.keep(
            self.coordinator.commit_offsets(request, self.now_ms, self.topics)
        ).response

    def expire(self) -> GroupResult[None]:
        return self.keep(self.coordinator.expire(self.now_ms))

    def rebuilt(self) -> GroupCoordinatorShard:
        """A fresh shard loaded from every record emitted so far, via bytes."""
        fresh = GroupCoordinatorShard(self.coordinator.config)
        for offset, (key, value) in enumerate(self.log):
            fresh.replay(decode(key, value), offset)
        return fresh

    def assert_failover(self) -> None:
        assert persistent_view(self.rebuilt().state) == persistent_view(self.state)

    def fail_over(self) -> None:
        """Replace the coordinator by one rebuilt from the log, timers restarted."""
        self.assert_failover()
        self.coordinator = self.rebuilt()
        self.coordinator.start_timers(self.now_ms)
