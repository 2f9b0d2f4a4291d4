"""The coordinator's instruments: groups, members, rebalances, consumer lag and transactions.

- `samsa.coordinator.groups` {state}, `samsa.coordinator.group.members`;
- `samsa.coordinator.group.rebalances` (counter): group epoch bumps this coordinator wrote;
- `samsa_coordinator_group_lag` {group, topic, partition}: log end offset minus committed
  offset, for every committed offset of the groups loaded here (at most LAG_SERIES_MAX series,
  largest first). Not an OpenTelemetry instrument but a table served beside them under the name
  the exporter gave it (runtime/labelled_series.py says why): a series ends when its group,
  topic or partition leaves the lags, and the 2,001st label set ever seen is not folded into
  one unlabelled overflow series;
- `samsa.coordinator.transactions` {state}, `samsa.coordinator.transactions.open`.

How the values stay cheap and honest. Loaded partitions register here (`loaded`, `dropped`,
called by coordinator_partition.py). While any is registered, one task on the event loop
recomputes the gauges every `REFRESH_INTERVAL_S` from the shards (coordinator_gauges.py, pure),
and every `LAG_REFRESH_INTERVAL_S` asks the partitions' leaders for their log end offsets, one
ListOffsets per leader for all committed partitions at once, to recompute the lags. A lag is
thus at most that old (plus the scrape interval); a partition whose leader did not answer has no
lag series until one does. The exporter's thread only reads the frozen results, never a shard.

With metrics off (`metrics.enabled()` False) `for_coordinator` hands out NO_METRICS: no
instrument, no task.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from samsa.common import limits
from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from samsa.services.coordinator.coordinator_gauges import (
    CoordinatorGauges,
    Lag,
    coordinator_gauges,
    group_lags,
    lag_inputs,
)
from samsa.services.runtime import metrics
from samsa.services.runtime.labelled_series import GaugeTable, LabelledSeries
from samsa.v1 import broker_pb2

log = logging.getLogger(__name__)

REFRESH_INTERVAL_S = 2.0
# One ListOffsets per partition leader per look: cheap, and lag moves slower than a scrape.
LAG_REFRESH_INTERVAL_S = 10.0


class LoadedPartition(Protocol):
    """What the metrics read of a loaded coordinator partition (coordinator_partition.py)."""

    topic: str
    shard: Any  # GroupCoordinatorShard or TransactionShard, by topic
    offsets_log: Any  # offsets_log.OffsetsLog


class NoCoordinatorMetrics:
    """Metrics off: every call is a no-op."""

    def loaded(self, partition: LoadedPartition) -> None:
        pass

    def dropped(self, partition: LoadedPartition) -> None:
        pass

    def rebalanced(self, count: int) -> None:
        pass


NO_METRICS = NoCoordinatorMetrics()


class CoordinatorMetrics(NoCoordinatorMetrics):
    """The instruments of one coordinator process (see the module docstring)."""

    def __init__(self, meter: Meter | None = None) -> None:
        meter = meter or metrics.meter()
        self.partitions: set[LoadedPartition] = set()
        self.gauges = CoordinatorGauges()
        self._lags: tuple[Lag, ...] = ()
        self._lag_table = GaugeTable(
            "samsa_coordinator_group_lag",
            "log end offset minus the group's committed offset",
            ("group", "topic", "partition"),
        )
        self.lag_series = LabelledSeries(self._lag_table)
        self._task: asyncio.Task[None] | None = None
        self._rebalances = meter.create_counter(
            "samsa.coordinator.group.rebalances",
            description="group epoch bumps written by this coordinator",
        )
        meter.create_observable_gauge(
            "samsa.coordinator.groups",
            [self._observe_groups],
            unit="{group}",
            description="consumer groups loaded here, by state",
        )
        meter.create_observable_gauge(
            "samsa.coordinator.group.members",
            [lambda options: [Observation(self.gauges.members)]],
            unit="{member}",
            description="members of the consumer groups loaded here",
        )
        meter.create_observable_gauge(
            "samsa.coordinator.transactions",
            [self._observe_transactions],
            unit="{transaction}",
            description="transactional ids loaded here, by state",
        )
        meter.create_observable_gauge(
            "samsa.coordinator.transactions.open",
            [lambda options: [Observation(self.gauges.transactions_open)]],
            unit="{transaction}",
            description="transactions ongoing or preparing",
        )

    # --- the partitions' side ---------------------------------------------------------------

    def loaded(self, partition: LoadedPartition) -> None:
        self.partitions.add(partition)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._refresh_loop(), name="coordinator-metrics"
            )

    def dropped(self, partition: LoadedPartition) -> None:
        """A partition left this coordinator: its groups' lag series end now, not at the next
        lag look (their new coordinator exports them; a sum over coordinators would double)."""
        self.partitions.discard(partition)
        if not self.partitions:
            self.refresh()  # the loop ends: leave zeros, not the last partition's values
        elif partition.topic == CONSUMER_OFFSETS_TOPIC and self.lags:
            loaded = [p.shard.state for p in self.partitions if p.topic == CONSUMER_OFFSETS_TOPIC]
            self.lags = tuple(
                lag for lag in self.lags if any(lag[0] in shard.groups for shard in loaded)
            )

    def rebalanced(self, count: int) -> None:
        if count:
            self._rebalances.add(count)

    # --- the refresh loop -------------------------------------------------------------------

    def refresh(self) -> None:
        """Recompute the gauges from the loaded shards (on the event loop)."""
        groups = [p.shard.state for p in self.partitions if p.topic == CONSUMER_OFFSETS_TOPIC]
        transactions = [
            p.shard.transactions for p in self.partitions if p.topic == TRANSACTION_STATE_TOPIC
        ]
        self.gauges = coordinator_gauges(groups, transactions)
        if not groups:
            self.lags = ()

    async def refresh_lags(self) -> None:
        """Ask the leaders for the log ends of every committed partition; recompute the lags."""
        offsets = [p for p in self.partitions if p.topic == CONSUMER_OFFSETS_TOPIC]
        if not offsets:
            self.lags = ()
            return
        inputs = lag_inputs(p.shard.state for p in offsets)
        keys = sorted({(topic, partition) for _, topic, partition, _ in inputs})
        # In parts a broker accepts: it refuses a ListOffsets naming more partitions whole.
        step = limits.request_partitions_max
        ends = {}
        for start in range(0, len(keys), step):
            ends.update(
                await offsets[0].offsets_log.list_offsets(
                    keys[start : start + step], broker_pb2.OFFSET_SPEC_LATEST
                )
            )
        log_ends = {key: -1 if end.error_code else end.offset for key, end in ends.items()}
        # Only the partitions still here (one may have left while the brokers answered: its
        # new coordinator exports its groups' lag), with their offsets as they are now.
        offsets = [p for p in offsets if p in self.partitions]
        self.lags = group_lags(lag_inputs(p.shard.state for p in offsets), log_ends)

    async def _refresh_loop(self) -> None:
        loop = asyncio.get_running_loop()
        last_lag = 0.0
        while self.partitions:
            self.refresh()
            if loop.time() - last_lag >= LAG_REFRESH_INTERVAL_S:
                last_lag = loop.time()
                try:
                    await self.refresh_lags()
                except Exception as error:  # a metric must never take the coordinator down
                    log.warning("consumer lag not refreshed: %s", error)
            await asyncio.sleep(REFRESH_INTERVAL_S)

    # --- the exporter's side (its own thread: frozen values only) ---------------------------

    def _observe_groups(self, options: CallbackOptions) -> list[Observation]:
        return [Observation(n, {"state": s}) for s, n in self.gauges.groups_by_state]

    def _observe_transactions(self, options: CallbackOptions) -> list[Observation]:
        return [Observation(n, {"state": s}) for s, n in self.gauges.transactions_by_state]

    @property
    def lags(self) -> tuple[Lag, ...]:
        return self._lags

    @lags.setter
    def lags(self, lags: tuple[Lag, ...]) -> None:
        """New lags: the series of the (group, topic, partition) no longer among them end."""
        self._lags = lags
        self._lag_table.replace(
            {(group, topic, str(partition)): lag for group, topic, partition, lag in lags}
        )


_instance: NoCoordinatorMetrics | None = None


def for_coordinator() -> NoCoordinatorMetrics:
    """The process's instruments (one set, shared by every loaded partition) when metrics are
    on, else the no-op NO_METRICS."""
    global _instance
    if not metrics.enabled():
        return NO_METRICS
    if _instance is None:
        instruments = CoordinatorMetrics()
        metrics.register_collector(instruments.lag_series)
        _instance = instruments
    return _instance
