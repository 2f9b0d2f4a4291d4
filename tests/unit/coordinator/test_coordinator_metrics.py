"""Goal: a coordinator's metrics say what its loaded shards hold: groups by derived state and
their members, transactions by state and the open ones, the lag of every committed offset
against the log end the brokers reported (largest first, capped, unknown ends left out), and one
rebalance per group epoch bump written (never for an offsets-only group's epoch 0).

Method: the pure functions of coordinator_gauges.py over hand-built shards and records; then
CoordinatorMetrics on a private MeterProvider's meter, over stand-in partitions and a stand-in
offsets log that answers canned log end offsets.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from samsa.common.errors import ErrorCode
from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from samsa.services.coordinator import coordinator_metrics, group_records
from samsa.services.coordinator.coordinator_gauges import (
    coordinator_gauges,
    group_lags,
    lag_inputs,
    rebalances_in,
)
from samsa.services.coordinator.coordinator_metrics import NO_METRICS, CoordinatorMetrics
from samsa.services.coordinator.group_model import ConsumerGroup, GroupShard, Member
from samsa.services.coordinator.offsets_log import OffsetResult
from samsa.services.coordinator.transaction_model import (
    COMPLETE_COMMIT,
    ONGOING,
    PREPARE_COMMIT,
    TransactionMetadata,
)
from samsa.v1 import group_records_pb2 as g


def shard() -> GroupShard:
    empty = ConsumerGroup("idle")
    empty.offsets[("t", 0)] = g.OffsetCommitValue(committed_offset=5)
    stable = ConsumerGroup("busy", group_epoch=2, assignment_epoch=2)
    stable.members = {m: Member(m, member_epoch=2) for m in ("a", "b")}
    stable.offsets[("t", 0)] = g.OffsetCommitValue(committed_offset=90)
    stable.offsets[("t", 1)] = g.OffsetCommitValue(committed_offset=10)
    assigning = ConsumerGroup("new", group_epoch=3, assignment_epoch=2)
    assigning.members = {"c": Member("c", member_epoch=2)}
    return GroupShard(groups={group.group_id: group for group in (empty, stable, assigning)})


def transactions() -> dict[str, TransactionMetadata]:
    def txn(name: str, state) -> TransactionMetadata:  # type: ignore[no-untyped-def]
        partitions = frozenset() if state == COMPLETE_COMMIT else frozenset({("t", 0)})
        start_ms = -1 if state == COMPLETE_COMMIT else 0
        return TransactionMetadata(
            name, 1, 0, 60_000, state, 0, partitions=partitions, transaction_start_ms=start_ms
        )

    return {
        "a": txn("a", ONGOING),
        "b": txn("b", PREPARE_COMMIT),
        "c": txn("c", COMPLETE_COMMIT),
    }


def test_groups_by_state_members_and_transactions_by_state():
    gauges = coordinator_gauges([shard()], [transactions()])
    assert dict(gauges.groups_by_state) == {
        "empty": 1,
        "assigning": 1,
        "reconciling": 0,
        "stable": 1,
    }
    assert gauges.members == 3
    by_state = dict(gauges.transactions_by_state)
    assert (by_state["ongoing"], by_state["prepare_commit"], by_state["complete_commit"]) == (
        1,
        1,
        1,
    )
    assert by_state["empty"] == 0 and gauges.transactions_open == 2


def test_lag_is_the_log_end_minus_the_committed_offset_largest_first():
    inputs = lag_inputs([shard()])
    ends = {("t", 0): 100, ("t", 1): -1}  # t-1's leader did not answer
    assert group_lags(inputs, ends) == (("idle", "t", 0, 95), ("busy", "t", 0, 10))
    assert group_lags(inputs, {("t", 0): 50, ("t", 1): 10}, limit=1) == (("idle", "t", 0, 45),)
    assert group_lags(inputs, {("t", 0): 50, ("t", 1): 10})[1:] == (
        ("busy", "t", 0, 0),  # never below 0 (the end was read before the commit)
        ("busy", "t", 1, 0),
    )


def test_a_rebalance_is_a_written_group_epoch_bump():
    written = [
        group_records.group_metadata("a", g.GroupMetadataValue(group_epoch=4)),
        group_records.group_metadata("b", g.GroupMetadataValue()),  # an offsets-only group
        group_records.group_metadata("c", None),  # deleted
        group_records.offset_commit("a", "t", 0, g.OffsetCommitValue(committed_offset=1)),
    ]
    assert rebalances_in(written) == 1


def test_metrics_off_means_no_instruments():
    assert coordinator_metrics.for_coordinator() is NO_METRICS


def test_the_instruments_read_the_refreshed_snapshot():
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    instruments = CoordinatorMetrics(provider.get_meter("test"))

    class OffsetsLog:
        async def list_offsets(self, partitions, spec):  # type: ignore[no-untyped-def]
            ends = {("t", 0): OffsetResult(ErrorCode.NONE, 100)}
            return {
                key: ends.get(key, OffsetResult(ErrorCode.LEADER_NOT_AVAILABLE))
                for key in partitions
            }

    class Partition(SimpleNamespace):
        __hash__ = object.__hash__  # as CoordinatorPartition: hashed by identity

    groups = Partition(
        topic=CONSUMER_OFFSETS_TOPIC,
        shard=SimpleNamespace(state=shard()),
        offsets_log=OffsetsLog(),
    )
    txns = Partition(
        topic=TRANSACTION_STATE_TOPIC,
        shard=SimpleNamespace(transactions=transactions()),
        offsets_log=None,
    )
    instruments.partitions.update({groups, txns})  # as `loaded` does, without its task
    instruments.refresh()
    asyncio.run(instruments.refresh_lags())
    instruments.rebalanced(2)

    points: dict[str, dict[tuple, float]] = {}
    for scope in reader.get_metrics_data().resource_metrics[0].scope_metrics:
        for metric in scope.metrics:
            for point in metric.data.data_points:
                key = tuple(sorted((point.attributes or {}).items()))
                points.setdefault(metric.name, {})[key] = point.value
    assert points["samsa.coordinator.groups"][(("state", "stable"),)] == 1
    assert points["samsa.coordinator.group.members"] == {(): 3}
    (lag_table,) = instruments.lag_series.tables  # served beside the instruments
    assert lag_table.values() == {("idle", "t", "0"): 95, ("busy", "t", "0"): 10}
    assert points["samsa.coordinator.transactions.open"] == {(): 2}
    assert points["samsa.coordinator.transactions"][(("state", "ongoing"),)] == 1
    assert points["samsa.coordinator.group.rebalances"] == {(): 2}
    instruments.partitions.clear()
    instruments.dropped(groups)
    assert instruments.gauges.members == 0 and instruments.lags == ()
    assert lag_table.values() == {}  # the groups are gone: so are their lag series
    provider.shutdown()


def test_a_dropped_partition_takes_its_groups_lag_series_at_once():
    """When this coordinator loses a __consumer_offsets partition (it moved to another
    coordinator), the lag of its groups must not stay exported here until the next lag look
    (10 s): the new owner exports it too, and a sum over coordinators would double it."""
    provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    instruments = CoordinatorMetrics(provider.get_meter("test"))

    class Partition(SimpleNamespace):
        __hash__ = object.__hash__

    kept = Partition(
        topic=CONSUMER_OFFSETS_TOPIC,
        shard=SimpleNamespace(state=GroupShard(groups={"stays": ConsumerGroup("stays")})),
        offsets_log=None,
    )
    moved = Partition(topic=CONSUMER_OFFSETS_TOPIC, shard=SimpleNamespace(state=shard()))
    instruments.partitions.update({kept, moved})
    instruments.lags = (("idle", "t", 0, 95), ("stays", "t", 0, 7), ("busy", "t", 0, 10))
    instruments.dropped(moved)
    assert instruments.lags == (("stays", "t", 0, 7),)
    (lag_table,) = instruments.lag_series.tables
    assert lag_table.values() == {("stays", "t", "0"): 7}
    provider.shutdown()


def test_lag_is_asked_in_requests_a_broker_accepts(monkeypatch):  # type: ignore[no-untyped-def]
    """A broker refuses a ListOffsets naming more than request_partitions_max partitions whole
    (RESOURCE_EXHAUSTED); the lag look asked for every committed partition of the loaded groups
    at once, so past that many partitions on one leader no group had any lag series at all."""
    monkeypatch.setattr(coordinator_metrics.limits, "request_partitions_max", 3)
    provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    instruments = CoordinatorMetrics(provider.get_meter("test"))
    asked: list[int] = []

    class OffsetsLog:
        async def list_offsets(self, partitions, spec):  # type: ignore[no-untyped-def]
            wanted = list(partitions)
            asked.append(len(wanted))
            if len(wanted) > 3:  # what the broker's refusal comes back as
                return {key: OffsetResult(ErrorCode.NETWORK_EXCEPTION) for key in wanted}
            return {key: OffsetResult(ErrorCode.NONE, 100) for key in wanted}

    class Partition(SimpleNamespace):
        __hash__ = object.__hash__

    group = ConsumerGroup("wide")
    for partition in range(7):
        group.offsets[("t", partition)] = g.OffsetCommitValue(committed_offset=partition)
    instruments.partitions.add(
        Partition(
            topic=CONSUMER_OFFSETS_TOPIC,
            shard=SimpleNamespace(state=GroupShard(groups={"wide": group})),
            offsets_log=OffsetsLog(),
        )
    )
    asyncio.run(instruments.refresh_lags())
    assert max(asked) <= 3
    assert sorted(lag[2] for lag in instruments.lags) == list(range(7))
    provider.shutdown()


def test_a_partition_dropped_while_the_lag_look_waits_gets_no_lag():
    """The lag look waits for the brokers; a partition that leaves meanwhile must not have its
    groups' lag put back by the answer (its new coordinator exports it)."""
    provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    instruments = CoordinatorMetrics(provider.get_meter("test"))

    class Partition(SimpleNamespace):
        __hash__ = object.__hash__

    stays = ConsumerGroup("stays")
    stays.offsets[("t", 0)] = g.OffsetCommitValue(committed_offset=1)

    class OffsetsLog:
        async def list_offsets(self, partitions, spec):  # type: ignore[no-untyped-def]
            instruments.dropped(moved)  # the partition moves while the brokers answer
            return {key: OffsetResult(ErrorCode.NONE, 100) for key in partitions}

    kept = Partition(
        topic=CONSUMER_OFFSETS_TOPIC,
        shard=SimpleNamespace(state=GroupShard(groups={"stays": stays})),
        offsets_log=OffsetsLog(),
    )
    moved = Partition(
        topic=CONSUMER_OFFSETS_TOPIC, shard=SimpleNamespace(state=shard()), offsets_log=OffsetsLog()
    )
    instruments.partitions.update({kept, moved})
    asyncio.run(instruments.refresh_lags())
    assert instruments.lags == (("stays", "t", 0, 99),)
    provider.shutdown()
