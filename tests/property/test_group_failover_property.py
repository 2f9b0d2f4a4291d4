"""Goal: a coordinator that takes a partition of `__consumer_offsets` over rebuilds exactly the
shard its predecessor had: after any sequence of handler calls (heartbeats of every kind, offset
commits, expiry, group deletion, topic changes), replaying every emitted record — encoded to bytes
and decoded back, as it would be read from the log — into a fresh shard gives a shard equal to
the live one (timers excluded), with the members in the same order (it picks the assignor).
The same holds for the log as compaction leaves it — only the last record of each key, in log
order, with or without the tombstones — since a new owner may read a compacted partition.

Method: hypothesis draws a list of operations over three members, two groups and a changing
topics view; a small driver turns each into a request (members echo their last assignment as
owned partitions, sometimes with an old epoch or nothing) and keeps every emitted record. The
comparison is done after every operation, not only at the end; the compacted logs are built
here from the definition of compaction and compared at the end.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from samsa.services.coordinator.group_model import GroupConfig
from samsa.services.coordinator.group_records import decode, encode
from samsa.services.coordinator.group_shard import GroupCoordinatorShard
from samsa.v1 import coordinator_pb2 as c

MEMBERS = ["a", "b", "c"]
Entry = tuple[int, bytes, bytes | None]  # a record of the log at its offset
GROUPS = ["g1", "g2"]
CONFIG = GroupConfig(
    session_timeout_ms=3_000, heartbeat_interval_ms=1_000, offsets_retention_ms=5_000
)

heartbeat = st.tuples(
    st.just("heartbeat"),
    st.sampled_from(GROUPS),
    st.sampled_from(MEMBERS),
    st.sampled_from(
        ["join", "current", "current", "previous", "no_owned", "leave", "static_leave"]
    ),
    st.sampled_from(["", "", "range", "uniform"]),
    st.sampled_from([("t",), ("t", "u"), "regex"]),
)
# Heartbeats dominate, as they do in a real group; ticks stay mostly within a session.
operation = st.one_of(
    heartbeat,
    heartbeat,
    heartbeat,
    heartbeat,
    st.tuples(st.just("commit"), st.sampled_from(GROUPS), st.sampled_from([*MEMBERS, ""])),
    st.tuples(st.just("tick"), st.integers(0, 2_500)),
    st.tuples(st.just("topics"), st.sampled_from(["t", "u", "v.x"]), st.integers(1, 4)),
    st.tuples(st.just("delete"), st.sampled_from(GROUPS)),
)


class Driver:
    def __init__(self) -> None:
        self.shard = GroupCoordinatorShard(CONFIG)
        self.log: list[tuple[bytes, bytes | None]] = []
        self.topics = {"t": 2, "u": 1}
        self.now_ms = 0
        # (group, member) -> (epoch, assignment) from the last answer
        self.answers: dict[tuple[str, str], tuple[int, c.OwnedPartitions]] = {}

    def keep(self, result) -> None:
        for record in result.records:
            key, value = encode(record)
            assert decode(key, value) == record
            self.log.append((key, value))

    def heartbeat(self, group_id, member_id, kind, assignor, subscription) -> None:
        request = c.ConsumerGroupHeartbeatRequest(
            group_id=group_id, member_id=member_id, group_instance_id=f"i-{member_id}"
        )
        epoch, owned = self.answers.get((group_id, member_id), (0, c.OwnedPartitions()))
        if epoch == 0 and kind not in ("leave", "static_leave"):
            kind = "join"  # a member the driver never saw join joins first
        request.member_epoch = {"join": 0, "leave": -1, "static_leave": -2}.get(kind, epoch)
        if kind == "previous":
            request.member_epoch = max(epoch - 1, 1)
        if kind != "no_owned":
            request.owned_partitions.CopyFrom(owned)
        if kind == "join":
            request.rebalance_timeout_ms = 2_000
            request.owned_partitions.Clear()
            request.owned_partitions.SetInParent()
        if kind == "join" or assignor:
            if subscription == "regex":
                request.subscription.topic_regex = r"v\..*|t"
            else:
                request.subscription.topic_names.extend(subscription)
            request.server_assignor = assignor
        result = self.shard.heartbeat(request, self.now_ms, self.topics)
        self.keep(result)
        if result.response.error_code == 0 and result.response.member_epoch > 0:
            self.answers[(group_id, member_id)] = (
                result.response.member_epoch,
                result.response.assignment,
            )
        elif result.response.error_code != 0 or kind in ("leave", "static_leave"):
            self.answers.pop((group_id, member_id), None)

    def commit(self, group_id, member_id) -> None:
        epoch = self.answers.get((group_id, member_id), (-1, None))[0] if member_id else -1
        request = c.OffsetCommitRequest(group_id=group_id, member_id=member_id, member_epoch=epoch)
        request.topics.add(name="t").partitions.add(partition=0, committed_offset=self.now_ms)
        self.keep(self.shard.commit_offsets(request, self.now_ms, self.topics))

    def apply(self, op) -> None:
        if op[0] == "heartbeat":
            self.heartbeat(*op[1:])
        elif op[0] == "commit":
            self.commit(*op[1:])
        elif op[0] == "tick":
            self.now_ms += op[1]
            self.keep(self.shard.expire(self.now_ms))
        elif op[0] == "topics":
            self.topics[op[1]] = max(self.topics.get(op[1], 0), op[2])
        else:
            self.keep(self.shard.delete_groups([op[1]]))

    def assert_rebuilt_equal(self, log: list[Entry] | None = None) -> None:
        """A fresh shard replaying `log` ((offset, key, value); default: the whole log) equals
        the live one."""
        fresh = GroupCoordinatorShard(CONFIG)
        whole = [(offset, key, value) for offset, (key, value) in enumerate(self.log)]
        for offset, key, value in whole if log is None else log:
            fresh.replay(decode(key, value), offset)
        assert fresh.state == self.shard.state
        for group_id, group in self.shard.state.groups.items():
            assert list(fresh.state.groups[group_id].members) == list(group.members)


@given(st.lists(operation, min_size=10, max_size=60))
def test_replaying_the_emitted_records_rebuilds_the_shard(operations) -> None:
    driver = Driver()
    for op in operations:
        driver.apply(op)
        driver.assert_rebuilt_equal()


def compacted(log: list[tuple[bytes, bytes | None]], keep_tombstones: bool):
    """The newest record of each key, at its offset, as the cleaner leaves a log."""
    last = {key: index for index, (key, _) in enumerate(log)}
    return [
        (index, key, value)
        for index, (key, value) in enumerate(log)
        if last[key] == index and (keep_tombstones or value is not None)
    ]


@given(st.lists(operation, min_size=20, max_size=80))
def test_replaying_the_compacted_log_rebuilds_the_shard(operations) -> None:
    driver = Driver()
    for op in operations:
        driver.apply(op)
    driver.assert_rebuilt_equal(compacted(driver.log, keep_tombstones=True))
    driver.assert_rebuilt_equal(compacted(driver.log, keep_tombstones=False))
