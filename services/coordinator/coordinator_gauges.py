"""What a coordinator's gauges say, computed from the shards it has loaded (pure).

- groups by state (empty, assigning, reconciling, stable: group_admin.group_state, KIP-848's
  derived state) and their members;
- transactions by state, and the open ones (ongoing or preparing: their markers are not all
  written yet);
- consumer group lag per (group, topic, partition): the partition's log end offset minus the
  group's committed offset, never below 0 (DescribeGroupLag's rule). The committed offsets are
  the shards'; the log ends come from the brokers (coordinator_metrics.py asks for them every
  `LAG_REFRESH_INTERVAL_S`), so a lag is as old as that look, never a guess;
- rebalances: group epoch bumps, counted from the records a coordinator writes (a
  group_metadata record with an epoch above 0 is one bump, Kafka's consumer-group-rebalance
  count). Counting what was written, not what was replayed, keeps a reload from counting a
  group's history again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from samsa.services.coordinator import group_admin
from samsa.services.coordinator.group_model import GroupShard
from samsa.services.coordinator.group_records import GroupRecord
from samsa.services.coordinator.transaction_model import (
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    TransactionMetadata,
    TransactionState,
)

GROUP_STATE_NAMES = {
    group_admin.EMPTY: "empty",
    group_admin.ASSIGNING: "assigning",
    group_admin.RECONCILING: "reconciling",
    group_admin.STABLE_GROUP: "stable",
}
OPEN_TRANSACTION_STATES = frozenset({ONGOING, PREPARE_COMMIT, PREPARE_ABORT, PREPARE_EPOCH_FENCE})
# At most this many lag series are exported (Prometheus holds every label set it ever saw): the
# largest lags first. A coordinator with more committed partitions exports its worst ones.
LAG_SERIES_MAX = 10_000

TopicPartition = tuple[str, int]
LagInput = tuple[str, str, int, int]  # (group, topic, partition, committed offset)
Lag = tuple[str, str, int, int]  # (group, topic, partition, lag)


@dataclass(frozen=True)
class CoordinatorGauges:
    groups_by_state: tuple[tuple[str, int], ...] = tuple((n, 0) for n in GROUP_STATE_NAMES.values())
    members: int = 0
    transactions_by_state: tuple[tuple[str, int], ...] = ()
    transactions_open: int = 0


def coordinator_gauges(
    group_shards: Iterable[GroupShard],
    transaction_tables: Iterable[Mapping[str, TransactionMetadata]],
) -> CoordinatorGauges:
    """The gauges over every loaded partition's groups and transactions; every group state is
    named (zeros included) so that a state that empties drops to 0 rather than vanishing."""
    groups = dict.fromkeys(GROUP_STATE_NAMES.values(), 0)
    members = 0
    for shard in group_shards:
        for group in shard.groups.values():
            groups[GROUP_STATE_NAMES.get(group_admin.group_state(group), "dead")] += 1
            members += len(group.members)
    transactions = {state.name.lower(): 0 for state in TransactionState}
    open_count = 0
    for table in transaction_tables:
        for metadata in table.values():
            transactions[metadata.state.name.lower()] += 1
            open_count += metadata.state in OPEN_TRANSACTION_STATES
    return CoordinatorGauges(
        tuple(groups.items()), members, tuple(transactions.items()), open_count
    )


def lag_inputs(group_shards: Iterable[GroupShard]) -> list[LagInput]:
    """Every committed offset of every group: what the lag is measured from."""
    return [
        (group.group_id, topic, partition, value.committed_offset)
        for shard in group_shards
        for group in shard.groups.values()
        for (topic, partition), value in group.offsets.items()
    ]


def group_lags(
    inputs: Iterable[LagInput],
    log_ends: Mapping[TopicPartition, int],
    *,
    limit: int = LAG_SERIES_MAX,
) -> tuple[Lag, ...]:
    """The lag of each committed offset whose log end is known (≥ 0), largest first, at most
    `limit` of them."""
    lags = [
        (group, topic, partition, max(0, log_ends[(topic, partition)] - committed))
        for group, topic, partition, committed in inputs
        if committed >= 0 and log_ends.get((topic, partition), -1) >= 0
    ]
    lags.sort(key=lambda lag: (-lag[3], lag[:3]))
    return tuple(lags[:limit])


def rebalances_in(records: Iterable[GroupRecord]) -> int:
    """How many group epoch bumps `records` carry."""
    return sum(
        1
        for key, value in records
        if value is not None
        and key.WhichOneof("key") == "group_metadata"
        and value.group_metadata.group_epoch > 0
    )
